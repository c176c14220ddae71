"""The ``bert-explain`` command line, as the package's console script.

It is the Rust command line itself (``bert_explain::cli::main``), run in this process with
the same options, output and exit statuses (SPEC §3) as the ``bert-explain`` binary.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from . import _native


def main(args: Optional[Sequence[str]] = None) -> int:
    """Runs ``bert-explain`` on ``args`` (default: this process's arguments) and returns its
    exit status: 0 on success, 2 for a mistake in the command line or its input, 1 for
    anything else, 130 when interrupted (the process exits then).

    It installs the command line's interrupt handler (which removes partial outputs and
    exits), so call it from a process that is the command, not from a notebook.
    """
    argv = list(sys.argv) if args is None else ["bert-explain", *args]
    return _native.cli_main(argv)
