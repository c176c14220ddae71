#!/usr/bin/env bash
# The GPU check, on the lent GPU machine, in one invocation (at most about 8 minutes): unpacks
# the bundle that scripts/check-cuda.sh made (the CUDA and CPU binaries, the Python wheel),
# points the CUDA binary at the CUDA 13 libraries of the machine's torch environment, and
# runs scripts/gpu_check.py: every case on the CPU and on CUDA with their reports compared,
# then the throughput benchmark against torch. Results go to OUT (parity.md, throughput.md,
# their .json, machine.txt, log.txt).
#
# Usage: scripts/gpu-check.sh BUNDLE OUT [--dry-run] [--skip-parity] [--skip-throughput] [--repeat K]
#        [--budget S] (the options are gpu_check.py's)
#   with the device tool: run(command="scripts/gpu-check.sh target/gpu-bundle $OUT",
#                             carry=["target/gpu-bundle"])
# --dry-run: no GPU wanted; the CPU binary plays both parts (checks the script itself).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="${1:?usage: scripts/gpu-check.sh BUNDLE OUT [--dry-run]}"
out="${2:?usage: scripts/gpu-check.sh BUNDLE OUT [--dry-run]}"
shift 2
mkdir -p "$out"
bundle="$(cd "$bundle" && pwd)"
out="$(cd "$out" && pwd)"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
for b in cpu cuda; do
    [[ -f "$bundle/bert-explain-$b.xz" ]] || { echo "gpu-check: no $bundle/bert-explain-$b.xz: run scripts/check-cuda.sh first" >&2; exit 2; }
    xz -dc "$bundle/bert-explain-$b.xz" >"$bin/bert-explain-$b"
    chmod +x "$bin/bert-explain-$b"
done

# The CUDA libraries the binary needs besides the driver (libcublas.so.13, which loads
# libcublasLt.so.13, libcudart.so.13 and libcurand.so.10) come with torch's CUDA 13 wheels.
site="$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null || true)"
if [[ -n "$site" && -d "$site/nvidia/cu13/lib" ]]; then
    export LD_LIBRARY_PATH="$site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
    echo "date: $(date -u +%FT%TZ)"
    cat "$bundle/MANIFEST" 2>/dev/null || true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    python3 -c 'import sys, torch, transformers; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 || true
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "ldd bert-explain-cuda:"
    ldd "$bin/bert-explain-cuda" | grep -E 'cuda|cublas|curand|nvrtc|not found' || true
} | tee "$out/machine.txt" >&2
python3 "$repo/scripts/gpu_check.py" --cpu "$bin/bert-explain-cpu" --cuda "$bin/bert-explain-cuda" \
    --wheel-dir "$bundle" "$@" "$out" 2>&1 | tee "$out/log.txt"
