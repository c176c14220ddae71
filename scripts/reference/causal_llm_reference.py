#!/usr/bin/env python3
"""Python reference for causal mode on Llama, Qwen2, Mistral (issue 15) and real GPT-2 (IgLM).

The same computation as causal_reference.py (whose rollout, correction and flow it imports),
for any AutoModelForCausalLM folder, float32, eager attention:

  generation   greedy model.generate(do_sample=False, max_new_tokens=n), stopping at EOS
  attention    one full forward pass over the N = m + g - 1 fed positions with
               output_attentions (grouped-query heads come out expanded to the query heads;
               sliding windows masked); for GPT-2 and Llama it is checked against the
               per-step attentions of generate() with its KV cache
  tokenizer    tokenizer.json alone (PreTrainedTokenizerFast), no chat template; IgLM's
               prompt ids come from its vocab.txt, token by token
               as IgLM builds them ([chain, species] + list(sequence))

Usage:
  causal_llm_reference.py --fixtures      regenerate tests/fixtures/causal/llm/ from its cases.json
  causal_llm_reference.py --real DIR      regenerate tests/fixtures/causal/real/ (IgLM at DIR)
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

from causal_reference import augment, flow_rows, joint, uniform_causal

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "causal")


def load(folder):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    path = os.path.join(folder, "tokenizer.json")
    tok = PreTrainedTokenizerFast(tokenizer_file=path)
    return tok, model


def generate(tok, model, ids, n):
    torch.set_grad_enabled(False)
    m = len(ids)
    eos = model.config.eos_token_id
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, m, dtype=torch.long),
                         max_new_tokens=n, do_sample=False, eos_token_id=eos,
                         pad_token_id=eos if isinstance(eos, int) else 0,
                         output_attentions=True, return_dict_in_generate=True)
    ids = out.sequences[0].tolist()
    g = len(ids) - m
    N = m + g - 1
    full = model(torch.tensor([ids[:N]]), output_attentions=True).attentions
    att = torch.stack(full)[:, 0].double().numpy()  # L, H, N, N
    if getattr(model.config.get_text_config(), "sliding_window", None) is None:
        for step, layers in enumerate(out.attentions[:g]):
            for l, a in enumerate(layers):
                a = a[0].double().numpy()
                rows = att[l, :, :m, :m] if step == 0 else att[l, :, m - 1 + step:m + step, :m + step]
                if step == 0 or m - 1 + step < N:
                    assert np.abs(rows - a).max() < 1e-5, np.abs(rows - a).max()
    return ids, m, att


def iglm_ids(folder, iglm):
    """IgLM's own prompt: [chain, species] + list(sequence), each token's line in vocab.txt (what
    IgLM's BertTokenizerFast.convert_tokens_to_ids gives; transformers 5's BertTokenizerFast
    no longer reads a vocab_file)."""
    with open(os.path.join(folder, "vocab.txt")) as f:
        vocab = {t: i for i, t in enumerate(f.read().split())}
    tokens = [iglm["chain"], iglm["species"]] + list(iglm["sequence"])
    return [vocab[t] for t in tokens]


def explain(folder, prompt, n, iglm=None, attention_out=None):
    tok, model = load(folder)
    ids = iglm_ids(folder, iglm) if iglm else tok(prompt)["input_ids"]
    ids, m, att = generate(tok, model, ids, n)
    g = len(ids) - m
    L = att.shape[0]
    fused = att.mean(1)
    aug = augment(fused)
    rollout = joint(aug)
    baseline = joint(augment(uniform_causal(L, att.shape[-1])))
    raw_k, roll_k, corr_k, flow_k = [], [], [], []
    for k in range(g):
        t = m - 1 + k
        raw_k.append(fused[:, t, :m].T)
        roll_k.append(rollout[:, t, :m].T)
        ratio = rollout[:, t, :m] / baseline[:, t, :m]
        total = ratio.sum(1, keepdims=True)
        # A sliding window can leave no path from t to the prompt: the row stays zero, as in Rust.
        corr_k.append(np.divide(ratio, total, out=np.zeros_like(ratio), where=total != 0).T)
        flow_k.append(flow_rows(aug, t)[:, :m].T)
    report = {
        "prompt": prompt,
        "prompt_ids": ids[:m],
        "generated_ids": ids[m:],
        "generated_tokens": [tok.decode([i]) for i in ids[m:]],
        "layers": L,
        "heads": att.shape[1],
        "relevance": {
            "raw": np.array(raw_k).tolist(),
            "rollout": np.array(roll_k).tolist(),
            "rollout_corrected": np.array(corr_k).tolist(),
            "flow": np.array(flow_k).tolist(),
        },
    }
    if attention_out:
        with open(attention_out, "w") as f:
            json.dump({"shape": list(att.shape), "data": att.ravel().tolist()}, f)
            f.write("\n")
    print(f"causal_llm_reference: {os.path.basename(folder)} {prompt!r} -> "
          f"{report['generated_tokens']}", file=sys.stderr)
    return report


def write(dir_, name, report):
    with open(os.path.join(dir_, f"{name}.json"), "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")


def fixtures(subdir, models_dir):
    out = os.path.join(FIXTURES, subdir)
    with open(os.path.join(out, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        folder = os.path.join(models_dir, case["model"])
        report = explain(folder, case["prompt"], case["generate"], case.get("iglm"))
        write(out, case["name"], report)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", action="store_true")
    ap.add_argument("--real", metavar="DIR", help="folder holding the fetched real models")
    args = ap.parse_args()
    if args.fixtures:
        fixtures("llm", os.path.join(REPO, "models"))
    elif args.real:
        fixtures("real", args.real)
    else:
        ap.error("--fixtures or --real DIR")


if __name__ == "__main__":
    main()
