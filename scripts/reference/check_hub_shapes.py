#!/usr/bin/env python3
"""The README's Hub commands without the Hub: random models in the exact shape and config.json of
Qwen/Qwen2.5-0.5B and meta-llama/Llama-3.2-1B (make_tiny_llamas.py --qwen-half-b / --one-b, not
committed), run by bert-explain and by transformers (causal_llm_reference.py), compared.

Checks that the same greedy tokens come out and that raw attention, rollout, corrected rollout
and flow agree to 1e-5. This cannot check the real weights or the real tokenizers (the Hub is
unreachable here), only that every size, rope setting and option in those two configs is read
as transformers reads it.

Usage (reference venv):
  check_hub_shapes.py --bin target/release/bert-explain --qwen DIR --llama DIR
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import causal_llm_reference as cllm  # noqa: E402

PROMPT = "The author talked to Sara about the keys to the cabinet"
GENERATE = 8
TOLERANCE = 1e-5


def check(binary, folder):
    want = cllm.explain(folder, PROMPT, GENERATE)
    out = subprocess.run([binary, "--model", folder, "--generate", str(GENERATE), "--correction",
                          "--flow", "--json", PROMPT], check=True, capture_output=True)
    got = json.loads(out.stdout)
    name = os.path.basename(folder.rstrip("/"))
    assert got["prompt_ids"] == want["prompt_ids"], (name, "prompt ids")
    assert got["generated_ids"] == want["generated_ids"], (name, got["generated_ids"],
                                                           want["generated_ids"])
    worst = {}
    for method, theirs in want["relevance"].items():
        d = float(np.abs(np.array(got["relevance"][method]) - np.array(theirs)).max())
        assert d <= TOLERANCE, (name, method, d)
        worst[method] = d
    print(f"{name}: {got['layers']} layers x {got['heads']} heads, {len(got['prompt_ids'])} prompt "
          f"tokens, generated {got['generated_ids']} as transformers; largest differences "
          + ", ".join(f"{m} {d:.1e}" for m, d in worst.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--qwen")
    ap.add_argument("--llama")
    args = ap.parse_args()
    for folder in (args.qwen, args.llama):
        if folder:
            check(os.path.abspath(args.bin), folder)


if __name__ == "__main__":
    main()
