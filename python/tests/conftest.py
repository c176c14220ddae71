"""Shared helpers: the repository, and the Rust command line the package must agree with.

The reference command line is the binary cargo builds (target/debug/bert-explain, which
`cargo test` leaves there; built here if it is missing, or BERT_EXPLAIN_BIN), not the
package's console script, so that the package is compared with the real thing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODERN = REPO / "models" / "tiny-bert-modern"
CLASSIFIER = REPO / "models" / "tiny-bert-cls"
SENTENCE = "The author talked to Sara about [MASK] book"


def cli_binary() -> Path:
    given = os.environ.get("BERT_EXPLAIN_BIN")
    if given:
        return Path(given)
    binary = REPO / "target" / "debug" / "bert-explain"
    if not binary.exists():
        subprocess.run(["cargo", "build", "--bin", "bert-explain"], cwd=REPO, check=True)
    return binary


def run_cli(*args: str, program: str | None = None) -> subprocess.CompletedProcess:
    """The command line on `args`, from the repository (relative paths work)."""
    command = [program or str(cli_binary()), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


def cli_json(*args: str) -> dict:
    """`bert-explain ARGS --json`'s report; the run must succeed."""
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cli_error(*args: str) -> tuple[int, str]:
    """The exit status and the message (the `Error: ` line without its prefix) of a failing run."""
    done = run_cli(*args)
    assert done.returncode != 0, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, done.stderr
    return done.returncode, lines[0][len("Error: "):]


@pytest.fixture(scope="session")
def modern():
    import bert_explain

    return bert_explain.Explainer(MODERN)


@pytest.fixture(scope="session")
def classifier():
    import bert_explain

    return bert_explain.Explainer(CLASSIFIER)
