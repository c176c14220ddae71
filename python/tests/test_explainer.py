"""Explainer against the command line: the same reports, the same errors, batch mode's
records and summary."""

from __future__ import annotations

import json

import pytest

import bert_explain
from conftest import CLASSIFIER, MODERN, REPO, SENTENCE, cli_error, cli_json, run_cli

# Each case: the command line's options, and the same as keywords.
MASKED_CASES = [
    ([], {}),
    (["--target", "3", "--top-k", "2"], {"target": 3, "top_k": 2}),
    (["--candidates", "his,the"], {"candidates": ["his", "the"]}),
    (["--fusion", "max", "--residual", "0.3"], {"fusion": "max", "residual": 0.3}),
    (["--all-positions", "--hide-special"], {"all_positions": True, "hide_special": True}),
    (
        ["--evaluate", "--mixing", "all", "--blank", "mask"],
        {"evaluate": True, "mixing": ["all"], "blank": "mask"},
    ),
    (
        ["--evaluate", "--importance-word", "her", "--mixing", "norm,alti"],
        {"evaluate": True, "importance_word": "her", "mixing": "norm,alti"},
    ),
    (
        ["--evaluate", "--correlate-without-specials", "--ig-steps", "8"],
        {"evaluate": True, "correlate_without_specials": True, "ig_steps": 8},
    ),
    (
        ["--no-flow", "--mixing", "norm", "--all-positions", "--evaluate"],
        {"no_flow": True, "mixing": "norm", "all_positions": True, "evaluate": True},
    ),
    (
        ["--lrp", "--importance-word", "her", "--correlate-without-specials"],
        {"lrp": True, "importance_word": "her", "correlate_without_specials": True},
    ),
    (["--flow"], {"flow": True}),
]


@pytest.mark.parametrize("flags,keywords", MASKED_CASES, ids=[" ".join(c[0]) or "plain" for c in MASKED_CASES])
def test_reports_equal_the_command_lines(modern, flags, keywords):
    want = cli_json("--model", str(MODERN), SENTENCE, *flags)
    assert modern.explain(SENTENCE, **keywords) == want


def test_a_classifier_with_a_pair_and_a_label(classifier):
    flags = ["--pair", "a film", "--evaluate", "--label", "entailment", "--mixing", "grad-attention"]
    want = cli_json("--model", str(CLASSIFIER), "a good film", *flags)
    got = classifier.explain(
        "a good film", pair="a film", evaluate=True, label="entailment", mixing="grad-attention"
    )
    assert got == want
    assert classifier.task == "sequence-classification" and classifier.family == "bert"


@pytest.mark.parametrize("family", ["llama", "gemma2", "phi3"])
def test_a_decoder_classifier_reads_its_last_token(family):
    """A decoder's classifier (issue 62): its labels, --label, --evaluate with --blank pad."""
    path = REPO / "models" / f"tiny-{family}-cls"
    flags = ["--evaluate", "--blank", "pad", "--label", "negative", "--mixing", "all"]
    want = cli_json("--model", str(path), "The food is not good.", *flags)
    explainer = bert_explain.Explainer(path)
    got = explainer.explain(
        "The food is not good.", evaluate=True, blank="pad", label="negative", mixing="all"
    )
    assert got == want
    assert explainer.task == "sequence-classification" and explainer.family == family
    assert got["target"]["index"] == len(got["tokens"]) - 1


@pytest.mark.parametrize("model", ["tiny-deberta-cls", "tiny-deberta-mlm", "tiny-modernbert-mean"])
def test_the_new_encoders_explain_as_the_command_line_does(model):
    """DeBERTa (its classifier's tokenizer read from spm.model alone) and ModernBERT (issue
    62): every method, importance and hidden specials, the report equal to the binary's."""
    path = REPO / "models" / model
    text = "The author talked to Sara about [MASK] book" if "mlm" in model else "The food is not good."
    want = cli_json("--model", str(path), text, "--evaluate", "--mixing", "all", "--hide-special")
    explainer = bert_explain.Explainer(path)
    got = explainer.explain(text, evaluate=True, mixing="all", hide_special=True)
    assert got == want
    assert explainer.family == ("modernbert" if "modernbert" in model else "deberta-v2")


def test_mixing_all_leaves_out_what_a_headless_encoder_cannot_run():
    """mixing="all" is every method that applies, as on the command line: grad-attention
    needs a head to differentiate, so a headless encoder runs the rest, with a warning."""
    encoder = REPO / "models" / "tiny-bert-encoder"
    want = cli_json("--model", str(encoder), "the book is here", "--target", "2", "--mixing", "all")
    assert "grad-attention" not in want["methods"] and "alti" in want["methods"]
    explainer = bert_explain.Explainer(str(encoder))
    with pytest.warns(UserWarning, match="leaves out grad-attention"):
        got = explainer.explain("the book is here", target=2, mixing="all")
    assert got == want
    with pytest.raises(bert_explain.UsageError, match="grad-attention needs a checkpoint"):
        explainer.explain("the book is here", target=2, mixing="grad-attention")


def test_explain_batch_is_explain_on_each(modern, tmp_path):
    texts = [SENTENCE, "She asked the doctor about [MASK] backache."]
    assert modern.explain_batch(texts, top_k=3) == [modern.explain(t, top_k=3) for t in texts]
    with pytest.raises(bert_explain.UsageError, match="figure and html draw one text"):
        modern.explain_batch(texts, figure=tmp_path / "two.svg")
    assert not (tmp_path / "two.svg").exists()


def test_keywords_the_parser_would_refuse(modern):
    """Where clap refuses an option (exit status 2), the keyword is a UsageError."""
    for keywords, message in [
        ({"importance_word": "his"}, "pass evaluate=True or lrp=True with it"),
        ({"blank": "mask"}, "pass evaluate=True with it"),
        ({"ig_steps": 8}, "pass evaluate=True with it"),
        ({"evaluate": True, "ig_steps": 0}, "ig_steps must be a whole number from 1 to 1000"),
        ({"residual": -0.1}, "is not a number between 0 and 1"),
        ({"blank": "zero", "evaluate": True}, "choose unk, mask or pad"),
        ({"figure": "x.pdf"}, "cannot tell the figure format"),
        ({"html": "x.txt"}, "does not end in .html"),
        ({"flow": True, "no_flow": True}, "contradict each other"),
    ]:
        with pytest.raises(bert_explain.UsageError, match=message):
            modern.explain(SENTENCE, **keywords)


def test_figures_and_page_equal_the_command_lines(modern, tmp_path):
    cli_files = [tmp_path / "cli.svg", tmp_path / "cli.png", tmp_path / "cli.html"]
    py_files = [tmp_path / "py.svg", tmp_path / "py.png", tmp_path / "py.html"]
    want = cli_json(
        "--model", str(MODERN), SENTENCE, "--figure", str(cli_files[0]),
        "--figure", str(cli_files[1]), "--html", str(cli_files[2]),
    )
    got = modern.explain(SENTENCE, figure=py_files[:2], html=py_files[2])
    assert got == want
    for cli_file, py_file in zip(cli_files, py_files):
        assert py_file.read_bytes() == cli_file.read_bytes(), py_file.name


# Each case: the command line's arguments after the model, and the call.
ERROR_CASES = [
    (["The author talked to Sara about book"], lambda e: e.explain("The author talked to Sara about book")),
    (["[MASK] and [MASK]"], lambda e: e.explain("[MASK] and [MASK]")),
    ([SENTENCE, "--target", "40"], lambda e: e.explain(SENTENCE, target=40)),
    ([SENTENCE, "--candidates", "xylophone"], lambda e: e.explain(SENTENCE, candidates="xylophone")),
    ([SENTENCE, "--evaluate", "--label", "x"], lambda e: e.explain(SENTENCE, evaluate=True, label="x")),
    ([SENTENCE, "--mixing", "magic"], lambda e: e.explain(SENTENCE, mixing="magic")),
    ([""], lambda e: e.explain("")),
]


@pytest.mark.parametrize("args,call", ERROR_CASES, ids=[" ".join(c[0])[:40] for c in ERROR_CASES])
def test_usage_errors_carry_the_command_lines_messages(modern, args, call):
    status, message = cli_error("--model", str(MODERN), *args)
    assert status == 2
    with pytest.raises(bert_explain.UsageError) as caught:
        call(modern)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_other_errors_are_explain_errors(tmp_path):
    missing = tmp_path / "no-such-model"
    status, message = cli_error("--model", str(missing), SENTENCE)
    assert status == 1
    with pytest.raises(bert_explain.ExplainError) as caught:
        bert_explain.Explainer(missing)
    assert str(caught.value) == message
    assert isinstance(caught.value, RuntimeError)
    with pytest.raises(bert_explain.UsageError, match="choose auto, cpu, cuda or metal"):
        bert_explain.Explainer(MODERN, device="tpu")


def batch_lines(path):
    return list(enumerate(path.read_text(encoding="utf-8").split("\n"), start=1))


@pytest.fixture
def awkward(tmp_path):
    """pronouns.jsonl's first lines with a blank line, a bad line and a line of options."""
    lines = (REPO / "data" / "pronouns.jsonl").read_text().splitlines()[:6]
    lines[2:2] = ["", "not json", '{"text": "no mask"}', '{"text": "The [MASK] is here", "target": 1}']
    path = tmp_path / "awkward.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("evaluate", [False, True])
def test_batch_records_and_summary_equal_batch_mode(modern, awkward, tmp_path, evaluate):
    out = tmp_path / "cli.jsonl"
    flags = ["--evaluate"] if evaluate else []
    done = run_cli("--model", str(MODERN), "--input", str(awkward), "--output", str(out), *flags)
    assert done.returncode == 0, done.stderr
    want = out.read_text().splitlines()
    got = [r for r in modern.batch_records(batch_lines(awkward), evaluate=evaluate) if r is not None]
    assert [json.loads(r) for r in got] == [json.loads(w) for w in want]
    assert sum("error" in json.loads(r) for r in got) == 2
    summary = bert_explain.evaluation_summary(got)
    # Batch mode prints the table (with --evaluate), then a line with its timing.
    printed = done.stdout.splitlines()
    assert summary.text.splitlines() == printed[:-1]
    assert (summary.lines, summary.failed) == (len(want), 2)
    assert printed[-1].startswith(f"{len(want)} sentences (2 failed) in ")


GPT2 = REPO / "models" / "tiny-gpt2"
PROMPT = "The author talked to Sara about"
# Each case: a causal model, the command line's options, and the same as keywords.
CAUSAL_CASES = [
    ("tiny-gpt2", [], {}),
    ("tiny-gpt2", ["--generate", "4", "--flow"], {"generate": 4, "flow": True}),
    (
        "tiny-gpt2",
        ["--generate", "3", "--sample", "--seed", "7", "--temperature", "0.8", "--correction"],
        {"generate": 3, "sample": True, "seed": 7, "temperature": 0.8, "correction": True},
    ),
    (
        "tiny-llama",
        ["--generate", "2", "--mixing", "all", "--top-prompt", "2", "--skip-common"],
        {"generate": 2, "mixing": "all", "top_prompt": 2, "skip_common": True},
    ),
    ("tiny-qwen2", ["--generate", "2", "--flow", "--fusion", "max"], {"generate": 2, "flow": True, "fusion": "max"}),
]


@pytest.mark.parametrize(
    "model,flags,keywords", CAUSAL_CASES, ids=[f"{c[0]} {' '.join(c[1])}" for c in CAUSAL_CASES]
)
def test_causal_reports_equal_the_command_lines(model, flags, keywords):
    path = REPO / "models" / model
    want = cli_json("--model", str(path), PROMPT, *flags)
    explainer = bert_explain.Explainer(path)
    assert explainer.task == "causal-lm" and explainer.family == want["family"]
    assert explainer.explain(PROMPT, **keywords) == want


def test_causal_figures_and_page_equal_the_command_lines(tmp_path):
    cli_svg, cli_html = tmp_path / "cli.svg", tmp_path / "cli.html"
    flags = ["--generate", "3", "--figure", str(cli_svg), "--html", str(cli_html), "--figure-token", "1"]
    want = cli_json("--model", str(GPT2), PROMPT, *flags)
    svg, html = tmp_path / "py.svg", tmp_path / "py.html"
    got = bert_explain.Explainer(GPT2).explain(PROMPT, generate=3, figure=svg, html=html, figure_token=1)
    assert got == want
    assert svg.read_bytes() == cli_svg.read_bytes()
    assert html.read_bytes() == cli_html.read_bytes()


@pytest.mark.parametrize(
    "flags,keywords",
    [
        (["--target", "1"], {"target": 1}),
        (["--hide-special"], {"hide_special": True}),
        (["--no-flow"], {"no_flow": True}),
        (["--generate", "0"], {"generate": 0}),
        (["--generate", "2", "--figure", "x.svg", "--figure-token", "5"], {"generate": 2, "figure": "x.svg", "figure_token": 5}),
    ],
)
def test_causal_usage_errors_carry_the_command_lines_messages(tmp_path, flags, keywords):
    flags = [str(tmp_path / f) if f.endswith(".svg") else f for f in flags]
    keywords = {k: str(tmp_path / v) if k == "figure" else v for k, v in keywords.items()}
    status, message = cli_error("--model", str(GPT2), PROMPT, *flags)
    assert status == 2
    with pytest.raises(bert_explain.UsageError) as caught:
        bert_explain.Explainer(GPT2).explain(PROMPT, **keywords)
    assert str(caught.value) == message


def test_an_encoder_refuses_a_causal_models_keywords(modern):
    with pytest.raises(bert_explain.UsageError, match="--correction applies to causal language models"):
        modern.explain(SENTENCE, correction=True)
    with pytest.raises(bert_explain.UsageError, match="--generate applies to causal language models"):
        modern.batch_records([(1, '{"text": "a [MASK] b"}')], generate=3)


def largest_difference(a, b):
    """The largest difference between two reports' numbers; everything else equal."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        return max((largest_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list):
        assert len(a) == len(b)
        return max((largest_difference(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b)
    assert a == b
    return 0.0


def test_causal_prompts_generated_together_equal_each_alone():
    """The same tokens, the maps within float32 rounding (docs/usage.md: a prompt alone feeds
    one row a step, which another kernel multiplies; 1e-5 is tests/batching.rs's bound for the
    32-wide tiny checkpoints)."""
    explainer = bert_explain.Explainer(GPT2)
    prompts = [PROMPT, "Once", "Once upon a time there was a", "The"]
    alone = [explainer.explain(p, generate=3) for p in prompts]
    together = explainer.explain_batch(prompts, generate=3, batch_size=4)
    assert max(largest_difference(a, t) for a, t in zip(alone, together)) <= 1e-5
    one_at_a_time = explainer.explain_batch(prompts, generate=3, batch_size=1)
    assert one_at_a_time == alone
    with pytest.raises(bert_explain.UsageError, match="batch_size must be a whole number"):
        explainer.explain_batch(prompts, batch_size=0)


def test_causal_batch_records_equal_batch_mode(tmp_path):
    lines = [
        '{"text": "The author talked to Sara about"}',
        '{"text": "Once upon a time", "generate": 3, "seed": 11}',
        "",
        '{"text": "x", "candidates": ["a"]}',
        "not json",
    ]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cli.jsonl"
    flags = ["--generate", "2", "--flow", "--mixing", "value-zeroing"]
    done = run_cli("--model", str(GPT2), "--input", str(path), "--output", str(out), *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("4 prompts (2 failed) in ")
    want = out.read_text().splitlines()
    explainer = bert_explain.Explainer(GPT2)
    got = explainer.batch_records(batch_lines(path), generate=2, flow=True, mixing="value-zeroing")
    assert got[2] is None and got[5] is None
    assert [json.loads(r) for r in got if r is not None] == [json.loads(w) for w in want]
    assert json.loads(want[1])["generation"]["seed"] == 11
