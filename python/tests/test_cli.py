"""The package's `bert-explain` console script is the command line: same output, same exit
statuses (SPEC §3) as the binary cargo builds."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import MODERN, SENTENCE, run_cli

SCRIPT = Path(sys.prefix) / "bin" / "bert-explain"


def test_the_console_script_is_installed():
    assert SCRIPT.exists(), f"{SCRIPT}: install the package (scripts/setup-python.sh)"
    assert shutil.which("bert-explain", path=str(SCRIPT.parent)) == str(SCRIPT)


@pytest.mark.parametrize(
    "args,status",
    [
        (["--model", str(MODERN), SENTENCE, "--json"], 0),
        (["--model", str(MODERN), SENTENCE, "--layers", "--color", "always"], 0),
        (["--model", str(MODERN), "no mask here"], 2),
        (["--model", str(MODERN), SENTENCE, "--no-such-flag"], 2),
        (["--model", str(MODERN), SENTENCE, "--generate", "3"], 2),
        (["--model", "/no/such/folder", SENTENCE], 1),
        (["--help"], 0),
        (["--version"], 0),
        ([], 2),
    ],
)
def test_same_output_and_exit_status_as_the_binary(args, status):
    binary = run_cli(*args)
    script = run_cli(*args, program=str(SCRIPT))
    assert binary.returncode == status, binary.stderr
    assert (script.returncode, script.stdout, script.stderr) == (
        binary.returncode,
        binary.stdout,
        binary.stderr,
    )


def test_batch_mode_through_the_script(tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"text": "The [MASK] is here"}\nbad\n')
    outputs = []
    for program in (None, str(SCRIPT)):
        out = tmp_path / "out.jsonl"
        done = run_cli("--model", str(MODERN), "--input", str(lines), "--output", str(out), program=program)
        assert done.returncode == 0, done.stderr
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and outputs[0].count("\n") == 2


def test_python_dash_m(tmp_path):
    done = run_cli("-m", "bert_explain", "--model", str(MODERN), SENTENCE, "--json", program=sys.executable)
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_cli("--model", str(MODERN), SENTENCE, "--json").stdout
