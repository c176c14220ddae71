"""The bar of a long flow in a Jupyter notebook's cell output.

The native module's waiting thread (``python/src/interrupt.rs``) draws it, once the work has
run for a second, where stderr is not a terminal but a Jupyter kernel runs the code: a
terminal gets the command line's bar on stderr instead. The finished bar stays in the
output with the last count.
"""

from __future__ import annotations

import sys
from typing import Any, Optional


def notebook_bar() -> Optional["_Bar"]:
    """A bar in the running cell's output, or ``None`` outside a Jupyter kernel."""
    # A kernel has imported IPython already; elsewhere importing it would only cost time.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or "IPKernelApp" not in shell.config:
        return None
    from IPython.display import HTML, display

    return _Bar(display, HTML)


class _Bar:
    def __init__(self, display: Any, html: Any) -> None:
        self._display, self._html, self._handle = display, html, None

    def show(self, done: int, total: int) -> None:
        drawn = self._html(_drawn(done, total))
        if self._handle is None:
            self._handle = self._display(drawn, display_id=True)
        else:
            self._handle.update(drawn)


def _drawn(done: int, total: int) -> str:
    return (
        f'<progress value="{done}" max="{total}" style="width: 24em"></progress> '
        f"{done}/{total} flows"
    )
