#!/usr/bin/env python3
"""Write tests/fixtures/spm/<variant>/expected.json: what transformers' DebertaV2Tokenizer,
loaded from a folder with spm.model and no tokenizer.json, makes of several hundred texts.

tests/spm_tokenizer.rs builds bert-explain's tokenizer from the same files and compares every
id, token, type id and special-token flag. Variants (make_tiny_spm.py writes their files):

  tiny         deberta-v3-base's tokenizer_config.json            every text and pair
  lower-punct  do_lower_case and split_by_punct true              every text and pair
  saved        a fine-tune's config (added_tokens_decoder), a     a subset (every seventh
               user-defined piece appended to spm.model          text, all about special
                                                                 tokens, every fourth pair)
  legacy       added_tokens.json + special_tokens_map.json        a subset
  legacy-bare  added_tokens.json alone ([MASK] then normalized)   a subset
  first-split  add_prefix_space false, split_special_tokens true  a subset

A variant folder without spm.model uses tiny/spm.model. Also records what the protobuf library
reads from tiny/spm.model, so the Rust reader is checked against it. Deterministic: the same
files come out byte for byte.

Usage: make_spm_fixtures.py   (with .venv-spm/bin/python; see scripts/reference/README.md)
"""

import json
import os
import shutil
import tempfile

import tokenizers
import transformers
from sentencepiece import sentencepiece_model_pb2 as pb
from transformers import DebertaV2Tokenizer

from spm_texts import SPECIAL, pairs, texts

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPM = os.path.join(REPO, "tests", "fixtures", "spm")
VARIANTS = {
    "tiny": "all",
    "lower-punct": "all",
    "saved": "subset",
    "legacy": "subset",
    "legacy-bare": "subset",
    "first-split": "subset",
}


def proto(path):
    model = pb.ModelProto()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    return model


def load(variant):
    """The tokenizer of a variant, from a copy of its files beside the spm.model it uses."""
    folder = os.path.join(SPM, variant)
    with tempfile.TemporaryDirectory() as tmp:
        for name in os.listdir(folder):
            if name != "expected.json":
                shutil.copy(os.path.join(folder, name), tmp)
        if not os.path.exists(os.path.join(tmp, "spm.model")):
            shutil.copy(os.path.join(SPM, "tiny", "spm.model"), tmp)
        return DebertaV2Tokenizer.from_pretrained(tmp)


def encode(tok, text, pair=None):
    enc = tok(text, pair, return_special_tokens_mask=True)
    case = {"text": text}
    if pair is not None:
        case["pair"] = pair
    case["ids"] = enc["input_ids"]
    case["tokens"] = tok.convert_ids_to_tokens(enc["input_ids"])
    case["type_ids"] = enc["token_type_ids"]
    case["special"] = enc["special_tokens_mask"]
    return case


def model_summary(path):
    """What protobuf reads from spm.model: the Rust reader must read the same."""
    model = proto(path)
    trainer, norm = model.trainer_spec, model.normalizer_spec
    return {
        "pieces": len(model.pieces),
        "first_pieces": [[p.piece, p.score, p.type] for p in model.pieces[:6]],
        "piece_300": [model.pieces[300].piece, model.pieces[300].score, model.pieces[300].type],
        "last_piece": [model.pieces[-1].piece, model.pieces[-1].score, model.pieces[-1].type],
        "types": {str(t): sum(p.type == t for p in model.pieces) for t in range(1, 7)},
        "model_type": trainer.model_type,
        "unk_id": trainer.unk_id,
        "byte_fallback": trainer.byte_fallback,
        "normalizer": norm.name,
        "precompiled_charsmap_bytes": len(norm.precompiled_charsmap),
        "add_dummy_prefix": norm.add_dummy_prefix,
        "remove_extra_whitespaces": norm.remove_extra_whitespaces,
    }


def main():
    all_texts, all_pairs = texts(REPO), pairs()
    for variant, which in VARIANTS.items():
        tok = load(variant)
        # A subset: every seventh text, and every one about special and added tokens.
        subset = all_texts[::7] + [t for t in SPECIAL if t not in all_texts[::7]]
        chosen = all_texts if which == "all" else subset
        chosen_pairs = all_pairs if which == "all" else all_pairs[::4]
        cases = [encode(tok, t) for t in chosen] + [encode(tok, a, b) for a, b in chosen_pairs]
        spm = os.path.join(SPM, variant, "spm.model")
        expected = {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "vocab_size": len(tok),
            "mask_id": tok.mask_token_id,
            "model": model_summary(spm) if os.path.exists(spm) else None,
            "cases": cases,
        }
        out = os.path.join(SPM, variant, "expected.json")
        with open(out, "w", encoding="utf-8") as f:
            # One case a line: a reviewable diff when transformers' behaviour changes.
            head = {k: v for k, v in expected.items() if k != "cases"}
            f.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n')
            f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
            f.write("\n]}\n")
        print(f"wrote {out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
