#!/usr/bin/env bash
# Faithfulness of every method (SPEC §8) over a dataset: batch mode with --evaluate and
# --mixing all, which prints the correlation tables (every method, every layer, mean ± std)
# and the ERASER AOPC table.
#
# Usage: scripts/paper/faithfulness.sh MODEL INPUT.jsonl OUTDIR [MAX_WORDS] [LIMIT] [--mixing M]
#   Keeps the first LIMIT lines (default all) whose text has at most MAX_WORDS words (default
#   any), writes OUTDIR/input.jsonl, OUTDIR/reports.jsonl and OUTDIR/summary.txt.
#   CUT_WORDS=N cuts every text after its Nth whitespace-separated word instead (spacing up to
#   there kept), so that long texts stay in at the cost of short ones.
#   IG_STEPS=N gives integrated gradients N points instead of 50 (--ig-steps).
#   BERT_EXPLAIN=PATH runs that binary instead of building the release one.
#   EXTRA_ARGS="..." passes more options (for a causal model's next-word task, "--flow": a
#   causal model computes flow only when asked).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
model="$1" input="$2" out="$3" max_words="${4:-0}" limit="${5:-0}" mixing="${6:-all}"
mkdir -p "$out"
python3 - "$input" "$out/input.jsonl" "$max_words" "$limit" "${CUT_WORDS:-0}" <<'PY'
import json, re, sys
source, target = sys.argv[1], sys.argv[2]
max_words, limit, cut = (int(a) for a in sys.argv[3:6])
kept = []
with open(source, encoding="utf-8") as f:
    for line in f:
        if not line.strip():
            continue
        record = json.loads(line)
        if cut:
            words = list(re.finditer(r"\S+", record["text"]))
            if len(words) > cut:
                record["text"] = record["text"][: words[cut - 1].end()]
            line = json.dumps(record, ensure_ascii=False)
        if max_words and len(record["text"].split()) > max_words:
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
        if limit and len(kept) == limit:
            break
with open(target, "w", encoding="utf-8") as f:
    f.writelines(kept)
print(f"{len(kept)} examples", file=sys.stderr)
PY
bin="${BERT_EXPLAIN:-}"
if [[ -z "$bin" ]]; then
    (cd "$repo" && cargo build --release --quiet --bin bert-explain)
    bin="${CARGO_TARGET_DIR:-$repo/target}/release/bert-explain"
fi
read -ra extra <<< "${EXTRA_ARGS:-}"
"$bin" --model "$model" --evaluate --ig-steps "${IG_STEPS:-50}" \
    --mixing "$mixing" "${extra[@]}" --input "$out/input.jsonl" --output "$out/reports.jsonl" \
    | tee "$out/summary.txt"
