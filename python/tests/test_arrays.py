"""The attention functions on arrays: against networkx (the reference's flow) and against
`bert-explain --attention` on the same stack."""

from __future__ import annotations

import json
import threading
import time

import networkx as nx
import numpy as np
import pytest

import bert_explain
from conftest import REPO, cli_error, cli_json

FIXTURES = REPO / "tests" / "fixtures"
# Both sides compute in f64 from the same attention (as tests/relevance_exact.rs).
TOLERANCE = 1e-9


def attention_cases():
    """Every tiny-model case whose attention the reference saved, with its maps."""
    for path in sorted((FIXTURES / "attention").glob("*.json")):
        fixture = json.loads(path.read_text())
        maps = json.loads((FIXTURES / path.name).read_text())["relevance"]
        yield path.stem, np.array(fixture["attention"]), fixture["target"], fixture["tokens"], maps


CASES = list(attention_cases())


def test_there_are_reference_cases():
    assert len(CASES) >= 18


@pytest.mark.parametrize("name,attention,target,tokens,maps", CASES, ids=[c[0] for c in CASES])
def test_maps_equal_the_reference(name, attention, target, tokens, maps):
    """raw, rollout and flow equal the PyTorch + networkx reference's (edmonds_karp)."""
    for got, want in [
        (bert_explain.raw_attention(attention, target), maps["raw"]),
        (bert_explain.attention_rollout(attention, target), maps["rollout"]),
        (bert_explain.attention_flow(attention, target), maps["flow"]),
    ]:
        assert got.shape == (attention.shape[0], attention.shape[2])
        np.testing.assert_allclose(got, np.array(want), rtol=0, atol=TOLERANCE)


def networkx_flow(attention: np.ndarray, target: int, residual: float = 0.5) -> np.ndarray:
    """Attention flow as SPEC §1 defines it, with networkx's edmonds_karp: written here from
    the definition, independently of the package."""
    fused = attention.mean(axis=1)
    n = fused.shape[-1]
    augmented = (1 - residual) * fused + residual * np.eye(n)
    augmented = augmented / augmented.sum(axis=-1, keepdims=True)
    graph = nx.DiGraph()
    for layer in range(1, fused.shape[0] + 1):
        for i in range(n):
            for j in range(n):
                graph.add_edge((layer, i), (layer - 1, j), capacity=augmented[layer - 1][i][j])
    rows = []
    for layer in range(1, fused.shape[0] + 1):
        flows = [
            nx.maximum_flow_value(
                graph, (layer, target), (0, j), flow_func=nx.algorithms.flow.edmonds_karp
            )
            for j in range(n)
        ]
        rows.append(np.array(flows) / sum(flows))
    return np.array(rows)


def test_flow_equals_networkx_computed_now():
    """On one fixture, networkx runs here (not a stored result), with a residual other than
    the default."""
    _, attention, target, _, _ = next(c for c in CASES if c[0] == "modern-author")
    for residual in (0.5, 0.3):
        want = networkx_flow(attention, target, residual)
        got = bert_explain.attention_flow(attention, target, residual=residual)
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE)


def test_all_positions_equal_networkx_max_flows():
    """tests/fixtures/flow_networkx.json: networkx's max flow from every (layer, position) on
    residual-augmented matrices; with residual 0 those matrices are the capacities."""
    fixture = json.loads((FIXTURES / "flow_networkx.json").read_text())
    augmented = np.array(fixture["augmented"])
    max_flow = np.array(fixture["max_flow"])
    want = max_flow / max_flow.sum(axis=-1, keepdims=True)
    got = bert_explain.all_positions(augmented, residual=0.0)
    assert got.flow.shape == want.shape
    np.testing.assert_allclose(got.flow, want, rtol=0, atol=TOLERANCE)


@pytest.fixture
def saved(tmp_path):
    """A reference case's attention as a float32 .npy file, and the array."""
    _, attention, target, tokens, _ = next(c for c in CASES if c[0] == "modern-author")
    array = attention.astype(np.float32)
    path = tmp_path / "attention.npy"
    np.save(path, array)
    return path, array, target, tokens


@pytest.mark.parametrize(
    "fusion,residual,extra",
    [("mean", 0.5, []), ("max", 0.2, []), ("min", 0.9, []), ("mean", 0.5, ["all_positions"])],
)
def test_explain_attention_equals_the_command_line(saved, fusion, residual, extra):
    path, array, target, tokens = saved
    flags = [f"--{e.replace('_', '-')}" for e in extra]
    want = cli_json(
        "--attention", str(path), "--tokens", " ".join(tokens), "--fusion", fusion,
        "--residual", str(residual), *flags,
    )
    got = bert_explain.explain_attention(
        array, tokens, fusion=fusion, residual=residual, name=str(path),
        **{e: True for e in extra},
    )
    assert got == want
    # The single maps are the report's.
    kwargs = dict(residual=residual, fusion=fusion)
    assert bert_explain.attention_flow(array, target, **kwargs).tolist() == want["relevance"]["flow"]
    assert (
        bert_explain.attention_rollout(array, target, **kwargs).tolist()
        == want["relevance"]["rollout"]
    )
    assert bert_explain.raw_attention(array, target, fusion).tolist() == want["relevance"]["raw"]
    if extra:
        both = bert_explain.all_positions(array, **kwargs)
        assert both.rollout.tolist() == want["all_positions"]["rollout"]
        assert both.flow.tolist() == want["all_positions"]["flow"]
        assert both.raw.tolist() == want["all_positions"]["raw"]


def test_hide_special_and_figures_equal_the_command_line(saved, tmp_path):
    path, array, target, tokens = saved
    labels = ["[CLS]", *tokens[1:-1], "[SEP]"]
    cli_svg, py_svg = tmp_path / "cli.svg", tmp_path / "py.svg"
    want = cli_json(
        "--attention", str(path), "--tokens", " ".join(labels), "--hide-special",
        "--figure", str(cli_svg),
    )
    got = bert_explain.explain_attention(
        array, labels, hide_special=True, figure=py_svg, name=str(path)
    )
    assert got == want
    assert py_svg.read_bytes() == cli_svg.read_bytes()


def test_a_tuple_of_layers_with_a_batch_dimension_is_the_stack(saved):
    """transformers' output_attentions: one [1, heads, n, n] per layer."""
    _, array, target, _ = saved
    layers = tuple(layer[None] for layer in array)
    np.testing.assert_array_equal(
        bert_explain.attention_flow(layers, target), bert_explain.attention_flow(array, target)
    )
    three = array.mean(axis=1)  # [layers, n, n]: one head
    assert bert_explain.attention_rollout(three, target).shape == (array.shape[0], array.shape[2])


def test_errors_carry_the_command_lines_messages(saved, tmp_path):
    path, array, target, tokens = saved
    status, message = cli_error("--attention", str(path), "--target", "99")
    assert status == 2
    with pytest.raises(bert_explain.UsageError) as caught:
        bert_explain.attention_flow(array, 99)
    assert str(caught.value) == message

    for bad, what in [(np.nan, "NaN"), (np.inf, "inf"), (-0.25, "negative")]:
        broken = array.copy()
        broken[1, 2, 3, 4] = bad
        bad_path = tmp_path / "bad.npy"
        np.save(bad_path, broken)
        status, message = cli_error("--attention", str(bad_path), "--target", "1")
        assert status == 1
        with pytest.raises(bert_explain.ExplainError) as caught:
            bert_explain.attention_rollout(broken, 1)
        # The command line names the file; the message after it is the same.
        inner = message.split(": ", 1)[1]
        assert str(caught.value) == f"the attention stack is not usable: {inner}"
        assert "layer 2 head 2 row 3" in inner, what

    with pytest.raises(bert_explain.ExplainError, match=r"expected shape \[layers, heads, n, n\]"):
        bert_explain.attention_flow(np.ones((2, 3, 4)) / 4, 0)
    with pytest.raises(bert_explain.ExplainError, match="sums to 2.000000 rather than 1"):
        bert_explain.attention_flow(np.ones((1, 1, 2, 2)), 0)
    with pytest.raises(bert_explain.ExplainError, match="int64 values"):
        bert_explain.attention_flow(np.ones((1, 1, 1, 1), dtype=np.int64), 0)
    with pytest.raises(bert_explain.UsageError, match="residual=1.5 is not a number between 0 and 1"):
        bert_explain.attention_flow(array, target, residual=1.5)
    with pytest.raises(bert_explain.UsageError, match="choose mean, max or min"):
        bert_explain.attention_flow(array, target, fusion="median")


def test_float16_rows_get_float16s_tolerance(saved):
    """As --attention does for a float16 file: rows may miss 1 by float16's rounding."""
    _, array, target, _ = saved
    half = array.astype(np.float16)
    assert np.abs(half.astype(np.float64).sum(-1) - 1).max() > 0
    assert bert_explain.attention_flow(half, target).shape == (array.shape[0], array.shape[2])


def test_the_gil_is_released_while_flow_runs():
    """A Python thread keeps running while long flows compute in another: ticks land inside
    the calls, not only between them. Calls repeat until 0.3 s have been spent in them, so the
    test does not depend on how fast the engine is."""
    rng = np.random.default_rng(7)
    n = 48
    attention = np.exp(3 * rng.standard_normal((6, 4, n, n)))
    attention /= attention.sum(-1, keepdims=True)
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    windows = []
    thread = threading.Thread(target=tick)
    thread.start()
    try:
        while sum(end - start for start, end in windows) < 0.3:
            start = time.perf_counter()
            bert_explain.all_positions(attention)
            windows.append((start, time.perf_counter()))
    finally:
        done.set()
        thread.join()
    elapsed = sum(end - start for start, end in windows)
    # With the GIL held the ticker would stall inside every call: none of its ticks would
    # fall inside one, past a tick that may have started just before the call did.
    during = [t for t in ticks if any(start + 0.002 < t < end for start, end in windows)]
    assert len(during) > 10, f"{len(during)} ticks in {elapsed:.2f} s of {len(windows)} calls"
