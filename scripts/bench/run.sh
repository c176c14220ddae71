#!/usr/bin/env bash
# Benchmarks attention flow against the Python references on the same saved attention and
# prints markdown tables (see scripts/bench/RESULTS.md). Needs the reference venv
# (scripts/reference/setup.sh) and, for the end-to-end row, models/downloaded/all-MiniLM-L6-v2
# (scripts/fetch-minilm.sh). Slow: networkx alone takes minutes at n = 32.
#   scripts/bench/run.sh [--sizes 16,32,64,128,512] [--skip-e2e]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="$repo/.venv-reference/bin/python"
sizes="16,32,64,128,512"
e2e=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) sizes="$2"; shift 2 ;;
        --skip-e2e) e2e=0; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
"$repo/scripts/reference/setup.sh"
(cd "$repo" && cargo build --release --quiet --bin bert-explain --example flow_timing)
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "### Flow from one position through 12 layers (L = 12, H = 12)"
echo
"$python" "$here/bench.py" --binary "$bin/bert-explain" --dir "$work" --sizes "$sizes"
echo
echo "### Flow step alone, in process (examples/flow_timing.rs; one position vs --all-positions)"
echo
echo '```'
"$bin/examples/flow_timing" 16 32 64 --all-positions
"$bin/examples/flow_timing" 128
"$bin/examples/flow_timing" 512
echo '```'
peak_kib=$(/usr/bin/time -f %M "$bin/bert-explain" --attention "$work/attention-L12-H12-n512.npy" --target 256 --json 2>&1 >/dev/null | tail -1) || true
echo
echo "bert-explain at n = 512, peak RSS (/usr/bin/time): ${peak_kib:-?} KiB"

if [[ $e2e == 1 ]]; then
    model="$repo/models/downloaded/all-MiniLM-L6-v2"
    if [[ ! -f "$model/config.json" ]]; then
        echo "end to end skipped: $model is missing (scripts/fetch-minilm.sh)" >&2
        exit 0
    fi
    text="the author talked to sara about his book and then she went home to read it"
    target=8
    echo
    echo "### End to end on MiniLM (whole process, \"$text\", target $target)"
    echo
    t0=$(date +%s.%N)
    "$python" "$repo/scripts/reference/reference.py" --model "$model" --text "$text" --target $target --out "$work/ref.json" 2>/dev/null
    t1=$(date +%s.%N)
    "$bin/bert-explain" --model "$model" --target $target --json "$text" > "$work/ours.json"
    t2=$(date +%s.%N)
    "$python" - "$t0" "$t1" "$t2" "$work/ref.json" "$work/ours.json" <<'PY'
import json, sys
t0, t1, t2 = map(float, sys.argv[1:4])
ref, ours = (json.load(open(p)) for p in sys.argv[4:6])
diff = max(abs(a - b) for ra, rb in zip(ref["relevance"]["flow"], ours["relevance"]["flow"]) for a, b in zip(ra, rb))
n = len(ours["tokens"])
print("| pipeline | wall (s) | ratio |\n|---|---|---|")
print(f"| Python: transformers + networkx reference ({n} tokens) | {t1 - t0:.2f} | 1× |")
print(f"| bert-explain --model … --json | {t2 - t1:.3f} | {(t1 - t0) / (t2 - t1):,.0f}× faster |")
print(f"\nmax |flow difference| = {diff:.1e}")
PY
fi
