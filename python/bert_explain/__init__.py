"""bert-explain from Python: which input tokens a transformer's prediction rests on.

The Rust library does all the work (the same code as the ``bert-explain`` command line);
this package hands it NumPy arrays and texts and returns NumPy arrays and the command line's
JSON reports as dicts. Computations release the GIL. A flow that runs for more than a second
shows the command line's progress bar on stderr, where stderr is a terminal (in a Jupyter
notebook, a bar in the cell's output), and Ctrl-C stops it with ``KeyboardInterrupt`` (a
batch of texts or lines, at the flow or text under way).

On attention you already have (``[layers, heads, n, n]`` or ``[layers, n, n]`` softmax
probabilities, as ``--attention`` takes them; a NumPy array, anything with ``__array__``
such as a CPU torch tensor, or transformers' ``output_attentions`` tuple as it is):

- :func:`raw_attention`, :func:`attention_rollout`, :func:`attention_flow`: one map,
  ``[layers, n]``, for one target position;
- :func:`all_positions`: rollout, flow and raw attention from every position, each
  ``[layers, n, n]``;
- :func:`explain_attention`: the whole report of ``bert-explain --attention FILE --json``,
  with ``figure=`` and ``html=`` outputs.

On a checkpoint: :class:`Explainer` loads it once; ``.explain(text)`` returns the report of
``bert-explain --model M "text" --json`` (for a causal model, the text is the prompt),
``.explain_batch(texts)`` one per text, and ``.batch_records(lines)`` batch mode's
(``--input``) output lines.

Errors raise :class:`UsageError` (a ``ValueError``) where the command line exits with
status 2, :class:`ExplainError` (a ``RuntimeError``) where it exits with 1, with the
command line's message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import ExplainError, UsageError
from .cli import main

__all__ = [
    "AllPositions",
    "ExplainError",
    "Explainer",
    "Report",
    "Summary",
    "UsageError",
    "all_positions",
    "attention_flow",
    "attention_rollout",
    "evaluation_summary",
    "explain_attention",
    "main",
    "raw_attention",
    "show",
]

PathLike = Union[str, "os.PathLike[str]"]


class Report(dict):
    """A report: the dict of the JSON report (SPEC §4; a causal model's for a prompt), which a
    notebook shows as the interactive page ``--html`` writes, in a frame of its own (no
    network, no external JavaScript). ``.figure()`` is the ``--figure`` SVG."""

    def figure(self, format: str = "svg", token: Optional[int] = None) -> Union[str, bytes]:
        """The figure as ``--figure`` draws it: SVG text, or PNG bytes with
        ``format="png"``; for a causal report, of generated token ``token`` (default the
        last)."""
        data = _native.render(json.dumps(self), format, token)
        return data if format == "png" else data.decode("utf-8")

    def html(self, token: Optional[int] = None) -> str:
        """The self-contained page ``--html`` writes."""
        return _native.render(json.dumps(self), "html", token).decode("utf-8")

    def _repr_html_(self) -> str:
        from html import escape

        page = escape(self.html(), quote=True)
        return (
            f'<iframe srcdoc="{page}" sandbox="allow-scripts" title="bert-explain report" '
            'style="width: 100%; height: 760px; border: 0"></iframe>'
        )


def show(attentions: Any, tokens: Optional[Union[str, Sequence[str]]] = None, **options: Any):
    """Shows a transformers model's attentions (``output_attentions``, or any stack
    :func:`explain_attention` takes) as the interactive page, for ``tokens``: in a notebook
    the page is displayed and nothing is returned; elsewhere the :class:`Report` is. The
    keywords are :func:`explain_attention`'s (``target``, ``residual``, ...); without
    ``target``, the one ``[MASK]`` among the tokens, else position 0 (``[CLS]``, what a
    classifier reads)."""
    words = tokens.split() if isinstance(tokens, str) else list(tokens or [])
    if options.get("target") is None and words.count("[MASK]") != 1:
        options["target"] = 0
    report = explain_attention(attentions, tokens, **options)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return report
    if get_ipython() is None:
        return report
    display(report)
    return None


def _to_numpy(value: Any) -> Tuple[np.ndarray, str]:
    """An array-like as a NumPy array, and the name of the type its values were stored in."""
    if str(getattr(value, "dtype", "")) == "torch.bfloat16":
        # NumPy has no bfloat16: widen, but check the rows with bfloat16's rounding.
        return np.asarray(value.float()), "bfloat16"
    array = np.asarray(value)
    return array, array.dtype.name


def _attention(attention: Any) -> Tuple[bytes, list, str]:
    """The stack as the native module takes it: f64 bytes, the shape, the stored type.

    A tuple or list is one array per layer (transformers' ``output_attentions``); a batch
    dimension of 1 (``[layers, 1, heads, n, n]``) is dropped.
    """
    if isinstance(attention, (tuple, list)):
        layers = [_to_numpy(layer) for layer in attention]
        if not layers:
            raise ExplainError(
                "the attention stack is not usable: it has no layers; pass one array per layer"
            )
        array = np.stack([layer for layer, _ in layers])
        precision = layers[0][1]
    else:
        array, precision = _to_numpy(attention)
    if array.ndim == 5 and array.shape[1] == 1:
        array = array[:, 0]
    if array.dtype.kind != "f":
        return b"", list(array.shape), precision
    data = np.ascontiguousarray(array, dtype=np.float64)
    return data.tobytes(), list(data.shape), precision


def _image(image: Union[PathLike, bytes]) -> Union[str, bytes]:
    """An image as the native module takes it: its bytes, or its path as text."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    return os.fspath(image)


def _given(**options: Any) -> dict:
    """The options the caller gave (not None, not False), in the native module's spelling."""
    given = {}
    for key, value in options.items():
        if value is None or value is False:
            continue
        if key in ("candidates", "tokens") and isinstance(value, str):
            value = value.split("," if key == "candidates" else None)
        elif key == "mixing" and not isinstance(value, str):
            value = ",".join(value)
        elif key == "figure":
            value = [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [
                os.fspath(v) for v in value
            ]
        elif key == "html":
            value = os.fspath(value)
        elif key == "label":  # a name or an id, as the command line reads it
            value = str(value)
        elif key == "tokens":
            value = list(value)
        given[key] = value
    return given


def _maps(attention: Any, which: str, target: Optional[int], **options: Any) -> np.ndarray:
    data, shape, precision = _attention(attention)
    values, out_shape = _native.attention_maps(
        data, shape, precision, which, target, _given(**options)
    )
    return np.frombuffer(values, dtype=np.float64).reshape(out_shape).copy()


def raw_attention(attention: Any, target: int, fusion: str = "mean") -> np.ndarray:
    """Raw attention of ``target``: ``raw[l][j] = Ā_l[target][j]``, shape ``[layers, n]``.

    ``attention``: ``[layers, heads, n, n]`` or ``[layers, n, n]`` softmax probabilities
    (checked: finite, non-negative, rows summing to 1). ``fusion``: how heads are fused,
    ``mean`` (the paper's), ``max`` or ``min``.
    """
    return _maps(attention, "raw", target, fusion=fusion)


def attention_rollout(
    attention: Any, target: int, residual: float = 0.5, fusion: str = "mean"
) -> np.ndarray:
    """Attention rollout of ``target``, shape ``[layers, n]`` (row 0 is layer 1).

    ``R_1 = Â_1``, ``R_l = Â_l · R_(l-1)`` with ``Â_l = (1 - residual)·Ā_l + residual·I``
    (Abnar & Zuidema 2020). Same input and checks as ``bert-explain --attention``.
    """
    return _maps(attention, "rollout", target, residual=residual, fusion=fusion)


def attention_flow(
    attention: Any, target: int, residual: float = 0.5, fusion: str = "mean"
) -> np.ndarray:
    """Attention flow of ``target``, shape ``[layers, n]``: the maximum flow from
    ``(l, target)`` to each input token through the layers' ``Â`` as capacities, normalised
    per layer (exact, in f64; equal to networkx's ``edmonds_karp``).
    """
    return _maps(attention, "flow", target, residual=residual, fusion=fusion)


class AllPositions(NamedTuple):
    """Rollout, flow and raw attention from every position: ``[l][i][j]`` is input token
    j's relevance for position i at layer l + 1; each ``[layers, n, n]``."""

    rollout: np.ndarray
    flow: np.ndarray
    raw: np.ndarray


def all_positions(attention: Any, residual: float = 0.5, fusion: str = "mean") -> AllPositions:
    """Rollout, flow and raw attention from every position (``--all-positions``, the
    reference's ``compute_flows``)."""
    maps = _maps(attention, "all_positions", None, residual=residual, fusion=fusion)
    return AllPositions(rollout=maps[0], flow=maps[1], raw=maps[2])


def explain_attention(
    attention: Any,
    tokens: Optional[Union[str, Sequence[str]]] = None,
    target: Optional[int] = None,
    *,
    residual: Optional[float] = None,
    fusion: Optional[str] = None,
    all_positions: bool = False,
    flow: bool = False,
    no_flow: bool = False,
    hide_special: bool = False,
    figure: Optional[Union[PathLike, Sequence[PathLike]]] = None,
    html: Optional[PathLike] = None,
    name: str = "array",
) -> Report:
    """The report of ``bert-explain --attention FILE --json`` (SPEC §4), as a dict.

    ``tokens`` label the positions (a list, or one string separated by spaces; default the
    positions' numbers); ``target`` defaults to the one ``[MASK]`` among them. ``figure``
    (``.svg``/``.png``, one path or several) and ``html`` are written as ``--figure`` and
    ``--html`` write them. ``name`` is the report's ``model``. Past 1,024 tokens flow is
    left out unless ``flow=True``; ``no_flow=True`` leaves it out at any length.
    """
    data, shape, precision = _attention(attention)
    options = _given(
        tokens=tokens,
        target=target,
        residual=residual,
        fusion=fusion,
        all_positions=all_positions,
        flow=flow,
        no_flow=no_flow,
        hide_special=hide_special,
        figure=figure,
        html=html,
    )
    return Report(json.loads(_native.explain_attention(data, shape, precision, name, options)))


class Summary(NamedTuple):
    """Batch mode's ``--evaluate`` summary: the table's text (empty without evaluations),
    how many lines there were and how many failed."""

    text: str
    lines: int
    failed: int


def evaluation_summary(records: Iterable[str]) -> Summary:
    """The summary table batch mode prints with ``--evaluate``, over its output lines
    (reports and ``{"line", "error"}`` records, as JSON text)."""
    return Summary(*_native.evaluation_summary(list(records)))


class Explainer:
    """A checkpoint loaded once, explaining any number of texts.

    ``model`` is a checkpoint folder or a Hugging Face Hub id (as ``--model``); ``device``
    is ``cpu`` (default), ``auto``, ``cuda`` or ``metal``. Masked-LM, classifier and
    encoder checkpoints of every family the command line supports (decoder classifiers
    too), and causal language models (GPT-2, Llama, Qwen, Mistral, Gemma, Phi-3: ``task`` is
    ``causal-lm``), whose text is a prompt to continue: ``.explain(prompt, generate=5, flow=True)`` returns the report of
    ``bert-explain --model M PROMPT --generate 5 --flow --json``.
    """

    def __init__(self, model: PathLike, device: str = "cpu", revision: str = "main") -> None:
        self._native = _native.Explainer(os.fspath(model), device, revision)

    @property
    def model(self) -> str:
        """The model as the reports name it."""
        return self._native.model

    @property
    def task(self) -> str:
        """``masked-lm``, ``sequence-classification``, ``replaced-token-detection``,
        ``encoder`` or ``causal-lm``."""
        return self._native.task

    @property
    def family(self) -> str:
        """The model family: ``bert``, ``roberta``, ``xlm-roberta``, ``distilbert``, ...,
        ``gpt2``, ``llama``, ..."""
        return self._native.family

    def __repr__(self) -> str:
        return f"Explainer({self.model!r}: {self.family} {self.task})"

    def explain(
        self,
        text: str,
        *,
        target: Optional[int] = None,
        pair: Optional[str] = None,
        pretokenized: bool = False,
        candidates: Optional[Union[str, Sequence[str]]] = None,
        top_k: Optional[int] = None,
        all_positions: bool = False,
        no_flow: bool = False,
        mixing: Optional[Union[str, Sequence[str]]] = None,
        fusion: Optional[str] = None,
        residual: Optional[float] = None,
        evaluate: bool = False,
        lrp: bool = False,
        importance_word: Optional[str] = None,
        label: Optional[Union[str, int]] = None,
        blank: Optional[str] = None,
        correlate_without_specials: bool = False,
        ig_steps: Optional[int] = None,
        hide_special: bool = False,
        figure: Optional[Union[PathLike, Sequence[PathLike]]] = None,
        html: Optional[PathLike] = None,
        generate: Optional[int] = None,
        sample: bool = False,
        seed: Optional[int] = None,
        temperature: Optional[float] = None,
        top_prompt: Optional[int] = None,
        correction: bool = False,
        flow: bool = False,
        skip_common: bool = False,
        figure_token: Optional[int] = None,
    ) -> Report:
        """The report of ``bert-explain --model M TEXT --json`` (SPEC §4) as a dict; for a
        causal model, TEXT is the prompt and the report is the causal one.

        Each keyword is the command-line option of the same name (``top_k`` is
        ``--top-k``) with its default; options the model's task does not use are refused
        as the command line refuses them (``generate`` to ``figure_token`` are a causal
        model's, ``target`` to ``hide_special`` an encoder's). ``figure`` and ``html`` write
        the figure and the page as ``--figure`` and ``--html`` do. ``flow=True`` computes
        flow at any length (an encoder leaves it out past 1,024 tokens unless asked; a causal
        model computes it only when asked); ``no_flow=True`` leaves an encoder's out at any
        length. ``lrp=True`` scores each token by AttnLRP and CP-LRP alone (``evaluate=True``
        includes them). ``evaluate``, ``lrp``, ``blank`` and ``ig_steps`` apply to a causal
        model too: each generated token is scored over the tokens fed at its step.
        """
        options = _given(
            target=target,
            pair=pair,
            pretokenized=pretokenized,
            candidates=candidates,
            top_k=top_k,
            all_positions=all_positions,
            no_flow=no_flow,
            mixing=mixing,
            fusion=fusion,
            residual=residual,
            evaluate=evaluate,
            lrp=lrp,
            importance_word=importance_word,
            label=label,
            blank=blank,
            correlate_without_specials=correlate_without_specials,
            ig_steps=ig_steps,
            hide_special=hide_special,
            figure=figure,
            html=html,
            generate=generate,
            sample=sample,
            seed=seed,
            temperature=temperature,
            top_prompt=top_prompt,
            correction=correction,
            flow=flow,
            skip_common=skip_common,
            figure_token=figure_token,
        )
        return Report(json.loads(self._native.explain([text], options)[0]))

    def explain_image(
        self,
        image: Union[PathLike, bytes],
        *,
        target: Optional[int] = None,
        all_positions: bool = False,
        no_flow: bool = False,
        mixing: Optional[Union[str, Sequence[str]]] = None,
        fusion: Optional[str] = None,
        residual: Optional[float] = None,
        discard_ratio: Optional[float] = None,
        evaluate: bool = False,
        lrp: bool = False,
        label: Optional[Union[str, int]] = None,
        correlate_without_specials: bool = False,
        ig_steps: Optional[int] = None,
        hide_special: bool = False,
        figure: Optional[Union[PathLike, Sequence[PathLike]]] = None,
        html: Optional[PathLike] = None,
    ) -> Report:
        """The report of ``bert-explain --model M IMAGE --json`` for a model that reads images
        (ViT, DeiT, DINOv2; SPEC §10), ``image`` a file's path or its bytes (PNG, JPEG, WebP,
        GIF), with the keywords of :meth:`explain` that apply to an image and
        ``discard_ratio`` (``--discard-ratio``)."""
        options = _given(
            target=target,
            all_positions=all_positions,
            no_flow=no_flow,
            mixing=mixing,
            fusion=fusion,
            residual=residual,
            discard_ratio=discard_ratio,
            evaluate=evaluate,
            lrp=lrp,
            label=label,
            correlate_without_specials=correlate_without_specials,
            ig_steps=ig_steps,
            hide_special=hide_special,
            figure=figure,
            html=html,
        )
        return Report(json.loads(self._native.explain_images([_image(image)], options)[0]))

    def explain_images(self, images: Iterable[Union[PathLike, bytes]], **options: Any) -> list:
        """One report per image (a path or a file's bytes), with the options of
        :meth:`explain_image` applied to each (``figure`` and ``html`` only with one image);
        the first image that fails raises. Images of one size share forward passes,
        ``batch_size`` (default 8) at a time."""
        given = [_image(image) for image in images]
        reports = self._native.explain_images(given, _given(**options))
        return [Report(json.loads(report)) for report in reports]

    def explain_batch(self, texts: Iterable[str], **options: Any) -> list:
        """One report per text, with the options of :meth:`explain` applied to each
        (``figure`` and ``html`` only with one text); the first text that fails raises. The
        texts of near lengths share forward passes, ``batch_size`` (default 8) at a time, as
        batch mode's do. The GIL stays released for the whole batch; Ctrl-C stops it within
        the texts under way."""
        reports = self._native.explain(list(texts), _given(**options))
        return [Report(json.loads(report)) for report in reports]

    def batch_records(
        self, lines: Iterable[Tuple[int, str]], **options: Any
    ) -> list:
        """Batch mode's output line (JSON text) for each ``(line number, line)`` of a
        JSON-lines file: the report, or ``{"line": N, "error": ...}`` for a line that cannot
        be explained; ``None`` for a blank line, which batch mode skips. Options as
        ``--input`` takes them (those of :meth:`explain` but the outputs); each line's own
        fields (``target``, ``candidates``, ``pair``, ``label``; a causal model's
        ``generate`` and ``seed``) win over them. Ctrl-C stops it within the line under way
        (no bar is drawn: batch mode's counts lines)."""
        return self._native.batch_records(list(lines), _given(**options))
