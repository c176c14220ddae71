#!/usr/bin/env python3
"""Writes the SPEC §8 fixtures (mixing matrices × aggregations, ERASER) under tests/fixtures/methods/:

  cases.json      the cases: {"name", "model", "text", "target", "word"?, "label"?}
  <name>.json     methods_reference.py's result for the case, numbers rounded to 12 significant
                  digits: {"model", "text", "tokens", "target", "explained": {"kind", "id", "logit",
                  "probability"}, "methods": {mixing: {"matrices": L×n×n (M_l before row
                  normalisation), "layer", "rollout", "flow": L×n}}, "eraser": {mixing: {"rollout" |
                  "flow": {"comprehensiveness", "sufficiency" (AOPC), "k", "comprehensiveness_k",
                  "sufficiency_k"}}} or null without a head}
  hand.json       methods_hand.py's hand-computed 2-token cases (cross-checked against transformers)

Run with the reference venv's python from anywhere:
  .venv-reference/bin/python scripts/reference/make_methods_fixtures.py [--only NAME[,NAME]] [--skip-minilm]
Models: models/tiny-bert-{modern,legacy,cls}, the other families' tiny models in models/
(tiny-{roberta,xlmr,albert}-mlm, tiny-{distilbert,electra,roberta}-cls, tiny-electra-disc) and
models/downloaded/{all-MiniLM-L6-v2,rxnfp-bert-mlm,rxnmapper-albert-mlm}
(scripts/fetch-real-models.sh NAME) and models/downloaded/minilm-fine-foods
(scripts/build-sentiment-model.py). Cases with "pretokenized": true are encoded as bert-explain
--pretokenized; "pair" is the second text. Cases whose model folder is missing are skipped with
a note. rxnfp-mlm-ester (26 tokens, 12 layers) takes ~10 min of networkx flow; --only to skip it.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import methods_hand  # noqa: E402
import methods_reference as mr  # noqa: E402

OUT = os.path.join(REPO, "tests", "fixtures", "methods")

CASES = [
    {"name": "modern-author", "model": "tiny-bert-modern",
     "text": "The author talked to Sara about [MASK] book", "target": None},
    {"name": "modern-keys-those", "model": "tiny-bert-modern",
     "text": "The keys to the cabinet [MASK] on the table", "target": None, "word": "those"},
    {"name": "modern-backache", "model": "tiny-bert-modern",
     "text": "She asked the doctor about [MASK] backache", "target": None},
    {"name": "legacy-mary-me", "model": "tiny-bert-legacy",
     "text": "Mary convinced John of [MASK] love", "target": None, "word": "me"},
    {"name": "minilm-author", "model": "all-MiniLM-L6-v2",
     "text": "The author talked to Sara about [MASK] book", "target": None},
    {"name": "minilm-mary", "model": "all-MiniLM-L6-v2",
     "text": "Mary convinced John of [MASK] love", "target": None},
    {"name": "cls-book", "model": "tiny-bert-cls",
     "text": "The man gave a good book to the boy", "target": None},
    {"name": "cls-story-entailment", "model": "tiny-bert-cls",
     "text": "The teacher told the students a long story", "target": None, "label": "entailment"},
    # The other encoder families (tiny models in models/).
    {"name": "roberta-mlm-author", "model": "tiny-roberta-mlm",
     "text": "The author talked to Sara about <mask> book", "target": None},
    {"name": "xlmr-mlm-author", "model": "tiny-xlmr-mlm",
     "text": "The author talked to Sara about <mask> book", "target": None},
    {"name": "distilbert-cls-letter", "model": "tiny-distilbert-cls",
     "text": "This is a bad letter.", "target": None},
    {"name": "albert-mlm-mary", "model": "tiny-albert-mlm",
     "text": "Mary convinced John of [MASK] love", "target": None},
    {"name": "electra-cls-food", "model": "tiny-electra-cls",
     "text": "The food is good.", "target": None},
    # ELECTRA's discriminator at "his" (position 7): the score is its logit d, the class
    # "replaced" of the 2-class view [0, d] (also the top class here, p = sigmoid(d)).
    {"name": "electra-disc-his", "model": "tiny-electra-disc",
     "text": "The author talked to Sara about his book", "target": 7, "label": "replaced"},
    {"name": "roberta-cls-pair", "model": "tiny-roberta-cls",
     "text": "A man is playing a guitar.", "target": None, "pair": "A woman is reading a book."},
    # DeBERTa (issue 62): relative-position logits, BERT's value path and norm.
    {"name": "deberta-mlm-author", "model": "tiny-deberta-mlm",
     "text": "The author talked to Sara about [MASK] book", "target": None},
    {"name": "deberta-v2-mlm-pair", "model": "tiny-deberta-v2-mlm",
     "text": "The doctor asked [MASK] friend", "target": None, "pair": "She is a doctor"},
    {"name": "deberta-cls-film", "model": "tiny-deberta-cls",
     "text": "This film was great and the story was good.", "target": None, "label": "positive"},
    # The classifiers trained here (scripts/train/): subject-verb agreement from scratch, and
    # the real all-MiniLM-L6-v2 with its sentiment head (scripts/build-sentiment-model.py).
    {"name": "agreement-attractor", "model": "agreement-classifier",
     "text": "the key to the cabinets", "target": None},
    {"name": "agreement-relative", "model": "agreement-classifier",
     "text": "the authors that the critic praises", "target": None, "label": "singular"},
    {"name": "fine-foods-great", "model": "minilm-fine-foods",
     "text": "Great coffee, I will buy it again.", "target": None},
    # Real SMILES masked LMs, encoded as bert-explain --pretokenized (each piece whole from
    # vocab.txt); ERASER blanks with [UNK].
    {"name": "rxnfp-mlm-ester", "model": "rxnfp-bert-mlm",
     "text": "C C ( = O ) O . O C C >> C C O C ( C ) [MASK] O", "target": None, "pretokenized": True},
    {"name": "rxnmapper-mlm-williamson", "model": "rxnmapper-albert-mlm",
     "text": "C C [O-] [MASK] [Na+] . C I >> C C O C", "target": None, "pretokenized": True},
]


def model_dir(name):
    for d in (os.path.join(REPO, "models", name), os.path.join(REPO, "models", "downloaded", name)):
        if os.path.isfile(os.path.join(d, "config.json")):
            return d
    return None


def rounded(x):
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--mixings", default=None,
                    help="recompute only these mixings (comma-separated) and keep the rest of each fixture")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    only = {n for o in args.only for n in o.split(",") if n}
    os.makedirs(OUT, exist_ok=True)
    start = time.time()

    hand = methods_hand.build()
    methods_hand.torch_check(hand)
    with open(os.path.join(OUT, "hand.json"), "w") as f:
        json.dump(hand, f, indent=1)
        f.write("\n")

    written = []
    for case in CASES:
        if only and case["name"] not in only:
            continue
        if args.skip_minilm and case["model"] == "all-MiniLM-L6-v2":
            continue
        folder = model_dir(case["model"])
        if folder is None:
            print(f"skipping {case['name']}: no model folder {case['model']}", file=sys.stderr)
            continue
        t0 = time.time()
        mixings = tuple(args.mixings.split(",")) if args.mixings else mr.MIXINGS
        res = mr.run(folder, case["text"], case["target"], case.get("word"), case.get("label"),
                     mixings=mixings, pair=case.get("pair"), pretokenized=case.get("pretokenized", False))
        if args.mixings:
            # Only these mixings' maps and ERASER scores change; the rest stays as it was.
            with open(os.path.join(OUT, case["name"] + ".json")) as f:
                old = json.load(f)
            res["methods"] = {**old["methods"], **res["methods"]}
            if res["eraser"] is not None:
                res["eraser"] = {**old["eraser"], **res["eraser"]}
        doc = {"name": case["name"], "model": case["model"], "text": case["text"]}
        if case.get("pair") is not None:
            doc["pair"] = case["pair"]
        if case.get("pretokenized"):
            doc["pretokenized"] = True
        doc.update({"task": res["task"], "tokens": res["tokens"], "target": res["target"],
                    "explained": res["explained"], "methods": res["methods"], "eraser": res["eraser"]})
        with open(os.path.join(OUT, case["name"] + ".json"), "w") as f:
            json.dump(rounded(doc), f, separators=(",", ":"))
            f.write("\n")
        written.append(case)
        print(f"wrote {case['name']} ({time.time() - t0:.1f} s)", file=sys.stderr)

    path = os.path.join(OUT, "cases.json")
    existing = []
    if only and os.path.exists(path):
        with open(path) as f:
            existing = json.load(f)
    names = {c["name"] for c in written}
    rows = [c for c in existing if c["name"] not in names] + written
    order = [c["name"] for c in CASES]
    rows.sort(key=lambda c: order.index(c["name"]) if c["name"] in order else len(order))
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join("  " + json.dumps(c) for c in rows) + "\n]\n")
    print(f"methods fixtures: {len(written)} cases + hand.json in {time.time() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
