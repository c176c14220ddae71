#!/usr/bin/env python3
"""Make tests/fixtures/spm/: a tiny SentencePiece UNIGRAM model laid out as deberta-v3's.

deberta-v3 (microsoft/deberta-v3-base and its fine-tunes) ships spm.model without a
tokenizer.json; bert-explain reads that protobuf itself (src/tokens/spm.rs). This script trains
a small model of the same shape on the repository's own texts (data/*.jsonl "text" fields):

  tiny/spm.model              UNIGRAM, 1,500 pieces: [PAD]=0 [CLS]=1 [SEP]=2 (control pieces)
                              and [UNK]=3 as deberta-v3 remaps them, the 256 byte pieces
                              <0x00>..<0xFF> (byte_fallback, as deberta-v3's spm.model has it),
                              nmt_nfkc normalisation (so a precompiled charsmap is present), the
                              dummy prefix and collapsed whitespace; no [MASK] piece, as in
                              deberta-v3, whose tokenizer appends it after the vocabulary
  tiny/tokenizer_config.json  deberta-v3-base's: do_lower_case false, vocab_type "spm"
  lower-punct/                do_lower_case and split_by_punct true
  saved/                      the tokenizer_config.json transformers writes for a fine-tune
                              (named tokens, added_tokens_decoder with [MASK] after the
                              vocabulary, here with lstrip), and its own spm.model: tiny's with
                              a user-defined piece <extra> appended
  legacy/                     added_tokens.json {"[MASK]": 1500} and special_tokens_map.json,
                              as transformers 4.x's slow tokenizer saved a fine-tune
  legacy-bare/                added_tokens.json alone
  first-split/                add_prefix_space false, split_special_tokens true

Only tiny/ and saved/ have an spm.model; the other variants use tiny's.

Training is single-threaded on a fixed, sorted input with a fixed seed, so the bytes repeat.
Usage: make_tiny_spm.py   (with .venv-spm/bin/python; see scripts/reference/README.md)
"""

import glob
import io
import json
import os

import sentencepiece as spm

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "fixtures", "spm")
VOCAB_SIZE = 1500
SEED = 62


def sentences():
    """Every distinct "text" of the tracked data/*.jsonl files, sorted (a fixed input)."""
    texts = set()
    for path in sorted(glob.glob(os.path.join(REPO, "data", "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = json.loads(line).get("text")
                if isinstance(text, str) and text.strip():
                    texts.add(text)
    return sorted(texts)


def train():
    spm.set_random_generator_seed(SEED)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences()),
        model_writer=model,
        model_type="unigram",
        vocab_size=VOCAB_SIZE,
        character_coverage=0.9995,
        normalization_rule_name="nmt_nfkc",
        byte_fallback=True,
        split_digits=False,
        pad_id=0, pad_piece="[PAD]",
        bos_id=1, bos_piece="[CLS]",
        eos_id=2, eos_piece="[SEP]",
        unk_id=3, unk_piece="[UNK]",
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


def write_json(folder, name, value):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")


def variants(pieces):
    """Each variant's files beside spm.model, for `pieces` pieces in tiny/spm.model."""
    plain = {"do_lower_case": False, "vocab_type": "spm"}
    named = {"bos_token": "[CLS]", "cls_token": "[CLS]", "eos_token": "[SEP]",
             "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
             "unk_token": "[UNK]"}
    # saved/ has one piece more (the user piece): its [MASK] comes after that.
    # [MASK] with lstrip: the flags must be carried through (here the strip-right normaliser
    # already drops the space before it, so the tokens do not show it).
    decoder = {str(id): {"content": token, "lstrip": token == "[MASK]", "normalized": False,
                         "rstrip": False, "single_word": False, "special": True}
               for id, token in [(0, "[PAD]"), (1, "[CLS]"), (2, "[SEP]"), (3, "[UNK]"),
                                 (pieces + 1, "[MASK]")]}
    # transformers 4.x's slow tokenizer saved the appended [MASK] as added_tokens.json.
    added = {"[MASK]": pieces}
    return {
        "tiny": {"tokenizer_config.json": plain},
        "lower-punct": {"tokenizer_config.json": {**plain, "do_lower_case": True,
                                                  "split_by_punct": True}},
        "saved": {"tokenizer_config.json": {**named, **plain, "added_tokens_decoder": decoder,
                                            "split_by_punct": False,
                                            "tokenizer_class": "DebertaV2Tokenizer"}},
        "legacy": {"tokenizer_config.json": plain, "added_tokens.json": added,
                   "special_tokens_map.json": named},
        "legacy-bare": {"tokenizer_config.json": plain, "added_tokens.json": added},
        "first-split": {"tokenizer_config.json": {**plain, "add_prefix_space": False,
                                                  "split_special_tokens": True}},
    }


def main():
    model = train()
    for name, files in variants(VOCAB_SIZE).items():
        folder = os.path.join(OUT, name)
        os.makedirs(folder, exist_ok=True)
        # Variants that only change the JSON files share tiny/spm.model (make_spm_fixtures.py
        # and tests/spm_tokenizer.rs put the two together).
        if name == "tiny":
            with open(os.path.join(folder, "spm.model"), "wb") as f:
                f.write(model)
        if name == "saved":
            with open(os.path.join(folder, "spm.model"), "wb") as f:
                f.write(add_user_piece(model, "<extra>"))
        for file, value in files.items():
            write_json(folder, file, value)
        print(f"wrote {folder}")


def add_user_piece(model, piece):
    """The model with a USER_DEFINED piece appended (fine-tunes sometimes add one this way)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    new = proto.pieces.add()
    new.piece = piece
    new.score = 0.0
    new.type = pb.ModelProto.SentencePiece.USER_DEFINED
    return proto.SerializeToString()


if __name__ == "__main__":
    main()
