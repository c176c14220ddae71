"""Explainer on images (ViT, DeiT, DINOv2) against the command line: the same reports from a
path or from the file's bytes, the same figure, the same refusals."""

from __future__ import annotations

import json

import pytest

import bert_explain
from conftest import REPO, cli_json, run_cli

VIT = REPO / "models" / "tiny-vit-cls"
DINOV2 = REPO / "models" / "tiny-dinov2-registers-cls"
IMAGES = REPO / "tests" / "fixtures" / "vision" / "images"

# Each case: the model, the image, the command line's options and the same as keywords.
CASES = [
    (VIT, "shapes.png", [], {}),
    (VIT, "square.png", ["--evaluate", "--mixing", "norm", "--ig-steps", "8"],
     {"evaluate": True, "mixing": "norm", "ig_steps": 8}),
    (DINOV2, "tall.png", ["--lrp", "--discard-ratio", "0.5", "--target", "5", "--fusion", "max"],
     {"lrp": True, "discard_ratio": 0.5, "target": 5, "fusion": "max"}),
    (DINOV2, "shapes.png", ["--evaluate", "--correlate-without-specials", "--hide-special"],
     {"evaluate": True, "correlate_without_specials": True, "hide_special": True}),
]


@pytest.mark.parametrize("model,image,flags,keywords", CASES, ids=[
    f"{c[0].name} {c[1]} {' '.join(c[2])}".strip() for c in CASES])
def test_reports_equal_the_command_lines(model, image, flags, keywords):
    want = cli_json("--model", str(model), str(IMAGES / image), *flags)
    explainer = bert_explain.Explainer(model)
    assert explainer.explain_image(IMAGES / image, **keywords) == want
    assert explainer.explain_image((IMAGES / image).read_bytes(), **keywords) == want


def test_explain_images_is_explain_image_on_each(tmp_path):
    explainer = bert_explain.Explainer(DINOV2)
    images = [IMAGES / "shapes.png", (IMAGES / "tall.png").read_bytes(), str(IMAGES / "square.png")]
    assert explainer.explain_images(images, no_flow=True) == [
        explainer.explain_image(image, no_flow=True) for image in images]
    with pytest.raises(bert_explain.UsageError, match="figure and html draw one image"):
        explainer.explain_images(images, figure=tmp_path / "two.svg")


def test_the_figure_equals_the_command_lines(tmp_path):
    image = IMAGES / "square.png"
    done = run_cli("--model", str(VIT), str(image), "--lrp", "--figure", str(tmp_path / "cli.svg"))
    assert done.returncode == 0, done.stderr
    bert_explain.Explainer(VIT).explain_image(image, lrp=True, figure=tmp_path / "py.svg")
    assert (tmp_path / "py.svg").read_text() == (tmp_path / "cli.svg").read_text()


def test_what_does_not_suit_an_image_is_refused(tmp_path):
    explainer = bert_explain.Explainer(VIT)
    with pytest.raises(bert_explain.UsageError, match="an image model has no vocabulary"):
        explainer.explain("a text")
    with pytest.raises(bert_explain.UsageError, match="not an image|image"):
        explainer.explain_image(b"not an image at all")
    with pytest.raises(bert_explain.UsageError, match="cannot read|No such file|not found"):
        explainer.explain_image(tmp_path / "missing.png")
    with pytest.raises(bert_explain.UsageError, match="reads texts, not images"):
        bert_explain.Explainer(REPO / "models" / "tiny-bert-cls").explain_image(IMAGES / "shapes.png")


def test_batch_records_take_image_lines():
    explainer = bert_explain.Explainer(VIT)
    image = IMAGES / "shapes.png"
    lines = [(1, json.dumps({"image": str(image)})), (2, json.dumps({"text": "a text"}))]
    first, second = explainer.batch_records(lines, evaluate=True)
    assert json.loads(first) == explainer.explain_image(image, evaluate=True)
    assert json.loads(second)["line"] == 2 and "error" in json.loads(second)
