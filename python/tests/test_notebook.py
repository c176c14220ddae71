"""Reports in Jupyter: a report is still the dict of the JSON report, and a notebook cell
shows it as the interactive page of ``--html`` (in a frame of its own; no network, no
external JavaScript). A real notebook runs through nbclient, and the page in its output is
checked in headless Chromium as the HTML test checks ``--html`` pages."""

from __future__ import annotations

import ast
import html
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import bert_explain
from conftest import MODERN, REPO, SENTENCE, cli_json, run_cli

CHECK = REPO / "tests" / "browser" / "check-report.mjs"


def page_in(output_html: str) -> str:
    """The page inside a report's frame."""
    match = re.search(r'srcdoc="([^"]*)"', output_html)
    assert match, output_html[:200]
    return html.unescape(match.group(1))


def test_a_report_is_the_dict_and_draws_what_the_command_line_draws(modern, tmp_path):
    report = modern.explain(SENTENCE, mixing="norm")
    assert isinstance(report, dict) and report == cli_json("--model", str(MODERN), SENTENCE, "--mixing", "norm")
    svg, page = tmp_path / "f.svg", tmp_path / "p.html"
    done = run_cli("--model", str(MODERN), SENTENCE, "--mixing", "norm", "--figure", str(svg), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert report.figure() == svg.read_text()
    assert report.html() == page.read_text()
    assert page_in(report._repr_html_()) == page.read_text()
    assert report.figure("png")[:8] == b"\x89PNG\r\n\x1a\n"
    # Hidden tokens survive the round trip through the dict.
    hidden = modern.explain(SENTENCE, hide_special=True)
    done = run_cli("--model", str(MODERN), SENTENCE, "--hide-special", "--html", str(page))
    assert hidden.html() == page.read_text()


def test_a_causal_report_draws_its_generated_token(tmp_path):
    gpt2 = REPO / "models" / "tiny-gpt2"
    report = bert_explain.Explainer(gpt2).explain("The author talked to", generate=3)
    svg = tmp_path / "f.svg"
    done = run_cli("--model", str(gpt2), "The author talked to", "--generate", "3", "--figure", str(svg), "--figure-token", "1")
    assert done.returncode == 0, done.stderr
    assert report.figure(token=1) == svg.read_text()


def test_show_draws_a_transformers_stack_without_ipython():
    stack = np.full((2, 2, 3, 3), 1 / 3)
    report = bert_explain.show(stack, "a [MASK] c")
    assert report["target"]["index"] == 1
    assert bert_explain.show(stack, ["a", "b", "c"])["target"]["index"] == 0


def test_a_notebook_shows_the_page(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (scripts/setup-python.sh)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (scripts/setup-python.sh)")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import bert_explain, numpy as np\n"
            f"explainer = bert_explain.Explainer({str(MODERN)!r})\n"
            f"explainer.explain({SENTENCE!r}, mixing='norm')"
        ),
        nbformat.v4.new_code_cell(
            "bert_explain.show(np.full((2, 2, 3, 3), 1 / 3), 'a [MASK] c')"
        ),
    ]
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = [cell.outputs for cell in notebook.cells]
    first = [o for o in outputs[0] if o.output_type == "execute_result"][0]
    assert ast.literal_eval(first.data["text/plain"]) == cli_json(
        "--model", str(MODERN), SENTENCE, "--mixing", "norm"
    )
    shown = [o for o in outputs[1] if o.output_type == "display_data"]
    assert len(shown) == 1 and "srcdoc" in shown[0].data["text/html"]
    page = tmp_path / "cell.html"
    page.write_text(page_in(first.data["text/html"]))
    if shutil.which("node") is None or not (REPO / "tests/browser/node_modules/playwright-core").exists():
        pytest.skip("node and playwright-core are not set up (scripts/setup-browser.sh)")
    checked = subprocess.run(
        ["node", str(CHECK), str(page), str(tmp_path / "cell.png")],
        cwd=CHECK.parent, capture_output=True, text=True, timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_long_flow_draws_a_bar_in_the_cell_and_a_quick_one_none():
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (scripts/setup-python.sh)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (scripts/setup-python.sh)")

    class Recording(nbclient.NotebookClient):
        """Keeps each cell's bar updates as the kernel sends them."""

        updates: list = []

        def process_message(self, msg, cell, cell_index):
            if msg["msg_type"] == "update_display_data":
                self.updates.append((cell_index, msg["content"]["data"]["text/html"]))
            return super().process_message(msg, cell, cell_index)

    # A flow from every position on peaked random rows (a few seconds at n = 72, as in
    # test_progress.py: n = 56 took 1.15 s on an idle machine here, under what the test needs),
    # then one position's flow on 3 layers (milliseconds).
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import time, numpy as np, bert_explain\n"
            "rng = np.random.default_rng(128)\n"
            "logits = rng.normal(0, 4, size=(12, 1, 72, 72))\n"
            "attention = np.exp(logits - logits.max(-1, keepdims=True))\n"
            "attention /= attention.sum(-1, keepdims=True)\n"
            "started = time.monotonic()\n"
            "maps = bert_explain.all_positions(attention)\n"
            "print(f'{time.monotonic() - started:.2f}')"
        ),
        nbformat.v4.new_code_cell("bert_explain.attention_flow(attention[:3], target=2).shape"),
    ]
    client = Recording(notebook, timeout=300, kernel_name="python3")
    client.execute()
    long, quick = (cell.outputs for cell in notebook.cells)
    seconds = float([o for o in long if o.output_type == "stream"][0].text)
    assert seconds > 1.2, seconds  # else the flow is too quick for the bar to move
    bars = [o.data["text/html"] for o in long if o.output_type == "display_data"]
    total = 12 * 72
    assert bars == [f'<progress value="{total}" max="{total}" style="width: 24em"></progress> {total}/{total} flows']
    # Drawn while the flow ran: counts going up before the last.
    counts = [int(re.search(r'value="(\d+)"', html).group(1)) for cell, html in client.updates if cell == 0]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[0] < total, counts
    assert [o.output_type for o in quick] == ["execute_result"]
