#!/usr/bin/env bash
# Builds bert-explain with --features cuda on a machine without a GPU, against CUDA 13.0 from
# PyPI's wheels (the libraries the lent H100 machine has in its torch environment), and packs
# what scripts/gpu-check.sh runs there: the CUDA and CPU release binaries, the Python wheel
# built with the cuda feature, compressed. CI does not run this (downloads about 1 GB of
# wheels and compiles candle's CUDA kernels: 16.5 minutes for the CUDA binary on 2 busy cores).
#
# Steps, each skipped when already done (re-runnable):
#   1. the CUDA 13.0 wheels, installed (no dependencies) into target/cuda13/site; their files
#      are under nvidia/cu13/, which becomes the toolkit root: lib64 -> lib, and the
#      unversioned .so links the linker looks for;
#   2. a stub libcuda.so.1 for the link only (cudarc links the driver, which no wheel
#      ships), generated from cudarc's driver declarations into target/cuda13/stubs; it is
#      never packed: on the GPU machine the real driver is found at run time;
#   3. cargo build --release --features cuda into target/cuda (LTO off: the fat LTO of the
#      release profile would add about ten minutes), CUDA_COMPUTE_CAP=90 (an H100);
#   4. the CPU release binary (target/release) to compare against, and the Python wheel with
#      the cuda feature (maturin, into target/cuda/wheels; --no-python leaves it out);
#   5. target/gpu-bundle/: the binaries xz-compressed, the wheel, and a manifest of sha256s.
#
# Usage: scripts/check-cuda.sh [--no-python]
# Then, on the GPU machine (the device tool's `run`, carrying target/gpu-bundle):
#   scripts/gpu-check.sh target/gpu-bundle "$OUT"
# Environment: CUDA_COMPUTE_CAP (default 90), CHECK_CUDA_JOBS (cargo -j, default: all cores).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
say() { echo "check-cuda: $*" >&2; }
die() {
    say "error: $*"
    echo "check-cuda: FAIL: $*"
    exit 1
}
python=yes
for arg in "$@"; do
    case "$arg" in
    --no-python) python=no ;;
    *) die "unknown argument $arg (usage: scripts/check-cuda.sh [--no-python])" ;;
    esac
done
t0=$SECONDS

# ---------------------------------------------------------------- 1. CUDA 13.0 from PyPI
wheels=(
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88
    nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
)
site="$repo/target/cuda13/site"
root="$site/nvidia/cu13"
stamp="$repo/target/cuda13/installed"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "${wheels[*]}" ]]; then
    say "[1/5] installing ${#wheels[@]} CUDA 13.0 wheels into $site"
    rm -rf "$site"
    python3 -m pip install --quiet --no-deps --target "$site" "${wheels[@]}" ||
        die "pip could not install the CUDA wheels"
    echo "${wheels[*]}" >"$stamp"
else
    say "[1/5] CUDA 13.0 wheels already in $site"
fi
[[ -x "$root/bin/nvcc" ]] || die "no nvcc at $root/bin/nvcc after installing the wheels"
[[ -e "$root/lib64" ]] || ln -s lib "$root/lib64"
# The linker asks for libcublas.so; the wheels hold libcublas.so.13 and the like.
for lib in "$root"/lib/lib*.so.*; do
    base="${lib##*/}"
    plain="$root/lib/${base%%.so.*}.so"
    [[ -e "$plain" ]] || ln -s "$base" "$plain"
done

# ---------------------------------------------------------------- 2. the driver stub
# The cudarc that Cargo.lock names: its declarations are the symbols the build links.
cudarc_version="$(awk '/^name = "cudarc"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"
find_cudarc() {
    find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -mindepth 2 -maxdepth 2 -name "cudarc-$cudarc_version" | head -n 1
}
cudarc="$(find_cudarc)"
if [[ -z "$cudarc" ]]; then
    cargo fetch --quiet
    cudarc="$(find_cudarc)"
fi
[[ -f "$cudarc/src/driver/sys/mod.rs" ]] || die "cudarc's driver declarations not found (cargo fetch)"
stubs="$repo/target/cuda13/stubs"
if [[ ! -f "$stubs/libcuda.so.1" ]]; then
    say "[2/5] a stub libcuda.so.1 from $cudarc's driver declarations (for the link only)"
    mkdir -p "$stubs"
    # Every function cudarc declares in an extern block: `fn cuName(`; each becomes an empty
    # exported symbol, which is all the linker checks.
    grep -oE '^\s+fn cu[A-Za-z0-9_]+\(' "$cudarc/src/driver/sys/mod.rs" |
        sed -E 's/^\s+fn (cu[A-Za-z0-9_]+)\(/void \1(void) {}/' | sort -u >"$stubs/stub.c"
    [[ $(wc -l <"$stubs/stub.c") -gt 100 ]] || die "found too few driver functions in cudarc"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stubs/libcuda.so.1" "$stubs/stub.c"
    ln -sf libcuda.so.1 "$stubs/libcuda.so"
else
    say "[2/5] stub driver already at $stubs/libcuda.so.1"
fi

# ---------------------------------------------------------------- 3. the CUDA build
export PATH="$root/bin:$PATH"
export CUDA_HOME="$root" CUDA_PATH="$root" CUDA_ROOT="$root"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export LIBRARY_PATH="$stubs:$root/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
export RUSTFLAGS="-L native=$stubs -L native=$root/lib"
export CARGO_PROFILE_RELEASE_LTO=false
jobs=(${CHECK_CUDA_JOBS:+-j "$CHECK_CUDA_JOBS"})
say "[3/5] $(nvcc --version | grep -m1 release); CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"
b0=$SECONDS
cargo build --release --features cuda --target-dir target/cuda "${jobs[@]}" ||
    die "cargo build --release --features cuda failed"
cuda_bin=target/cuda/release/bert-explain
needed="$(readelf -d "$cuda_bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
[[ "$needed" == *libcuda.so.1* ]] || die "$cuda_bin does not link libcuda.so.1: was the cuda feature applied?"
say "      built in $((SECONDS - b0)) s; it needs: $needed"

# ---------------------------------------------------------------- 4. CPU binary, Python wheel
say "[4/5] the CPU release binary (the release profile as users build it, into target/release)"
env -u RUSTFLAGS -u LIBRARY_PATH -u CARGO_PROFILE_RELEASE_LTO cargo build --release "${jobs[@]}" ||
    die "cargo build --release failed"
wheel=""
if [[ $python == yes ]]; then
    say "      the Python wheel with the cuda feature"
    venv="$repo/target/cuda13/venv"
    [[ -x "$venv/bin/maturin" ]] || {
        python3 -m venv "$venv" && "$venv/bin/pip" install --quiet 'maturin>=1.9,<2'
    } || die "cannot install maturin"
    rm -rf target/cuda/wheels
    "$venv/bin/maturin" build --release --features cuda --target-dir target/cuda \
        --out target/cuda/wheels --compatibility linux --auditwheel skip "${jobs[@]}" ||
        die "maturin build --features cuda failed"
    wheel="$(ls target/cuda/wheels/*.whl)"
fi

# ---------------------------------------------------------------- 5. the bundle
bundle=target/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle"
say "[5/5] packing $bundle"
xz -T0 -6 -c "$cuda_bin" >"$bundle/bert-explain-cuda.xz"
xz -T0 -6 -c target/release/bert-explain >"$bundle/bert-explain-cpu.xz"
if [[ -n "$wheel" ]]; then cp "$wheel" "$bundle/"; fi
{
    echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    echo "cuda $(nvcc --version | grep -m1 release | sed 's/.*release //'), CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"
    (cd "$bundle" && sha256sum -- *.xz *.whl 2>/dev/null || true)
} >"$bundle/MANIFEST.tmp"
mv "$bundle/MANIFEST.tmp" "$bundle/MANIFEST"
say "      $(du -sh "$bundle" | cut -f1) in all (the device tool carries at most 64 MiB)"
echo "check-cuda: OK: built and packed in $((SECONDS - t0)) s; on the GPU machine: scripts/gpu-check.sh $bundle \"\$OUT\""
