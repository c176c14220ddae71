#!/usr/bin/env bash
# Proves that `cargo build --features cuda` compiles (issue 3, "Accelerators"), on a machine
# without a GPU, against Debian bookworm's own CUDA toolkit (nvidia-cuda-toolkit, non-free).
# CI does not run this: it installs a few GB of packages and compiles candle's CUDA kernels.
#
# What it does, each step skipped when already done (re-runnable):
#   1. enables bookworm's contrib + non-free components in a separate apt source,
#      /etc/apt/sources.list.d/bert-explain-nonfree.sources (same URIs/Signed-By as debian.sources);
#   2. apt-get update + installs nvidia-cuda-toolkit (and the host compiler nvcc 11.8 accepts);
#   3. cargo build --features cuda into target/cuda-check (not target/, which others use).
#
# Usage: scripts/check-cuda.sh            (needs root or sudo for the apt steps only)
# Environment (all optional):
#   CUDA_COMPUTE_CAP       GPU architecture to compile candle's kernels for (default 80, see below)
#   CHECK_CUDA_TARGET_DIR  where to build (default <repo>/target/cuda-check; CARGO_TARGET_DIR is ignored)
#   CHECK_CUDA_LOG         build log (default <target dir>/check-cuda.log)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
t0=$SECONDS

say() { echo "check-cuda: $*" >&2; }
verdict() {
    # The one-line verdict, always the last line printed.
    local status=$1; shift
    echo "check-cuda: $status: $*"
}
die() {
    say "error: $*"
    verdict FAIL "$*"
    exit 1
}

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "the apt steps need root (or sudo)"
    sudo=(sudo)
fi
apt_get() {
    # Other sessions may hold the apt/dpkg locks: wait for them rather than fail.
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 "$@"
}
installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# ---------------------------------------------------------------- 0. the machine
[[ -r /etc/os-release ]] || die "/etc/os-release missing: this script is for Debian 12 (bookworm)"
# shellcheck disable=SC1091
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[[ "$codename" == bookworm ]] ||
    die "this script is for Debian 12 (bookworm); this machine is '${codename:-unknown}'"
command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH"

# ---------------------------------------------------------------- 1. non-free apt source
nonfree_src=/etc/apt/sources.list.d/bert-explain-nonfree.sources
main_src=/etc/apt/sources.list.d/debian.sources
sources_changed=0

# Is bookworm's non-free already enabled by some other source (ours excluded)?
nonfree_elsewhere() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" && "$f" != "$nonfree_src" ]] || continue
        # one-line format: "deb URI bookworm main contrib non-free"
        if grep -Eq '^[[:space:]]*deb[[:space:]].*[[:space:]]bookworm[[:space:]].*[[:space:]]non-free([[:space:]]|$)' "$f"; then
            return 0
        fi
        # deb822 format: a stanza with Suites containing bookworm and Components with non-free
        if awk 'BEGIN{RS=""; found=1}
                /(^|\n)Suites:[^\n]*[[:space:]]bookworm([[:space:]]|\n|$)/ &&
                /(^|\n)Components:[^\n]*[[:space:]]non-free([[:space:]]|\n|$)/ &&
                !/(^|\n)Enabled:[[:space:]]*no/ {found=0}
                END{exit found}' "$f"; then
            return 0
        fi
    done
    return 1
}

want_nonfree_src() {
    # Same stanzas as debian.sources (URIs, Suites, Signed-By...), components contrib + non-free.
    echo "# Written by bert-explain's scripts/check-cuda.sh: bookworm's contrib and non-free"
    echo "# components (for nvidia-cuda-toolkit), mirroring $main_src."
    if [[ -f "$main_src" ]]; then
        awk 'BEGIN{RS=""; ORS="\n\n"}
             {
               n = split($0, lines, "\n"); out = ""
               for (i = 1; i <= n; i++) {
                 l = lines[i]
                 if (l ~ /^#/) continue
                 if (l ~ /^Components:/) l = "Components: contrib non-free"
                 out = out l "\n"
               }
               sub(/\n$/, "", out); print out
             }' "$main_src" | sed -e '$ { /^$/d }'
    else
        printf '%s\n' \
            'Types: deb' \
            'URIs: http://deb.debian.org/debian' \
            'Suites: bookworm bookworm-updates' \
            'Components: contrib non-free' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
            '' \
            'Types: deb' \
            'URIs: http://deb.debian.org/debian-security' \
            'Suites: bookworm-security' \
            'Components: contrib non-free' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
    fi
}

if nonfree_elsewhere; then
    say "[1/4] bookworm non-free already enabled by another apt source: nothing to add"
else
    want="$(want_nonfree_src)"
    if [[ -f "$nonfree_src" && "$(cat "$nonfree_src")" == "$want" ]]; then
        say "[1/4] $nonfree_src already in place"
    else
        say "[1/4] writing $nonfree_src (bookworm contrib + non-free)"
        printf '%s\n' "$want" | "${sudo[@]}" tee "$nonfree_src" >/dev/null
        sources_changed=1
    fi
fi

# ---------------------------------------------------------------- 2. packages
# nvidia-cuda-toolkit: nvcc, headers and libraries (CUDA 11.8 on bookworm).
# nvcc 11.8 supports host gcc up to 11; bookworm's default gcc is 12, so the toolkit's
# dependency pulls g++-11 as well, and Debian's nvcc.profile points nvcc at it.
packages=(nvidia-cuda-toolkit)
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
    if ((sources_changed)) || ! apt-cache policy nvidia-cuda-toolkit 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        say "[2/4] apt-get update"
        apt_get update -q || die "apt-get update failed"
    fi
    say "[2/4] installing ${missing[*]} (a few GB, takes a while)"
    apt_get install -y -q --no-install-recommends "${missing[@]}" ||
        die "apt-get install ${missing[*]} failed"
else
    say "[2/4] ${packages[*]} already installed"
fi

command -v nvcc >/dev/null 2>&1 || die "nvcc not on PATH after installing nvidia-cuda-toolkit"
nvcc_version="$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
say "      $(nvcc --version | grep -m1 release)"

# ---------------------------------------------------------------- 3. build environment
# No GPU here, so nvidia-smi cannot tell candle-kernels' build (via its build-dependency
# cudaforge) the compute capability, and the build script fails before compiling anything;
# cudaforge reads CUDA_COMPUTE_CAP instead. 80 (Ampere) is what candle-kernels' build.rs itself
# assumes when it cannot detect one, and the lowest at which candle compiles its bf16 kernels
# (sm_89+ would add the fp8 ones; CUDA 11.8 knows sm_90 at most). It only selects the GPU
# target baked into this build; 80 is the value this script has been proven with.
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-80}"
# A target dir of its own, so as not to disturb (or wait on) builds in target/. An ambient
# CARGO_TARGET_DIR is deliberately not honoured; CHECK_CUDA_TARGET_DIR overrides.
export CARGO_TARGET_DIR="${CHECK_CUDA_TARGET_DIR:-$repo/target/cuda-check}"
log="${CHECK_CUDA_LOG:-$CARGO_TARGET_DIR/check-cuda.log}"
mkdir -p "$CARGO_TARGET_DIR" "$(dirname "$log")"

# Host compiler. nvcc 11.8 accepts gcc <= 11, bookworm's default is gcc 12. Debian's
# /etc/nvcc.profile prepends /usr/lib/nvidia-cuda-toolkit/bin to nvcc's PATH, whose gcc/g++
# wrappers exec g++-11 (a dependency of the toolkit), so nothing needs setting. Do NOT set
# NVCC_CCBIN to gcc 12: cudaforge then adds -allow-unsupported-compiler, which is unsupported.
host_cxx=/usr/lib/nvidia-cuda-toolkit/bin/g++
if [[ -n "${NVCC_CCBIN:-}" ]]; then
    host_desc="$("$NVCC_CCBIN" --version 2>/dev/null | head -n 1) (NVCC_CCBIN=$NVCC_CCBIN)"
elif [[ -x "$host_cxx" ]]; then
    host_desc="$("$host_cxx" --version 2>/dev/null | head -n 1)" ||
        die "nvcc's host compiler wrapper $host_cxx finds no supported g++ (install g++-11)"
    host_desc="$host_desc (Debian's nvcc wrapper $host_cxx)"
else
    host_desc="$(g++ --version 2>/dev/null | head -n 1) (g++ on PATH)"
fi

say "[3/4] nvcc $nvcc_version, host compiler $host_desc"
say "      CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
for v in NVCC NVCC_CCBIN NVCC_APPEND_FLAGS NVCC_PREPEND_FLAGS CUDARC_CUDA_VERSION CUDA_HOME CUDA_PATH; do
    if [[ -n "${!v:-}" ]]; then say "      $v=${!v}"; fi
done

# Fail fast, in seconds rather than after half an hour of cargo, if nvcc cannot compile at all.
smoke="$(mktemp -d)"
trap 'rm -rf "$smoke"' EXIT
cat >"$smoke/smoke.cu" <<'CU'
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
CU
cap_arch="${CUDA_COMPUTE_CAP%[af]}"
if ! nvcc -std=c++17 "-gencode=arch=compute_${cap_arch},code=sm_${cap_arch}" -c -Xcompiler -fPIC \
    ${NVCC_CCBIN:+-ccbin "$NVCC_CCBIN"} -o "$smoke/smoke.o" "$smoke/smoke.cu" >"$smoke/out" 2>&1; then
    cat "$smoke/out" >&2
    die "nvcc cannot compile a trivial kernel for sm_${cap_arch} (see above)"
fi
say "      nvcc smoke test (sm_${cap_arch}) passed"

# ---------------------------------------------------------------- 4. build
say "[4/4] cargo build --features cuda (log: $log)"
say "      a fresh build compiles candle's CUDA kernels with nvcc: about 40 minutes on 2 busy cores"
cd "$repo"
b0=$SECONDS
# cargo draws no progress bar into a pipe: say every few minutes that it is still going.
(
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep 180 & nap=$!
        wait "$nap"
        say "      ... still building, $(((SECONDS - b0) / 60)) min so far; last: $(grep -v '^[[:space:]]*$' "$log" 2>/dev/null | tail -n 1 | sed 's/^[[:space:]]*//')"
    done
) &
heartbeat=$!
trap 'kill "$heartbeat" 2>/dev/null || true; rm -rf "$smoke"' EXIT
set +e
cargo build --features cuda 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
kill "$heartbeat" 2>/dev/null || true
took=$((SECONDS - b0))
if ((rc != 0)); then
    say "build failed after ${took}s; the last lines of $log:"
    tail -n 40 "$log" >&2
    verdict FAIL "cargo build --features cuda failed (exit $rc, after ${took}s) with nvcc $nvcc_version, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP; see $log"
    exit 1
fi

# Proof that the feature took: the binary links CUDA's libraries (it loads them at start-up,
# so on a machine without a driver it only runs where libcuda.so.1 exists, as it does here).
bin="$CARGO_TARGET_DIR/debug/bert-explain"
if [[ -x "$bin" ]] && command -v ldd >/dev/null 2>&1; then
    libs="$(ldd "$bin" | awk '/libcuda\.so|libcublas\.so|libcurand\.so|libcudart\.so/ {print $1}' | sort | tr '\n' ' ')"
    [[ "$libs" == *libcuda.so* ]] || die "built, but $bin does not link libcuda: was the cuda feature applied?"
    say "      $bin links: $libs"
fi
verdict OK "cargo build --features cuda compiles (nvcc $nvcc_version, $(echo "$host_desc" | cut -d' ' -f1-4), CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP, build ${took}s, total $((SECONDS - t0))s)"
