#!/usr/bin/env python3
"""Jane Austen's six novels, cut into sentences, for a small GPT-2 trained from scratch
(scripts/train/austen_lm_train.py), and a held-out "next word" task for bert-explain.

Text: Debian's r-cran-janeaustenr 1.0.0-1 (MIT; the novels are in the public domain), fetched
with `apt-get download`, its sha256 checked, and read from its R lazy-load database exactly as
scripts/train/natural_agreement_data.py reads it (its `austen_paragraphs`, which uses
scripts/fetch-fine-foods.py's unserializer): paragraphs of at least four words, chapter and
volume headings left out, `_` (italics) removed.

Sentences: each paragraph is cut after `.`, `!` or `?` (with any closing quotes or brackets
that follow) when whitespace or `--` comes next and then a capital letter (optionally after an
opening quote or bracket), except after the abbreviations Mr, Mrs, Dr, St, Col, Capt, Messrs,
Ms and Lt. Deterministic, no model.

Splits, by the sentence's sha256 (hex), as the agreement data does:
  - held out: the last digit is 0, 1 or 2 (3/16 of the sentences);
  - validation (early stopping in the training script, carved from the training side): the last
    digit is 3;
  - training: the rest. The vocabulary is the training (not validation) sentences' tokens seen
    at least MIN_COUNT times.

Tokens are those of the model's tokenizer: lower-cased, then split by the `Whitespace`
pre-tokenizer of `tokenizers` (`\\w+|[^\\w\\s]+`, so punctuation is its own token).

Writes
  data/austen-lm-train.txt     every training and validation sentence, one a line, in the
                               novels' order (not committed: this script rebuilds it)
  data/austen-next-word.jsonl  {"text": PROMPT, "generate": 1, "expected": WORD}: for up to
                               2,000 held-out sentences (seeded choice), the sentence's
                               beginning cut before a word token, with 6 to 40 tokens of prompt;
                               WORD is that token, lower-cased: letters only, in the vocabulary,
                               and preceded in the text by a space or a hyphen (no `don'|t`).

Usage: .venv-reference/bin/python scripts/train/austen_lm_data.py   (needs `tokenizers`; ~3 s)
"""
import argparse
import collections
import hashlib
import json
import os
import random
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import natural_agreement_data as nad  # noqa: E402

REPO = nad.REPO
DATA = nad.DATA
AUSTEN_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
TRAIN_FILE = os.path.join(DATA, "austen-lm-train.txt")
TASK_FILE = os.path.join(DATA, "austen-next-word.jsonl")
ABBREVIATIONS = {"mr", "mrs", "dr", "st", "col", "capt", "messrs", "ms", "lt"}
SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?:\s+|--)(?=[\"'(\[]?[A-Z])")
MIN_COUNT = 3
SEED = 2024
TASK_LINES = 2000
MIN_PROMPT, MAX_PROMPT = 6, 40


def sentences(paragraph):
    """The paragraph's sentences, each stripped of surrounding whitespace."""
    out, start = [], 0
    for m in SENTENCE_END.finditer(paragraph):
        word = re.search(r"(\w+)[.!?]$", paragraph[start:m.start() + 1])
        if word and word.group(1).lower() in ABBREVIATIONS and paragraph[m.start()] == ".":
            continue
        out.append(paragraph[start:m.end()].strip())
        start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def tokens_of(text):
    """The tokenizer's pre-tokens of `text`: [(token, (start, end))], lower-cased."""
    from tokenizers import normalizers, pre_tokenizers

    # Lowercase keeps every offset here: the novels' text has no character whose lower case
    # is longer (checked in main).
    return pre_tokenizers.Whitespace().pre_tokenize_str(normalizers.Lowercase().normalize_str(text))


def held_out(sentence):
    return nad.held_out(sentence)


def is_validation(sentence):
    return hashlib.sha256(sentence.encode()).hexdigest()[-1] == "3"


def vocabulary(train_sentences, min_count=MIN_COUNT):
    """The tokens of the training sentences seen at least `min_count` times, most frequent
    first (ties alphabetical); the tokenizer puts [UNK] and <|endoftext|> before them."""
    counts = collections.Counter(t for s in train_sentences for t, _ in tokens_of(s))
    return sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))


def read_train_file(path=TRAIN_FILE):
    """(training, validation) sentences of data/austen-lm-train.txt."""
    lines = [line.rstrip("\n") for line in open(path, encoding="utf-8")]
    return [s for s in lines if not is_validation(s)], [s for s in lines if is_validation(s)]


def austen_sentences():
    """(novel, sentence) for every sentence of the six novels, in order."""
    ff = nad.fetch_fine_foods_module()
    with tempfile.TemporaryDirectory() as work:
        paragraphs = list(nad.austen_paragraphs(ff, work))
        deb = os.path.join(work, nad.AUSTEN[2])
        digest = hashlib.sha256(open(deb, "rb").read()).hexdigest()
        if digest != AUSTEN_SHA256:
            sys.exit(f"{nad.AUSTEN[2]}: sha256 {digest}, expected {AUSTEN_SHA256}; refusing it")
    return [(source.split(":")[1], s) for source, p in paragraphs for s in sentences(p)]


def cut_points(sentence, vocab):
    """The token indices k where the sentence can be cut: k prompt tokens, then a word."""
    toks = tokens_of(sentence)
    out = []
    for k in range(MIN_PROMPT, min(MAX_PROMPT, len(toks) - 1) + 1):
        word, (start, _) = toks[k]
        if word.isalpha() and word in vocab and sentence[start - 1] in " -":
            out.append(k)
    return toks, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--lines", type=int, default=TASK_LINES)
    args = ap.parse_args()

    rows = austen_sentences()
    assert all(len(s.lower()) == len(s) for _, s in rows)
    train = [s for _, s in rows if not held_out(s)]
    held = [s for _, s in rows if held_out(s)]
    vocab = set(vocabulary([s for s in train if not is_validation(s)]))
    with open(TRAIN_FILE, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in train)

    rng = random.Random(args.seed)
    unique = list(dict.fromkeys(held))
    order = list(range(len(unique)))
    rng.shuffle(order)
    chosen, prompts = [], set()
    for i in order:
        toks, points = cut_points(unique[i], vocab)
        if not points:
            continue
        k = rng.choice(points)
        start = toks[k][1][0]
        prompt = unique[i][:start].rstrip()
        assert [t for t, _ in tokens_of(prompt)] == [t for t, _ in toks[:k]], unique[i]
        if prompt.lower() in prompts:
            continue
        prompts.add(prompt.lower())
        chosen.append((i, {"text": prompt, "generate": 1, "expected": toks[k][0]}))
        if len(chosen) == args.lines:
            break
    chosen.sort(key=lambda c: c[0])
    with open(TASK_FILE, "w", encoding="utf-8") as f:
        for _, row in chosen:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")

    n_valid = sum(1 for s in train if is_validation(s))
    lengths = collections.Counter(len(tokens_of(r["text"])) for _, r in chosen)
    print(f"{len(rows)} sentences: {len(train) - n_valid} training, {n_valid} validation, {len(held)} held out "
          f"({len(unique)} distinct); vocabulary {len(vocab)} tokens seen at least {MIN_COUNT} times "
          f"(+ [UNK], <|endoftext|>)", file=sys.stderr)
    print(f"{len(chosen)} prompts of {min(lengths)} to {max(lengths)} tokens "
          f"(mean {sum(k * v for k, v in lengths.items()) / len(chosen):.1f})", file=sys.stderr)
    for path in (TRAIN_FILE, TASK_FILE):
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        print(f"{os.path.relpath(path, REPO)}: {os.path.getsize(path)} bytes, sha256 {digest}", file=sys.stderr)


if __name__ == "__main__":
    main()
