#!/usr/bin/env python3
"""Batch mode on a causal model against torch's generate, per prompt, side by side in one run
(issue 64, item 4: "a causal model for generation").

For each model, on the same prompts and thread count T, in turn:

- torch, batch b (--batch-sizes, default 1, 2, 4, 8, 16): transformers' `generate` with greedy
  decoding, `output_attentions=True` and `return_dict_in_generate=True` (eager attention,
  torch.no_grad(), torch.set_num_threads(T)), `min_new_tokens = max_new_tokens = g`, on b
  prompts at once. Every prompt has the same token count, so a batch pads nothing (checked).
  Whole batches only: ceil(prompts / b) batches. "Best batch" is the batch size with the
  least time per prompt. Each configuration runs in a process of its own (--python), after one
  untimed generate; peak resident memory is that process's ru_maxrss;
- bert-explain's batch mode, `--model M --input FILE --output FILE --generate g
  --batch-size b` for b in --ours (default 1, 8, 16): raw attention and rollout of every generated token (a
  causal model's default maps; no flow). Each line asks for g tokens; the model has no
  end-of-text id (random weights) or its reports are checked to hold g tokens. Timed as
  batch_throughput.py times it: the whole process on the N prompts, and on a 1-prompt input
  before and after; per prompt = (t_N − mean(t_1)) / (N − 1). Peak resident memory from
  /usr/bin/time -v.

Models (--models):
- gpt2-base: a GPT-2 of gpt2's shape (12 layers, hidden 768, 12 heads, 1,024 positions) with
  random weights (torch.manual_seed(0)) and the protein tokenizer of iglm (vocab 33: one token
  per amino-acid letter, no special tokens added), no end-of-text id; made once into
  target/bench-models/ (git-ignored). Its head is 33 wide where gpt2's is 50,257: the head's
  share of a step is smaller here than with an English vocabulary;
- iglm: the real iglm GPT-2 (4 layers, hidden 512; models/downloaded/iglm-gpt2, fetched by
  `cargo test`). Its end-of-text id is kept out of the way by min_new_tokens for torch; a
  bert-explain report that stops early is reported as such.
Prompts: m random amino-acid letters (seeded), m = --prompt (default 100), so m tokens.

Usage: python3 scripts/bench/causal_throughput.py [--threads 2] [--prompts 16] [--prompt 100]
           [--generate 16] [--models gpt2-base,iglm] [--batch-sizes 1,2,4,8,16] [--ours 1,8,16]
           [--json FILE]
Prints a Markdown table on stdout, progress and bert-explain's time at each --ours on stderr.
The default run took 4 minutes on a 2-core AMD EPYC. Needs only the system python3 (torch runs
in --python, default .venv-reference).
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "target", "release", "bert-explain")
PYTHON = os.path.join(REPO, ".venv-reference", "bin", "python")
IGLM = os.path.join(REPO, "models", "downloaded", "iglm-gpt2")
GPT2_BASE = os.path.join(REPO, "target", "bench-models", "gpt2-base-random-seed0")
LETTERS = "ACDEFGHIKLMNPQRSTVWY"
T0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the torch side

def make_gpt2_base():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=33,
                        bos_token_id=2, eos_token_id=None)
    GPT2LMHeadModel(config).save_pretrained(GPT2_BASE, safe_serialization=True)
    with open(os.path.join(IGLM, "tokenizer.json")) as f, \
            open(os.path.join(GPT2_BASE, "tokenizer.json"), "w") as g:
        g.write(f.read())


def torch_worker(spec):
    import resource

    import torch
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.set_num_threads(spec["threads"])
    folder, batch, g = spec["folder"], spec["batch"], spec["generate"]
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    model = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    ids = [tokenizer(p, return_tensors="pt").input_ids for p in spec["prompts"]]
    if any(x.shape[1] != spec["length"] for x in ids):
        raise SystemExit("a prompt's token count is not the one asked for")
    kwargs = dict(do_sample=False, output_attentions=True, return_dict_in_generate=True,
                  max_new_tokens=g, min_new_tokens=g, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids[0], **kwargs)
        start = time.perf_counter()
        for i in range(0, len(ids), batch):
            x = torch.cat(ids[i:i + batch], 0)
            out = model.generate(x, attention_mask=torch.ones_like(x), **kwargs)
            assert out.sequences.shape[1] == x.shape[1] + g
            assert len(out.attentions) == g
        seconds = time.perf_counter() - start
    return {"per_prompt": seconds / len(ids),
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# ------------------------------------------------------------------------------- the driver

def env_for(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[k] = str(threads)
    return env


def run_torch(args, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    out = subprocess.run([args.python, __file__, "--worker", f.name], env=env_for(args.threads),
                         capture_output=True, text=True, timeout=3600)
    os.unlink(f.name)
    if out.returncode != 0:
        raise SystemExit(f"torch worker failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(cmd, env):
    """Wall seconds and peak RSS (MiB) of cmd, which must succeed."""
    start = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    return seconds, int(rss.group(1)) / 1024 if rss else float("nan")


def run_bert_explain(args, folder, prompts, batch, work):
    paths = {}
    for name, lines in (("all", prompts), ("one", prompts[:1])):
        paths[name] = os.path.join(work, f"{name}.jsonl")
        with open(paths[name], "w") as f:
            for p in lines:
                f.write(json.dumps({"text": p}) + "\n")
    out = os.path.join(work, "out.jsonl")

    def once(name):
        cmd = [args.bert_explain, "--model", folder, "--input", paths[name], "--output", out,
               "--generate", str(args.generate), "--batch-size", str(batch)]
        return timed(cmd, env_for(args.threads))

    first, _ = once("one")
    seconds, rss = once("all")
    with open(out) as f:
        reports = [json.loads(line) for line in f]
    short = sum(1 for r in reports if len(r.get("generated_ids", [])) != args.generate)
    if len(reports) != len(prompts) or any("error" in r for r in reports):
        raise SystemExit("bert-explain's reports are not one per prompt without errors")
    last, _ = once("one")
    per = (seconds - (first + last) / 2) / (len(prompts) - 1)
    return {"per_prompt": per, "rss_mib": rss, "short": short}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=100)
    ap.add_argument("--generate", type=int, default=16)
    ap.add_argument("--models", default="gpt2-base,iglm")
    ap.add_argument("--batch-sizes", default="1,2,4,8,16")
    ap.add_argument("--ours", default="1,8,16")
    ap.add_argument("--bert-explain", default=BIN)
    ap.add_argument("--python", default=PYTHON)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.worker:
        with open(args.worker) as f:
            spec = json.load(f)
        print(json.dumps(make_gpt2_base() if spec.get("make") else torch_worker(spec)))
        return
    if not os.path.exists(os.path.join(GPT2_BASE, "model.safetensors")):
        log("making the gpt2-base-shaped model")
        run_torch(args, {"make": True})
    rng = random.Random(0)
    prompts = ["".join(rng.choice(LETTERS) for _ in range(args.prompt))
               for _ in range(args.prompts)]
    folders = {"gpt2-base": GPT2_BASE, "iglm": IGLM}
    rows = []
    for name in args.models.split(","):
        folder = folders[name]
        row = {"model": name, "torch": {}, "bert_explain": {}}
        for b in [int(x) for x in args.batch_sizes.split(",")]:
            log(f"{name}: torch, batch {b}")
            row["torch"][b] = run_torch(args, {
                "folder": folder, "batch": b, "generate": args.generate, "prompts": prompts,
                "length": args.prompt, "threads": args.threads})
        for b in [int(x) for x in args.ours.split(",")]:
            log(f"{name}: bert-explain, --batch-size {b}")
            with tempfile.TemporaryDirectory() as work:
                row["bert_explain"][b] = run_bert_explain(args, folder, prompts, b, work)
        rows.append(row)
    print(f"Prompts of {args.prompt} tokens, {args.generate} generated each, {args.prompts} "
          f"prompts, {args.threads} threads; per prompt (peak RSS).\n")
    print("| model | torch, batch 1 | torch, best batch | bert-explain, --batch-size 1 "
          "| bert-explain, best --batch-size | ratio (best) to torch batch 1 / best batch |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        def best_of(runs):
            b = min(runs, key=lambda b: runs[b]["per_prompt"])
            return b, runs[b]

        t1, ours = row["torch"][1], row["bert_explain"]
        (best_b, best), (our_b, our_best) = best_of(row["torch"]), best_of(ours)

        def cell(r):
            return f"{r['per_prompt'] * 1000:,.0f} ms ({r['rss_mib']:,.0f} MiB)"
        ratio = (f"{our_best['per_prompt'] / t1['per_prompt']:.2f}× / "
                 f"{our_best['per_prompt'] / best['per_prompt']:.2f}×")
        print(f"| {row['model']} | {cell(t1)} | {cell(best)} at {best_b} | {cell(ours[1])} | "
              f"{cell(our_best)} at {our_b} | {ratio} |")
        short = max(r["short"] for r in ours.values())
        if short:
            print(f"\n{row['model']}: {short} of bert-explain's reports stopped at the "
                  f"end-of-text token before {args.generate} tokens.")
        others = ", ".join(f"{b}: {r['per_prompt'] * 1000:,.0f} ms" for b, r in ours.items())
        print(f"\n{row['model']}, bert-explain per --batch-size: {others}.", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
