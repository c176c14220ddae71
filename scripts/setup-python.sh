#!/usr/bin/env bash
# The Python package's test environment: creates the virtual env .venv-python (git-ignored),
# installs python/requirements-test.txt (maturin, pytest, numpy, networkx, ray[data]), and
# builds the package into it with `maturin develop`: the dev profile in the workspace's
# target/, so that it reuses what `cargo test` compiled (users run `pip install .`, which
# builds the release profile). Idempotent; the requirements install only when they change.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="$PWD/.venv-python"
req=python/requirements-test.txt
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating virtual env $venv" >&2
    "$python" -m venv "$venv"
fi
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "installing $req" >&2
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet -r "$req"
    echo "$want" > "$stamp"
fi
echo "building the bert_explain package (maturin develop, dev profile)" >&2
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --quiet >&2
"$venv/bin/python" -c 'import sys, bert_explain; print("bert_explain ready in", sys.prefix)' >&2
