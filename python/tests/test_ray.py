"""The Ray Data pipeline on a local Ray cluster started here: its output equals batch
mode's (`bert-explain --input`) on the same lines, line for line, exactly (parsed JSON), and
so does its --evaluate summary."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (scripts/setup-python.sh installs it)")

from bert_explain import ray_pipeline  # noqa: E402
from conftest import MODERN, REPO, run_cli  # noqa: E402

PRONOUNS = REPO / "data" / "pronouns.jsonl"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def batch_mode(input, tmp_path, *flags):
    out = tmp_path / "batch.jsonl"
    done = run_cli("--model", str(MODERN), "--input", str(input), "--output", str(out), *flags)
    assert done.returncode == 0, done.stderr
    return out.read_text().splitlines(), done.stdout.splitlines()[:-1]


def test_jsonl_equals_batch_mode_with_evaluate(cluster, tmp_path):
    """data/pronouns.jsonl (55 sentences) with --evaluate and every method, and a copy with
    a blank line and bad lines, whose error records must carry the same line numbers."""
    lines = PRONOUNS.read_text().splitlines()
    awkward = tmp_path / "awkward.jsonl"
    awkward.write_text("\n".join(lines[:20] + ["", "not json", '{"text": "no mask"}'] + lines[20:]) + "\n")
    for input in (PRONOUNS, awkward):
        want, want_summary = batch_mode(input, tmp_path, "--evaluate", "--mixing", "all")
        out = tmp_path / "ray.jsonl"
        summary = tmp_path / "summary.txt"
        outcome = ray_pipeline.run(
            str(input), str(out), str(MODERN), options={"evaluate": True, "mixing": "all"},
            actors=3, batch_size=4, summary=str(summary),
        )
        result = outcome.summary
        assert outcome.workers == 3, "every actor explains some lines"
        got = out.read_text().splitlines()
        assert len(got) == len(want)
        for number, (g, w) in enumerate(zip(got, want), start=1):
            assert json.loads(g) == json.loads(w), f"output line {number}"
        assert result.text.splitlines() == want_summary
        assert summary.read_text().splitlines()[:-1] == want_summary
        assert result.failed == (2 if input == awkward else 0)


def test_parquet_equals_batch_mode_on_the_same_examples(cluster, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    examples = [json.loads(line) for line in PRONOUNS.read_text().splitlines()[:12]]
    for example in examples:
        example.setdefault("target", None)  # from_pylist takes its columns from the first row
    examples[3]["target"] = 2
    table = pa.Table.from_pylist(examples)
    parquet = tmp_path / "pronouns.parquet"
    pq.write_table(table, parquet)
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in examples))
    want, _ = batch_mode(jsonl, tmp_path, "--top-k", "3")
    out = tmp_path / "ray.jsonl"
    ray_pipeline.run(str(parquet), str(out), str(MODERN), options={"top_k": 3}, actors=2)
    assert [json.loads(line) for line in out.read_text().splitlines()] == [json.loads(w) for w in want]


def test_a_causal_models_prompts_equal_batch_mode(cluster, tmp_path):
    """GPT-2 prompts with their own lengths and seeds, and a line with an encoder's field."""
    gpt2 = REPO / "models" / "tiny-gpt2"
    lines = [
        '{"text": "The author talked to Sara about"}',
        '{"text": "Once upon a time", "generate": 3, "seed": 5}',
        '{"text": "x", "target": 0}',
    ] + [json.dumps({"text": f"Prompt number {k} is"}) for k in range(6)]
    input = tmp_path / "prompts.jsonl"
    input.write_text("\n".join(lines) + "\n")
    want_path = tmp_path / "batch.jsonl"
    # A prompt at a time on both sides: prompts generated together agree with each alone
    # within float32 rounding (tests/batching.rs), and this compares every bit.
    flags = ["--generate", "2", "--flow", "--mixing", "norm", "--batch-size", "1"]
    done = run_cli("--model", str(gpt2), "--input", str(input), "--output", str(want_path), *flags)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "ray.jsonl"
    options = {"generate": 2, "flow": True, "mixing": "norm", "batch_size": 1}
    outcome = ray_pipeline.run(str(input), str(out), str(gpt2), options=options, actors=2, batch_size=2)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert got == [json.loads(line) for line in want_path.read_text().splitlines()]
    assert outcome.summary.failed == 1 and got[1]["generation"]["seed"] == 5
