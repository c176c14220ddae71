"""Batch mode at dataset scale on Ray Data: the same reports, from many workers.

Reads a JSON-lines file (batch mode's format) or a Parquet dataset (one row per example,
columns ``text`` and optionally ``target``, ``candidates``, ``pair``, ``label``,
``expected``; for a causal model ``generate`` and ``seed``), explains it with a pool of
actors that each load the model once, and writes batch mode's output lines in input order
and its ``--evaluate`` summary. On the same lines the output equals
``bert-explain --model M --input FILE`` 's, line for line; a causal model's prompts are
continued and explained as batch mode does (``options={"generate": 5, "flow": True}``).

As a program::

    python -m bert_explain.ray_pipeline --model DIR --input data.jsonl --output out.jsonl \\
        [--summary summary.txt] [--actors N] [--threads T] [--address ADDRESS] [--evaluate ...]

On a real cluster, start it where ``ray.init`` reaches the cluster (``--address`` or
``RAY_ADDRESS``, e.g. ``ray://head:10001``), with this package and the model folder present
on every worker (or the model a Hub id each worker can download), and the input on storage
every worker reads (a shared file system, or ``s3://`` paths, which Ray Data reads).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from . import Explainer, Summary, _given, evaluation_summary


class ExplainActor:
    """One worker: loads the model once, then turns batches of numbered lines into batch
    mode's records (``None`` for blank lines)."""

    def __init__(self, model: str, options: Dict[str, Any], threads: int) -> None:
        # The Rust side's thread pools size themselves from this on first use.
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        self.explainer = Explainer(model)
        self.options = options

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, List[Any]]:
        lines = [(int(n), raw) for n, raw in zip(batch["line"], batch["raw"])]
        records = self.explainer.batch_records(lines, **self.options)
        return {"line": [n for n, _ in lines], "record": records, "worker": [os.getpid()] * len(lines)}


def _split_lines(row: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A JSON-lines file's bytes → its lines, numbered from 1 as batch mode numbers them."""
    data: bytes = row["bytes"]
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return [{"line": n, "raw": raw} for n, raw in enumerate(parts, start=1)]


def _row_to_line(row: Dict[str, Any]) -> Dict[str, Any]:
    """A Parquet row → the JSON line batch mode would read (missing values left out)."""
    fields = {}
    for key, value in row.items():
        if key == "line" or value is None:
            continue
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and key == "target" and value.is_integer():
            value = int(value)
        fields[key] = value
    return {"line": row["line"], "raw": json.dumps(fields, ensure_ascii=False)}


class _Numbering:
    """Numbers rows from 1 in the order they come (one instance, order preserved)."""

    def __init__(self) -> None:
        self.next = 1

    def __call__(self, table):
        import pyarrow as pa

        numbers = pa.array(range(self.next, self.next + table.num_rows), type=pa.int64())
        self.next += table.num_rows
        return table.append_column("line", numbers)


def read_dataset(path: str, rows_per_block: int = 8):
    """The examples as rows ``{"line": N, "raw": the JSON line}``, in input order, in
    blocks of ``rows_per_block``."""
    import ray

    if path.endswith(".parquet") or os.path.isdir(path):
        ds = ray.data.read_parquet(path)
        ds = ds.map_batches(
            _Numbering,
            compute=ray.data.ActorPoolStrategy(size=1),
            batch_format="pyarrow",
            num_cpus=0,  # light, and it must not wait for a CPU the explaining actors hold
        )
        ds = ds.map(_row_to_line)
    else:
        ds = ray.data.read_binary_files(path).flat_map(_split_lines)
    # A file arrives as one block: split it (streaming, in order) so that every actor gets
    # some.
    return ds.repartition(target_num_rows_per_block=rows_per_block)


class Outcome(NamedTuple):
    """What a run did: batch mode's summary, how many worker processes explained lines, and
    the seconds from reading to the last line written."""

    summary: Summary
    workers: int
    seconds: float


def run(
    input: str,
    output: str,
    model: str,
    *,
    options: Optional[Dict[str, Any]] = None,
    actors: Optional[int] = None,
    threads: int = 1,
    batch_size: int = 8,
    summary: Optional[str] = None,
) -> Outcome:
    """Explains every example of ``input`` with ``actors`` workers of ``threads`` CPUs each
    (one model per worker; default: as many as the cluster's CPUs allow, one left over), writes batch mode's output lines to ``output`` in input order,
    and writes batch mode's summary to ``summary`` if given; returns the summary with how
    many workers took part and the time. ``options`` are
    :meth:`Explainer.batch_records`' keywords (``evaluate=True``, ``mixing="all"``, ...).
    The cluster needs a CPU beyond the actors' for reading and splitting the input. Call
    ``ray.init`` first to choose the cluster; otherwise a local one starts."""
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    if actors is None:
        actors = max(1, int(cpus - 1) // threads)
    if actors * threads >= cpus:
        raise ValueError(
            f"{actors} actors of {threads} CPUs would hold all {cpus:g} CPUs of the cluster and "
            "leave none to read and split the input; use fewer actors or threads"
        )
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    options = _given(**(options or {}))
    if options.get("sample") and options.get("seed") is None:
        # One seed for every actor, as batch mode has one for every line.
        options["seed"] = int.from_bytes(os.urandom(4), "little")
    start = time.perf_counter()
    records = (
        read_dataset(input, rows_per_block=batch_size)
        .map_batches(
            ExplainActor,
            fn_constructor_kwargs={"model": model, "options": options, "threads": threads},
            batch_size=batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=threads,
        )
        .filter(lambda row: row["record"] is not None)
    )
    written: List[str] = []
    workers = set()
    with open(output, "w", encoding="utf-8") as out:
        for row in records.iter_rows():
            out.write(row["record"] + "\n")
            written.append(row["record"])
            workers.add(row["worker"])
    seconds = time.perf_counter() - start
    result = evaluation_summary(written)
    if summary is not None:
        with open(summary, "w", encoding="utf-8") as out:
            out.write(result.text)
            out.write(
                f"{result.lines} sentences ({result.failed} failed) in {seconds:.2f} s: "
                f"{result.lines / max(seconds, 1e-9):.1f} sentences/s\n"
            )
    return Outcome(result, len(workers), seconds)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bert_explain.ray_pipeline",
        description="bert-explain batch mode on Ray Data: one model per worker actor.",
    )
    parser.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    parser.add_argument("--input", required=True, help="a .jsonl file, or a Parquet file or folder")
    parser.add_argument("--output", required=True, help="the reports, one JSON line each")
    parser.add_argument("--summary", help="also write the summary (with --evaluate, the table)")
    parser.add_argument("--address", help="the Ray cluster (default: RAY_ADDRESS, else a local one)")
    parser.add_argument(
        "--actors", type=int, help="worker actors, each with a model (default: as many as fit)"
    )
    parser.add_argument("--threads", type=int, default=1, help="CPUs per actor")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--options", default="{}", help='batch options as JSON, e.g. \'{"top_k": 3}\'')
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--mixing", help="as --mixing: norm,alti,... or all")
    args = parser.parse_args(argv)

    import ray

    options = json.loads(args.options)
    if args.evaluate:
        options["evaluate"] = True
    if args.mixing:
        options["mixing"] = args.mixing
    ray.init(address=args.address)
    outcome = run(
        args.input,
        args.output,
        args.model,
        options=options,
        actors=args.actors,
        threads=args.threads,
        batch_size=args.batch_size,
        summary=args.summary,
    )
    result = outcome.summary
    print(result.text, end="")
    print(
        f"{result.lines} sentences ({result.failed} failed) in {outcome.seconds:.2f} s by "
        f"{outcome.workers} workers: {result.lines / max(outcome.seconds, 1e-9):.1f} sentences/s; "
        f"written to {args.output}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
