"""A long flow from Python shows the command line's progress bar on stderr where stderr is a
terminal (after a second, as `bert-explain` draws it), writes nothing where it is not, and
stops on Ctrl-C (SIGINT) with KeyboardInterrupt instead of running to its end; so do long
batches of texts or lines, and the console script exits as the binary does."""

from __future__ import annotations

import os
from pathlib import Path
import pty
import signal
import subprocess
import sys
import time

import pytest

from conftest import MODERN

# A flow from every position on peaked random attention (softmax of N(0, 4²) logits, 12
# layers, n = 72) takes a few seconds (5.0 s here on 2026-12-06 beside a build, where n = 56
# took 2.1 s; idle machines ran n = 56 in 1.1 s): long enough for the bar, which waits a second.
STACK = """
import sys, time
import numpy as np
import bert_explain

rng = np.random.default_rng(128)
logits = rng.normal(0, 4, size=(12, 1, 72, 72))
attention = np.exp(logits - logits.max(-1, keepdims=True))
attention /= attention.sum(-1, keepdims=True)
"""

BOTH_CALLS = STACK + """
for call in (
    lambda: bert_explain.all_positions(attention),
    lambda: bert_explain.explain_attention(attention, target=0, all_positions=True),
):
    started = time.monotonic()
    call()
    print(f"{time.monotonic() - started:.2f}", flush=True)
    sys.stderr.write("call done\\n")
    sys.stderr.flush()
"""

# The whole of CALL once, then again until the parent's SIGINT.
INTERRUPTED = """
started = time.monotonic()
CALL
print(f"whole {time.monotonic() - started:.2f}", flush=True)
print("again", flush=True)
started = time.monotonic()
try:
    CALL
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - started:.2f}", flush=True)
"""

# Batches of a tiny model's texts and lines: no flow in them, about 0.6 ms each here (grouped
# forward passes).
EXPLAINER = f"""
import sys, time
import bert_explain

explainer = bert_explain.Explainer({str(MODERN)!r})
sentence = "The author talked to Sara about [MASK] book"
lines = [(k + 1, '{{"text": "' + sentence + '"}}') for k in range(6000)]
"""


def run_child(stderr_is_terminal: bool) -> tuple[list[float], str]:
    """BOTH_CALLS' seconds per call, and what it wrote on stderr."""
    command = [sys.executable, "-c", BOTH_CALLS]
    if not stderr_is_terminal:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        return [float(s) for s in done.stdout.split()], done.stderr
    main, side = pty.openpty()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=side, text=True)
    os.close(side)
    written = b""
    while True:  # read as it comes, so that the bar's redraws never fill the terminal
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed its side
            break
        if not chunk:
            break
        written += chunk
    os.close(main)
    stdout, _ = child.communicate(timeout=600)
    assert child.returncode == 0, written.decode(errors="replace")
    return [float(s) for s in stdout.split()], written.decode(errors="replace")


def test_a_long_flow_shows_the_bar_in_a_terminal():
    seconds, stderr = run_child(stderr_is_terminal=True)
    # Otherwise this stack is too quick to show the bar here, and the test needs a larger one.
    assert min(seconds) > 1.2, seconds
    first, second, rest = stderr.split("call done")
    for call in (first, second):
        assert "flows" in call and "left" in call, stderr
    assert rest.strip() == ""


def test_no_bar_where_stderr_is_not_a_terminal():
    seconds, stderr = run_child(stderr_is_terminal=False)
    assert min(seconds) > 1.2, seconds
    assert stderr == "call done\ncall done\n"


@pytest.mark.parametrize(
    "setup,call",
    [
        (STACK, "bert_explain.all_positions(attention)"),
        (EXPLAINER, "explainer.batch_records(lines)"),
        (EXPLAINER, "explainer.explain_batch([sentence] * 6000)"),
    ],
    ids=["flow", "batch_records", "explain_batch"],
)
def test_ctrl_c_stops_a_long_call(setup, call):
    script = setup + INTERRUPTED.replace("CALL", call)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    whole = float(child.stdout.readline().split()[1])
    assert whole > 1.2, whole  # else the call is too quick for this test
    assert child.stdout.readline().strip() == "again"
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    stdout, stderr = child.communicate(timeout=600)
    waited = time.monotonic() - sent
    assert child.returncode == 0, stderr
    word, seconds = stdout.split()
    assert word == "interrupted", stdout
    # Stopped within the sinks, text or line under way, not at the call's end.
    assert float(seconds) < whole / 2, (seconds, whole)
    assert waited < whole / 2, (waited, whole)


def test_ctrl_c_stops_the_console_script_as_it_stops_the_binary(tmp_path: Path):
    # A flow from every position (a few seconds) with a figure and a page: on SIGINT the
    # console script exits 130 and leaves no partial output, as tests/safety.rs has the
    # binary do.
    save = STACK + f"np.save({str(tmp_path / 'att.npy')!r}, attention)"
    subprocess.run([sys.executable, "-c", save], check=True)
    script = Path(sys.prefix) / "bin" / "bert-explain"
    args = ["--attention", "att.npy", "--target", "0", "--all-positions"]
    args += ["--figure", "fig.svg", "--html", "page.html"]
    started = time.monotonic()
    subprocess.run([str(script), *args], cwd=tmp_path, capture_output=True, check=True, timeout=600)
    whole = time.monotonic() - started
    assert whole > 1.2, whole  # else the flow is too quick for this test
    for name in ("fig.svg", "page.html"):
        (tmp_path / name).unlink()
    child = subprocess.Popen(
        [str(script), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(whole / 2)
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=600)
    assert child.returncode == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["att.npy"]
