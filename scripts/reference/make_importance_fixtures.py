#!/usr/bin/env python3
"""Writes tests/fixtures/importance/<name>.json: importance scores and their correlations with
the reference's relevance maps (importance.py) for every tiny masked-LM case of
tests/fixtures/cases.json, with the default settings (top word, [UNK]), plus the variants in
EXTRA (a chosen candidate, [MASK] as the blank). Run with the reference venv's python from
anywhere: .venv-reference/bin/python scripts/reference/make_importance_fixtures.py
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import importance  # noqa: E402

EXTRA = [
    {"name": "legacy-author-her", "case": "legacy-author", "word": "her", "blank": "unk"},
    {"name": "modern-author-mask", "case": "modern-author", "word": None, "blank": "mask"},
    {"name": "modern-keys-are-mask", "case": "modern-keys", "word": "are", "blank": "mask"},
    {"name": "modern-author-without-specials", "case": "modern-author", "word": None, "blank": "unk",
     "without_specials": True},
]


def main():
    fixtures = os.path.join(REPO, "tests", "fixtures")
    with open(os.path.join(fixtures, "cases.json")) as f:
        cases = {c["name"]: c for c in json.load(f)}
    runs = [{"name": name, "case": name, "word": None, "blank": "unk"}
            for name, c in cases.items() if c["model"] in ("tiny-bert-legacy", "tiny-bert-modern")]
    runs += EXTRA
    out_dir = os.path.join(fixtures, "importance")
    os.makedirs(out_dir, exist_ok=True)
    for run in runs:
        case = cases[run["case"]]
        model = os.path.join(REPO, "models", case["model"])
        scores = importance.importance(model, case["text"], case["target"], run["word"], run["blank"])
        with open(os.path.join(fixtures, run["case"] + ".json")) as f:
            report = json.load(f)
        # With "without_specials": the tokens the tokenizer added ([CLS], [SEP]) are left out
        # of the correlations (a [MASK] in the text is not one of them).
        leave_out = None
        if run.get("without_specials"):
            tok = importance.ref.load_tokenizer(model)
            mask = tok(case["text"], return_special_tokens_mask=True)["special_tokens_mask"]
            leave_out = {j for j, special in enumerate(mask) if special}
        evaluation = importance.evaluation(report, scores, leave_out)
        evaluation["without_specials"] = bool(run.get("without_specials"))
        result = {**run, "text": case["text"], "model": case["model"], "target": case["target"],
                  "importance": scores, "evaluation": evaluation}
        with open(os.path.join(out_dir, run["name"] + ".json"), "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        print(f"wrote {run['name']}", file=sys.stderr)


if __name__ == "__main__":
    main()
