#!/usr/bin/env bash
# Creates the reference virtual env at <repo>/.venv-reference and installs the pinned
# requirements.txt; `setup.sh lxt` makes LXT's own env, <repo>/.venv-lxt, from
# requirements-lxt.txt. Idempotent: does nothing if the env already satisfies its file.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
case "${1:-}" in
    "") venv="$repo/.venv-reference" req="$here/requirements.txt"
        imports="torch, transformers, networkx, numpy, safetensors, tokenizers" ;;
    lxt) venv="$repo/.venv-lxt" req="$here/requirements-lxt.txt"
        imports="torch, transformers, lxt.efficient" ;;
    *) echo "usage: $0 [lxt]" >&2; exit 2 ;;
esac
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "reference env already set up: $venv" >&2
    exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating virtual env $venv" >&2
    "$python" -m venv "$venv"
fi
echo "installing $req (torch is large; this takes a few minutes)" >&2
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip
"$venv/bin/python" -m pip install --disable-pip-version-check -r "$req"
# Sanity check: the imports the reference needs.
"$venv/bin/python" -c "import $imports; print('torch', torch.__version__, 'transformers', transformers.__version__)" >&2
echo "$want" > "$stamp"
echo "reference env ready: $venv" >&2
