#!/usr/bin/env bash
# Attention flow on real attention (all-MiniLM-L6-v2), this checkout's engine against an
# earlier commit's, side by side in one run (scripts/bench/real_flow.py prints the table).
#
#   scripts/bench/real_flow.sh [--baseline REV] [--sizes 128,512] [--all-positions 128]
#                              [--new-only-all-positions 512]
#
# --baseline REV (default c65d755, the engine before the flow speed-ups) is built in release in
# a temporary worktree with its own target folder, target/bench-baseline/ (kept: later runs
# reuse it; the first build takes as long as a fresh release build). Needs the reference venv
# (scripts/reference/setup.sh) to save the attention, and MiniLM (scripts/fetch-minilm.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
baseline=c65d755
sizes=128,512
every=128
alone=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --baseline) baseline="$2"; shift 2 ;;
        --sizes) sizes="$2"; shift 2 ;;
        --all-positions) every="$2"; shift 2 ;;
        --new-only-all-positions) alone="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
"$repo/scripts/reference/setup.sh"
"$repo/scripts/fetch-minilm.sh" >/dev/null
python="$repo/.venv-reference/bin/python"
model="$repo/models/downloaded/all-MiniLM-L6-v2"
attention="$repo/target/bench-real"
mkdir -p "$attention"
for n in ${sizes//,/ }; do
    for tile in 1 2; do
        file="$attention/minilm-L$((6 * tile))-n$n.npy"
        [[ -f $file ]] || "$python" "$here/real_attention.py" --model "$model" --n "$n" \
            --tile "$tile" --out "$file" 2>/dev/null
    done
done

(cd "$repo" && cargo build --release --quiet --bin bert-explain)
new="${CARGO_TARGET_DIR:-$repo/target}/release/bert-explain"
old_dir="$repo/target/bench-baseline"
old="$old_dir/$(git -C "$repo" rev-parse --short "$baseline")/bert-explain"
if [[ ! -x $old ]]; then
    tree="$(mktemp -d)"
    git -C "$repo" worktree add --detach "$tree" "$baseline" >/dev/null
    (cd "$tree" && CARGO_TARGET_DIR="$old_dir/target" cargo build --release --quiet --bin bert-explain)
    mkdir -p "$(dirname "$old")"
    cp "$old_dir/target/release/bert-explain" "$old"
    git -C "$repo" worktree remove --force "$tree"
fi

echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; old = $baseline, new = $(git -C "$repo" rev-parse --short HEAD)"
echo
python3 "$here/real_flow.py" --new "$new" --old "$old" --attention-dir "$attention" \
    --sizes "$sizes" --all-positions "$every" --new-only-all-positions "$alone"
