"""AttnLRP and CP-LRP from the package equal the authors' code, run live: LXT 2.1 in its own
env (.venv-lxt, `scripts/reference/setup.sh lxt`, which scripts/test.sh runs) computes the
relevances of a masked LM, a decoder classifier and a causal LM here and now
(scripts/reference/lrp_reference.py, float64), and the package's must agree within 1e-4 of
the largest |R|. Without that env the test is skipped and says why.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import bert_explain
from conftest import REPO

LXT_PYTHON = REPO / ".venv-lxt" / "bin" / "python"
CASES = ["modern-author", "llama-cls-film", "qwen3-author"]


@pytest.fixture(scope="module")
def lxt(tmp_path_factory):
    """LXT's relevances for CASES, by case name."""
    if not LXT_PYTHON.exists():
        pytest.skip(
            f"LXT's reference env is missing ({LXT_PYTHON}); run scripts/reference/setup.sh lxt "
            "(BERT_EXPLAIN_NO_TORCH=1 leaves it out of scripts/test.sh)"
        )
    out = tmp_path_factory.mktemp("lxt")
    command = [str(LXT_PYTHON), "scripts/reference/lrp_reference.py", "--no-v5-check",
               "--only", ",".join(CASES), "--out", str(out)]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True, timeout=900)
    return {case: json.loads((out / f"{case}.json").read_text()) for case in CASES}


def close(got, want, name):
    largest = max(abs(r) for r in want)
    assert len(got) == len(want), name
    for j, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * largest, f"{name}[{j}]: {g} vs LXT {w}"


@pytest.mark.parametrize("case", CASES)
def test_relevance_equals_lxt(lxt, case):
    fixture = lxt[case]
    explainer = bert_explain.Explainer(str(REPO / "models" / fixture["model"]))
    if fixture["kind"] == "causal_lm":
        report = explainer.explain(fixture["text"], lrp=True, generate=1)
        assert report["prompt_ids"] == fixture["ids"]
        importance = report["importance"][0]
    else:
        options = {"label": str(fixture["class_id"])} if fixture["kind"] == "classifier" else {}
        importance = explainer.explain(fixture["text"], lrp=True, **options)["importance"]
    assert importance["id"] == fixture["class_id"]
    for score in ("attnlrp", "cp_lrp"):
        close(importance[score], fixture[score], f"{case} {score}")
    assert abs(importance["lrp_check"]["logit"] - fixture["logit"]) <= 1e-4 * abs(fixture["logit"])
