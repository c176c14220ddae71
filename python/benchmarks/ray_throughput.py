"""Throughput of the Ray Data pipeline against batch mode on one machine, same lines, same
model, same build: `python python/benchmarks/ray_throughput.py MODEL DATA [LIMIT] [OPTIONS]`, with
OPTIONS batch options as JSON (`'{"evaluate": true}'`).

Runs `bert-explain --input` (the binary in target/debug, or BERT_EXPLAIN_BIN), then the
pipeline on a local Ray cluster with 1 actor and with one actor per core (each actor one
thread, batch mode all cores; Ray is given one logical CPU more than the cores, for its light
reading stage); checks that every output equals batch mode's; prints a
Markdown table. Times are wall-clock from start to the last line written (Ray's include
its cluster start and the model load in each actor; batch mode's its process and load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    model, data = sys.argv[1], Path(sys.argv[2])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    flags = []
    for key, value in options.items():
        flags.append("--" + key.replace("_", "-"))
        if value is not True:
            flags.append(",".join(value) if isinstance(value, list) else str(value))
    binary = os.environ.get("BERT_EXPLAIN_BIN", str(REPO / "target" / "debug" / "bert-explain"))
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lines = data.read_text().splitlines()[:limit]
        source = tmp / "input.jsonl"
        source.write_text("\n".join(lines) + "\n")
        batch_out = tmp / "batch.jsonl"
        start = time.perf_counter()
        subprocess.run(
            [binary, "--model", model, "--input", str(source), "--output", str(batch_out), *flags],
            check=True, capture_output=True,
        )
        batch_seconds = time.perf_counter() - start
        want = [json.loads(line) for line in batch_out.read_text().splitlines()]
        rows = [("batch mode (`--input`, one process, all cores)", batch_seconds)]

        import ray
        from bert_explain import ray_pipeline

        for actors in sorted({1, cores}):
            start = time.perf_counter()
            # One logical CPU more than the cores: the pipeline reads and splits the input
            # on a CPU the actors do not hold (light work beside theirs).
            ray.init(num_cpus=cores + 1, include_dashboard=False, log_to_driver=False)
            out = tmp / f"ray-{actors}.jsonl"
            ray_pipeline.run(str(source), str(out), model, options=options, actors=actors, threads=1)
            seconds = time.perf_counter() - start
            ray.shutdown()
            got = [json.loads(line) for line in out.read_text().splitlines()]
            assert got == want, f"{actors} actors: the output differs from batch mode's"
            rows.append((f"Ray Data, {actors} actor(s) × 1 thread", seconds))
        print(f"{len(lines)} lines of {data.name}, {model}, {options}, {cores} cores\n")
        print("| run | time | sentences/s | vs batch mode |")
        print("|---|---|---|---|")
        for name, seconds in rows:
            print(
                f"| {name} | {seconds:.2f} s | {len(lines) / seconds:.1f} | "
                f"{batch_seconds / seconds:.2f}× |"
            )


if __name__ == "__main__":
    main()
