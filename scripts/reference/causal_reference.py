#!/usr/bin/env python3
"""Python reference for bert-explain's causal mode (issue 6): GPT-2 generation and rollout.

For a local GPT-2 folder, a prompt of m tokens and n new tokens, with transformers (float32,
eager attention, KV cache as generate() uses it):

  generation   greedy: model.generate(do_sample=False, max_new_tokens=n), stopping at EOS
  attention    A[l][h][i][j] for the N = m + g - 1 positions that were fed to the model
               (g = tokens generated), assembled from generate()'s per-step attentions:
               step 0 gives rows 0..m-1, step s the row m-1+s; the causal mask zeroes j > i
  fusion       Ā_l = mean_h A[l][h];  residual Â_l = (Ā_l + I) / rowsum   (α = 0.5)
  rollout      R_1 = Â_1, R_l = Â_l · R_{l-1}
  per token    generated token k (0-based) is predicted at position t = m - 1 + k:
               raw[k][j][l] = Ā_l[t][j],  rollout[k][j][l] = R_l[t][j]  for prompt tokens j < m
  correction   U_l = rollout of the uniform causal attention (row i = 1/(i+1) on j <= i, same
               residual); corrected[k][j][l] = (R_l[t][j] / U_l[t][j]) / Σ_{j'<m} (R_l[t][j'] / U_l[t][j'])
  flow         networkx Edmonds-Karp on the layered graph of Â (SPEC §1), from (l, t) to (0, j),
               each layer normalised over all N positions, then sliced to j < m

Arrays are [n][m][L] (generated token, prompt token, layer). Seeded sampling is not
reproduced: torch's sampler cannot be matched bit for bit from Rust.

Usage:
  causal_reference.py --model DIR --prompt TEXT [--generate N] [--out FILE] [--attention-out FILE]
  causal_reference.py --fixtures        regenerate tests/fixtures/causal/ from its cases.json
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "causal")


def augment(fused):
    n = fused.shape[-1]
    aug = fused + np.eye(n)[None]
    return aug / aug.sum(-1, keepdims=True)


def joint(aug):
    out = [aug[0]]
    for l in range(1, aug.shape[0]):
        out.append(aug[l] @ out[-1])
    return np.stack(out)


def uniform_causal(layers, n):
    rows = np.tril(np.ones((n, n)))
    return np.repeat((rows / rows.sum(-1, keepdims=True))[None], layers, axis=0)


def flow_rows(aug, t):
    import networkx as nx
    from networkx.algorithms.flow import edmonds_karp

    L, n, _ = aug.shape
    g = nx.DiGraph()
    for l in range(1, L + 1):
        for i in range(n):
            for j in range(n):
                g.add_edge((l, i), (l - 1, j), capacity=float(aug[l - 1][i][j]))
    out = np.zeros((L, n))
    for l in range(1, L + 1):
        for j in range(n):
            out[l - 1][j] = nx.maximum_flow_value(g, (l, t), (0, j), capacity="capacity",
                                                  flow_func=edmonds_karp)
    return out / out.sum(1, keepdims=True)


def generate(folder, prompt, n):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    torch.set_grad_enabled(False)
    tok = AutoTokenizer.from_pretrained(folder)
    model = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager",
                                            dtype=torch.float32).eval()
    enc = tok(prompt, return_tensors="pt")
    m = enc["input_ids"].shape[1]
    out = model.generate(**enc, max_new_tokens=n, do_sample=False, output_attentions=True,
                         return_dict_in_generate=True, pad_token_id=model.config.eos_token_id)
    ids = out.sequences[0].tolist()
    g = len(ids) - m
    N = m + g - 1
    L, H = model.config.n_layer, model.config.n_head
    att = np.zeros((L, H, N, N))
    for step, layers in enumerate(out.attentions[:g]):
        for l, a in enumerate(layers):
            a = a[0].double().numpy()  # H, q, kv
            if step == 0:
                att[l, :, :m, :m] = a
            elif m - 1 + step < N:
                att[l, :, m - 1 + step, :m + step] = a[:, 0, :]
    # Cross-check: one full forward pass over the fed positions gives the same attention.
    full = model(torch.tensor([ids[:N]]), output_attentions=True).attentions
    full = torch.stack(full)[:, 0].double().numpy()
    assert np.abs(full - att).max() < 1e-5, np.abs(full - att).max()
    return tok, model, ids, m, att


def explain(folder, prompt, n, with_flow=True, attention_out=None):
    tok, model, ids, m, att = generate(folder, prompt, n)
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
        corr_k.append((ratio / ratio.sum(1, keepdims=True)).T)
        if with_flow:
            flow_k.append(flow_rows(aug, t)[:, :m].T)
    decode = lambda i: tok.decode([i])
    report = {
        "prompt": prompt,
        "prompt_ids": ids[:m],
        "prompt_tokens": [decode(i) for i in ids[:m]],
        "generated_ids": ids[m:],
        "generated_tokens": [decode(i) for i in ids[m:]],
        "layers": L,
        "heads": att.shape[1],
        "relevance": {
            "raw": np.array(raw_k).tolist(),
            "rollout": np.array(roll_k).tolist(),
            "rollout_corrected": np.array(corr_k).tolist(),
            "flow": np.array(flow_k).tolist() if with_flow else None,
        },
    }
    if attention_out:
        with open(attention_out, "w") as f:
            json.dump({"shape": list(att.shape), "data": att.ravel().tolist()}, f)
            f.write("\n")
    print(f"causal_reference: {prompt!r} -> {report['generated_tokens']}", file=sys.stderr)
    return report


def fixtures():
    with open(os.path.join(FIXTURES, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        folder = os.path.join(REPO, "models", case["model"])
        name = case["name"]
        report = explain(folder, case["prompt"], case["generate"], case.get("flow", True),
                         os.path.join(FIXTURES, f"{name}.attention.json"))
        with open(os.path.join(FIXTURES, f"{name}.json"), "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--prompt")
    ap.add_argument("--generate", type=int, default=10)
    ap.add_argument("--no-flow", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--attention-out")
    ap.add_argument("--fixtures", action="store_true", help="regenerate tests/fixtures/causal/")
    args = ap.parse_args()
    if args.fixtures:
        return fixtures()
    if not (args.model and args.prompt):
        ap.error("--model and --prompt are required (or --fixtures)")
    report = explain(args.model, args.prompt, args.generate, not args.no_flow, args.attention_out)
    text = json.dumps(report, indent=1) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
