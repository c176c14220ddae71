#!/usr/bin/env python3
"""Long inputs on a ModernBERT-shaped encoder (issue 62, item 7): time and peak resident
memory of one whole bert-explain process (raw, rollout, and flow unless --no-flow, from the
[MASK]) at n tokens, for one or more binaries side by side in one run, each with the options
given after --options (say `--options --flow` or `--options --no-flow`).

The checkpoint is ModernBERT-base's shape (22 layers, hidden 768, 12 heads, intermediate
1152, local windows of 128, 8,192 positions) with transformers' random initialisation
(seed 0), a masked-LM head, and the tiny ModernBERT's tokenizer (its ids all fit the
vocabulary); it is written once to --checkpoint (about 600 MB, not committed). The text is
the tiny tokenizer's words repeated to n tokens with one [MASK] in the middle.

Usage: .venv-reference/bin/python scripts/bench/long_inputs.py --checkpoint /tmp/modernbert-shaped \
           --n 2048 BINARY [BINARY ...] [--options OPTION ...]
Prints one line per binary: n, seconds, peak RSS (GNU time's maximum resident set size).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TINY = os.path.join(REPO, "models", "tiny-modernbert-mlm")


def make_checkpoint(folder):
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(TINY, "config.json")) as f:
        tiny = json.load(f)
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                              intermediate_size=1152, max_position_embeddings=8192, local_attention=128,
                              global_attn_every_n_layers=3, pad_token_id=tiny["pad_token_id"],
                              cls_token_id=tiny["cls_token_id"], sep_token_id=tiny["sep_token_id"],
                              bos_token_id=tiny["bos_token_id"], eos_token_id=tiny["eos_token_id"])
    ModernBertForMaskedLM(config).eval().save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINY, name), os.path.join(folder, name))


def text_of(n):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(TINY, "tokenizer.json"))
    words = "the author talked to sara about his book and the keys to the cabinet are on the table".split()
    out = []
    while len(tok.encode(" ".join(out + [words[len(out) % len(words)]])).ids) <= n - 1:
        out.append(words[len(out) % len(words)])
    out[len(out) // 2] = "[MASK]"
    text = " ".join(out)
    return text, len(tok.encode(text).ids)


def run(binary, checkpoint, text, options):
    started = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--json", "--model", checkpoint, *options, text],
                          capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        return seconds, None, errors or done.stderr.strip().splitlines()[-2:]
    return seconds, int(done.stderr.strip().splitlines()[-1]) / 1024, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--options", nargs=argparse.REMAINDER, default=[],
                    help="bert-explain options for every run (the rest of the line)")
    args = ap.parse_args()
    make_checkpoint(args.checkpoint)
    text, n = text_of(args.n)
    for binary in args.binaries:
        seconds, peak, error = run(binary, args.checkpoint, text, args.options)
        options = " ".join(args.options)
        line = (f"{binary} {options}: n = {n}, {seconds:.1f} s, peak RSS {peak:.0f} MiB" if peak
                else f"{binary} {options}: failed after {seconds:.1f} s {error}")
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
