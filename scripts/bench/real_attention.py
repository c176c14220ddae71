#!/usr/bin/env python3
"""Saves real attention for the flow benchmarks: all-MiniLM-L6-v2 (transformers, eager
attention) on English text of exactly N tokens, as float32 .npy of shape [L, H, N, N].

The text is the sentences of data/pronouns.jsonl ([MASK] read as "his") joined and repeated
until the tokenizer gives N tokens with [CLS] and [SEP]. `--tile K` repeats the model's layers
K times (K = 2: MiniLM's 6 layers as 12, bert-base's depth).

    real_attention.py --model DIR --n 512 [--tile 2] --out FILE.npy
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

REPO = Path(__file__).resolve().parents[2]


def text_of_length(tokenizer, n):
    lines = (REPO / "data/pronouns.jsonl").read_text().splitlines()
    sentences = [json.loads(line)["text"].replace("[MASK]", "his") for line in lines]
    ids = []
    while len(ids) < n - 2:
        for sentence in sentences:
            ids += tokenizer(sentence, add_special_tokens=False)["input_ids"]
    return [tokenizer.cls_token_id] + ids[: n - 2] + [tokenizer.sep_token_id]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--tile", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model, attn_implementation="eager").eval()
    ids = torch.tensor([text_of_length(tokenizer, args.n)])
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    stack = torch.cat([a for a in out.attentions], dim=0).numpy().astype(np.float32)
    stack = np.concatenate([stack] * args.tile, axis=0)
    assert stack.shape[-1] == args.n and np.isfinite(stack).all()
    np.save(args.out, stack)


if __name__ == "__main__":
    main()
