"""A transformers model's `output_attentions`, passed straight in, gives what `--attention`
gives on the same attention saved as .npy.

Needs torch and transformers. The test env (.venv-python) does not install them (PyPI's
torch brings ~3 GB of CUDA libraries); they are taken from this env when present, else from
the reference env `.venv-reference` (scripts/reference/setup.sh; BERT_EXPLAIN_REFERENCE_ENV
names another), else the test is skipped and says so.
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np
import pytest

import bert_explain
from conftest import MODERN, REPO, SENTENCE, cli_json


def _import_torch():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401

        return
    except ImportError:
        pass
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    env = os.environ.get("BERT_EXPLAIN_REFERENCE_ENV", str(REPO / ".venv-reference"))
    site = glob.glob(os.path.join(env, "lib", version, "site-packages"))
    if not site:
        pytest.skip(
            "torch and transformers are not installed and there is no reference env "
            f"({env}/lib/{version}); run scripts/reference/setup.sh to run this test",
            allow_module_level=True,
        )
    sys.path.append(site[0])


_import_torch()
import torch  # noqa: E402
import transformers  # noqa: E402


@pytest.fixture(scope="module")
def attentions():
    """The tiny model's tokens and output_attentions (eager attention, as the reference)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(MODERN)
    model = transformers.AutoModelForMaskedLM.from_pretrained(MODERN, attn_implementation="eager")
    model.eval()
    encoded = tokenizer(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        output = model(**encoded, output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    return tokens, output.attentions


def test_output_attentions_straight_in_equal_attention_file(attentions, tmp_path):
    tokens, output_attentions = attentions
    assert isinstance(output_attentions, tuple) and output_attentions[0].dim() == 4
    path = tmp_path / "attention.npy"
    np.save(path, torch.stack(output_attentions)[:, 0].numpy())
    for flags, keywords in [([], {}), (["--fusion", "max", "--all-positions"], {"fusion": "max", "all_positions": True})]:
        want = cli_json("--attention", str(path), "--tokens", " ".join(tokens), *flags)
        got = bert_explain.explain_attention(output_attentions, tokens, name=str(path), **keywords)
        assert got == want
    target = tokens.index("[MASK]")
    want = cli_json("--attention", str(path), "--target", str(target))["relevance"]
    assert bert_explain.attention_flow(output_attentions, target).tolist() == want["flow"]
    assert bert_explain.attention_rollout(output_attentions, target).tolist() == want["rollout"]


def test_transformers_attention_gives_the_rust_models_maps(attentions):
    """The same maps (to SPEC's 1e-5) as the Rust forward pass of the same checkpoint."""
    tokens, output_attentions = attentions
    report = bert_explain.Explainer(MODERN).explain(SENTENCE)
    assert report["tokens"] == tokens
    target = report["target"]["index"]
    for name, compute in [
        ("raw", bert_explain.raw_attention),
        ("rollout", bert_explain.attention_rollout),
        ("flow", bert_explain.attention_flow),
    ]:
        got = compute(output_attentions, target)
        np.testing.assert_allclose(got, np.array(report["relevance"][name]), rtol=0, atol=1e-5)
