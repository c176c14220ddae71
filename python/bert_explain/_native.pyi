"""Type stubs of the native module (python/src, PyO3 over the bert-explain library).

Use the package's functions (bert_explain/__init__.py), which convert arrays and reports;
these take arrays as f64 bytes with their shape and return reports as JSON text.
"""

from typing import Optional, Union

class UsageError(ValueError):
    """A mistake in the input: where the command line exits with status 2."""

class ExplainError(RuntimeError):
    """Anything else: where the command line exits with status 1."""

def cli_main(argv: list[str]) -> int:
    """Runs the command line on argv (program name first); returns the exit status."""

def attention_maps(
    data: bytes,
    shape: list[int],
    precision: str,
    which: str,
    target: Optional[int] = None,
    options: Optional[dict] = None,
) -> tuple[bytes, list[int]]:
    """raw, rollout or flow ([L, n]) for target, or all_positions ([3, L, n, n]: rollout, flow, raw)."""

def explain_attention(
    data: bytes,
    shape: list[int],
    precision: str,
    name: str,
    options: Optional[dict] = None,
) -> str:
    """The JSON report of `--attention FILE --json`."""

def evaluation_summary(records: list[str]) -> tuple[str, int, int]:
    """Batch mode's summary table, the number of lines and of failed lines."""

class Explainer:
    def __init__(self, model: str, device: str = "cpu", revision: str = "main") -> None: ...
    @property
    def model(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def family(self) -> str: ...
    def explain(self, texts: list[str], options: Optional[dict] = None) -> list[str]:
        """The JSON report of each text."""
    def explain_images(
        self, images: list[Union[str, bytes]], options: Optional[dict] = None
    ) -> list[str]:
        """The JSON report of each image (a path or a file's bytes)."""
    def batch_records(
        self, lines: list[tuple[int, str]], options: Optional[dict] = None
    ) -> list[Optional[str]]:
        """Batch mode's output line for each (line number, line); None for blank lines."""
