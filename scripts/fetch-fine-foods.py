#!/usr/bin/env python3
"""Fetches the English labelled `small_fine_foods` reviews without R and without the network
beyond Debian's package archive.

Debian's `r-cran-modeldata` (MIT; the reviews come from the SNAP Amazon fine-food reviews) holds
`small_fine_foods` = two tibbles, `training_data` (4,000 rows) and `testing_data` (1,000 rows),
with columns product / review / score, score a factor with levels "great" and "other". They sit in
R's lazy-load database (data/Rdata.rdx + data/Rdata.rdb); this script reads them with its own
minimal R unserializer (XDR format, versions 2 and 3) and writes

    data/fine-foods-train.jsonl   {"text": review, "expected": "great"|"other"}   4,000 lines
    data/fine-foods-test.jsonl    same, 1,000 lines

The gold label is under "expected", bert-explain's batch field for "the right answer, which
datasets may record" (src/batch.rs), so `bert-explain --input data/fine-foods-test.jsonl` runs
as it is; its "label" field means "the label --evaluate explains" and is refused without
--evaluate.

in the package's row order. Texts are as in the package (HTML such as "<br />" included) except
that a review longer than 256 whitespace-separated words is cut after its 256th word (28 of the
1,000 test reviews, 98 of the 4,000 training ones): bert-explain does not truncate its input and
MiniLM has 512 positions, and 10 test reviews run to more than 512 WordPiece tokens uncut (up to
1,982). Cut at 256 words, the longest review is 475 tokens with [CLS] and [SEP] (checked with
MiniLM's tokenizer), so every review fits whole and transformers and bert-explain see the same
tokens. The cut keeps the original text up to the end of the 256th word (spacing unchanged).

Usage: python3 scripts/fetch-fine-foods.py [--out-dir DIR] [--deb FILE] [--force]
    --out-dir DIR  where the two .jsonl files go (default: <repo>/data)
    --deb FILE     use this r-cran-modeldata .deb instead of downloading it (sha256 still checked)
    --force        rewrite the files even if they are there and verified

Needs only the Python 3 standard library (zlib, lzma, bz2, gzip), `apt-get download` (works
without root; only the package archive is contacted) and `dpkg-deb -x`; if `dpkg-deb` is missing
the .deb (an `ar` archive holding data.tar.*) is unpacked with the standard library instead.
Idempotent: when both files exist and have the expected sha256 it does nothing.
"""

import argparse
import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib

PROG = "fetch-fine-foods"

# Pinned Debian package (bookworm). A different version or a changed file is refused.
DEB_PACKAGE = "r-cran-modeldata"
DEB_VERSION = "1.1.0-1"
DEB_FILE = "r-cran-modeldata_1.1.0-1_all.deb"
DEB_SHA256 = "66c2e08bb4bf695d972b1e72ea44d5af9ada3c42841793d3871017f7b896bf95"
DATA_DIR_IN_DEB = "usr/lib/R/site-library/modeldata/data"

# Reviews are cut after this many whitespace-separated words (see the docstring).
MAX_WORDS = 256
# The JSON field of the gold label (see the docstring).
LABEL_FIELD = "expected"

# sha256 of the two files this script writes (filled in from a verified run).
OUTPUTS = {
    "fine-foods-train.jsonl": ("training_data", 4000,
                               "8b7d55b552cd8573d05e8ea09999d576b2b1dd0097dd056ef5edf09381ae3cb2"),
    "fine-foods-test.jsonl": ("testing_data", 1000,
                              "2bff2e9078b6f3187cb9a67bbe21b0653f106b5bb7005ef29477068a7905d7a9"),
}


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


# ---------------------------------------------------------------------------------------------
# A minimal reader for R's serialization format (XDR binary, "X\n", versions 2 and 3), written
# from the description in R's src/main/serialize.c ("R Internals", section 1.8).

NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
SPECIALSXP, BUILTINSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, CPLXSXP = 7, 8, 9, 10, 13, 14, 15
STRSXP, DOTSXP, VECSXP, EXPRSXP, BCODESXP, EXTPTRSXP, WEAKREFSXP = 16, 17, 19, 20, 21, 22, 23
RAWSXP, S4SXP = 24, 25
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP, MISSINGARG_SXP = 255, 254, 253, 252, 251
BASENAMESPACE_SXP, NAMESPACESXP, PACKAGESXP, PERSISTSXP = 250, 249, 248, 247
EMPTYENV_SXP, BASEENV_SXP, ATTRLANGSXP, ATTRLISTSXP, ALTREP_SXP = 242, 241, 240, 239, 238

NA_INTEGER = -(2 ** 31)
IS_OBJECT_BIT, HAS_ATTR_BIT, HAS_TAG_BIT = 1 << 8, 1 << 9, 1 << 10
UTF8_MASK, LATIN1_MASK, BYTES_MASK = 1 << 3, 1 << 2, 1 << 1


class RObj:
    """An R object: `kind` (the SEXP type), `value` and `attrs` (a dict name -> RObj)."""

    __slots__ = ("kind", "value", "attrs")

    def __init__(self, kind, value=None, attrs=None):
        self.kind = kind
        self.value = value
        self.attrs = attrs or {}

    def __repr__(self):
        return f"RObj({self.kind}, {type(self.value).__name__}, attrs={list(self.attrs)})"


class Sym:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Sym({self.name!r})"


class REnv:
    __slots__ = ("locked", "enclos", "frame", "hashtab", "attrs")


class RUnserializer:
    def __init__(self, data):
        self.buf = data
        self.pos = 0
        self.refs = []
        self.native_encoding = None

    def read(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError("R serialization truncated")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self):
        return struct.unpack(">i", self.read(4))[0]

    def length(self):
        n = self.int()
        if n == -1:  # long vector: upper and lower 32 bits
            hi, lo = struct.unpack(">II", self.read(8))
            n = (hi << 32) | lo
        return n

    def run(self):
        fmt = self.read(2)
        if fmt != b"X\n":
            raise ValueError(f"unsupported R serialization format {fmt!r} (only XDR 'X' is)")
        version = self.int()
        self.int()  # writer R version
        self.int()  # minimal reader R version
        if version == 3:
            n = self.int()
            self.native_encoding = self.read(n).decode("ascii")
        elif version != 2:
            raise ValueError(f"unsupported R serialization version {version}")
        return self.item()

    def charsxp(self, levels):
        n = self.int()
        if n == -1:
            return None  # NA_STRING
        raw = self.read(n)
        if levels & LATIN1_MASK:
            return raw.decode("latin-1")
        if levels & BYTES_MASK:
            return raw.decode("latin-1")
        # UTF-8 flagged, ASCII, or native (UTF-8 for every Debian build of R).
        return raw.decode("utf-8", errors="surrogateescape")

    def attributes(self):
        """Reads a pairlist of attributes and returns it as a dict."""
        pl = self.item()
        return pairlist_to_dict(pl)

    def item(self):
        flags = self.int()
        kind = flags & 0xFF
        levels = flags >> 12
        has_attr = bool(flags & HAS_ATTR_BIT)
        has_tag = bool(flags & HAS_TAG_BIT)

        if kind == NILVALUE_SXP:
            return None
        if kind in (EMPTYENV_SXP, BASEENV_SXP, GLOBALENV_SXP, BASENAMESPACE_SXP):
            return RObj(kind)
        if kind in (UNBOUNDVALUE_SXP, MISSINGARG_SXP):
            return RObj(kind)
        if kind == REFSXP:
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            return self.refs[idx - 1]
        if kind == PERSISTSXP:
            obj = RObj(kind, self.string_vec())
            self.refs.append(obj)
            return obj
        if kind == SYMSXP:
            ch = self.item()  # a CHARSXP
            sym = Sym(ch.value if isinstance(ch, RObj) else ch)
            self.refs.append(sym)
            return sym
        if kind in (PACKAGESXP, NAMESPACESXP):
            obj = RObj(kind, self.string_vec())
            self.refs.append(obj)
            return obj
        if kind == ENVSXP:
            env = REnv()
            env.locked = self.int()
            self.refs.append(env)  # registered before its contents (they may refer to it)
            env.enclos = self.item()
            env.frame = self.item()
            env.hashtab = self.item()
            env.attrs = pairlist_to_dict(self.item())
            return env
        if kind in (LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP, ATTRLANGSXP, ATTRLISTSXP):
            # A pairlist, read iteratively along its CDRs: [(tag, car, attrs)].
            cells = []
            first_kind = kind
            while True:
                attrs = pairlist_to_dict(self.item()) if has_attr else {}
                tag = self.item() if has_tag else None
                car = self.item()
                cells.append((tag, car, attrs))
                # Peek the CDR: continue the loop for a plain pairlist cell, else read it.
                save = self.pos
                nflags = self.int()
                nkind = nflags & 0xFF
                if nkind == first_kind and first_kind in (LISTSXP, LANGSXP):
                    has_attr = bool(nflags & HAS_ATTR_BIT)
                    has_tag = bool(nflags & HAS_TAG_BIT)
                    continue
                self.pos = save
                cdr = self.item()
                break
            return RObj(first_kind, (cells, cdr))
        if kind == CHARSXP:
            return RObj(CHARSXP, self.charsxp(levels))
        if kind in (LGLSXP, INTSXP):
            n = self.length()
            vals = list(struct.unpack(f">{n}i", self.read(4 * n)))
            vals = [None if v == NA_INTEGER else v for v in vals]
            if kind == LGLSXP:
                vals = [None if v is None else bool(v) for v in vals]
            obj = RObj(kind, vals)
        elif kind == REALSXP:
            n = self.length()
            obj = RObj(kind, list(struct.unpack(f">{n}d", self.read(8 * n))))
        elif kind == CPLXSXP:
            n = self.length()
            v = struct.unpack(f">{2 * n}d", self.read(16 * n))
            obj = RObj(kind, [complex(v[2 * i], v[2 * i + 1]) for i in range(n)])
        elif kind == STRSXP:
            n = self.length()
            out = []
            for _ in range(n):
                ch = self.item()
                out.append(ch.value if isinstance(ch, RObj) else ch)
            obj = RObj(kind, out)
        elif kind in (VECSXP, EXPRSXP):
            n = self.length()
            obj = RObj(kind, [self.item() for _ in range(n)])
        elif kind == RAWSXP:
            n = self.length()
            obj = RObj(kind, self.read(n))
        elif kind == S4SXP:
            obj = RObj(kind)
        elif kind == ALTREP_SXP:
            info = self.item()
            state = self.item()
            attr = self.item()
            obj = expand_altrep(info, state)
            obj.attrs = pairlist_to_dict(attr)
            return obj
        elif kind in (SPECIALSXP, BUILTINSXP):
            n = self.int()
            obj = RObj(kind, self.read(n).decode("ascii"))
        elif kind in (EXTPTRSXP, WEAKREFSXP, BCODESXP):
            raise ValueError(f"R object type {kind} is not supported by this reader")
        else:
            raise ValueError(f"unknown R object type {kind} at byte {self.pos - 4}")
        if has_attr:
            obj.attrs = self.attributes()
        return obj

    def string_vec(self):
        if self.int() != 0:
            raise ValueError("bad string vector in a persistent/package/namespace reference")
        n = self.int()
        out = []
        for _ in range(n):
            ch = self.item()
            out.append(ch.value if isinstance(ch, RObj) else ch)
        return out


def pairlist_to_dict(pl):
    out = {}
    if pl is None:
        return out
    if not isinstance(pl, RObj) or pl.kind not in (LISTSXP, ATTRLISTSXP):
        raise ValueError(f"expected a pairlist, got {pl!r}")
    cells, _cdr = pl.value
    for i, (tag, car, _attrs) in enumerate(cells):
        out[tag.name if isinstance(tag, Sym) else str(i)] = car
    return out


def expand_altrep(info, state):
    """The few ALTREP classes R writes for ordinary data (compact sequences, wrappers)."""
    cells = info.value[0] if isinstance(info, RObj) and info.kind == LISTSXP else []
    cls = cells[0][1].name if cells and isinstance(cells[0][1], Sym) else None
    if cls == "compact_intseq":
        n, start, step = state.value
        return RObj(INTSXP, [int(start + i * step) for i in range(int(n))])
    if cls == "compact_realseq":
        n, start, step = state.value
        return RObj(REALSXP, [start + i * step for i in range(int(n))])
    if cls and cls.startswith("wrap_"):
        inner = state.value[0]
        return RObj(inner.kind, inner.value)
    if cls == "deferred_string":
        arg = state.value[0][0][1] if state.kind == LISTSXP else state
        return RObj(STRSXP, [None if v is None else (repr(v) if not isinstance(v, str) else v)
                             for v in arg.value])
    raise ValueError(f"unsupported ALTREP class {cls!r}")


def unserialize(data):
    return RUnserializer(data).run()


# ---------------------------------------------------------------------------------------------
# R's lazy-load database: NAME.rdx (a serialized, compressed index) + NAME.rdb (the blobs).

def decompress_rdx(raw):
    if raw[:2] == b"\x1f\x8b":  # gzip (saveRDS-style)
        return gzip.decompress(raw)
    if raw[:2] in (b"BZ",):
        return bz2.decompress(raw)
    if raw[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(raw)
    return decompress_blob(raw)


def decompress_blob(blob):
    """One lazy-load blob: 4-byte big-endian uncompressed length, then (R >= 2.10) a type byte
    'Z' (raw LZMA2), '2' (bzip2), '1' (zlib) or '0' (stored) -- or, in the old format, the zlib
    stream directly."""
    (n,) = struct.unpack(">I", blob[:4])
    kind = blob[4:5]
    if kind == b"Z":
        out = lzma.decompress(blob[5:], format=lzma.FORMAT_RAW,
                              filters=[{"id": lzma.FILTER_LZMA2,
                                        "preset": 9 | lzma.PRESET_EXTREME}])
    elif kind == b"2":
        out = bz2.decompress(blob[5:])
    elif kind == b"1":
        out = zlib.decompress(blob[5:])
    elif kind == b"0":
        out = blob[5:]
    else:
        out = zlib.decompress(blob[4:])
    if len(out) != n:
        raise ValueError(f"lazy-load blob: expected {n} bytes, got {len(out)}")
    return out


def lazyload_object(rdx_path, rdb_path, name):
    index = unserialize(decompress_rdx(open(rdx_path, "rb").read()))
    top = dict(zip(index.attrs["names"].value, index.value))
    variables = top["variables"]
    names = variables.attrs["names"].value
    if name not in names:
        raise KeyError(f"{name!r} not in the lazy-load index (has: {', '.join(names)})")
    offset, length = variables.value[names.index(name)].value
    with open(rdb_path, "rb") as f:
        f.seek(int(offset))
        blob = f.read(int(length))
    return unserialize(decompress_blob(blob))


def data_frame_columns(df):
    if not isinstance(df, RObj) or df.kind != VECSXP:
        raise ValueError("expected a data frame (a list)")
    cls = df.attrs.get("class")
    if cls is None or "data.frame" not in cls.value:
        raise ValueError(f"expected a data.frame, got class {cls and cls.value}")
    return dict(zip(df.attrs["names"].value, df.value))


def factor_values(col):
    cls = col.attrs.get("class")
    if col.kind != INTSXP or cls is None or "factor" not in cls.value:
        raise ValueError("expected a factor column")
    levels = col.attrs["levels"].value
    return [None if v is None else levels[v - 1] for v in col.value]


# ---------------------------------------------------------------------------------------------

def download_deb(workdir):
    if shutil.which("apt-get") is None:
        die("apt-get is not available, so the Debian package r-cran-modeldata cannot be "
            f"downloaded. Download {DEB_FILE} (sha256 {DEB_SHA256}) from a Debian mirror "
            "(pool/main/r/r-cran-modeldata/) and pass it with --deb FILE.")
    note(f"downloading {DEB_PACKAGE}={DEB_VERSION} with apt-get download (about 4 MB)")
    proc = subprocess.run(["apt-get", "download", f"{DEB_PACKAGE}={DEB_VERSION}"], cwd=workdir,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = os.path.join(workdir, DEB_FILE)
    if proc.returncode != 0 or not os.path.isfile(path):
        sys.stderr.write(proc.stdout)
        die(f"apt-get download {DEB_PACKAGE}={DEB_VERSION} failed (see above). The version is "
            "pinned to Debian bookworm's; run `apt-get update` (no root needed for the download "
            "itself, but the package lists must know the version), or pass --deb FILE.")
    return path


def extract_deb(deb, dest):
    """Extracts the data files of `deb` into `dest` (dpkg-deb -x, else by hand)."""
    if shutil.which("dpkg-deb"):
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
        return
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            die(f"{deb} is not a Debian package (ar archive)")
        while True:
            header = f.read(60)
            if len(header) < 60:
                die(f"no data.tar member in {deb}")
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                if name.endswith(".zst"):
                    die("data.tar.zst needs dpkg-deb (zstd is not in Python's standard library)")
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                    tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") \
                        else tar.extractall(dest)
                return


def cut_words(text, max_words=MAX_WORDS):
    """`text` up to the end of its `max_words`-th whitespace-separated word."""
    count = 0
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            break
        while i < n and not text[i].isspace():
            i += 1
        count += 1
        if count == max_words:
            return text[:i]
    return text


def outputs_ok(out_dir):
    for fname, (_obj, _n, want) in OUTPUTS.items():
        path = os.path.join(out_dir, fname)
        if not os.path.isfile(path) or sha256_file(path) != want:
            return False
    return True


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(repo, "data"))
    ap.add_argument("--deb", help="a local copy of " + DEB_FILE)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()

    out_dir = os.path.abspath(args.out_dir)
    if not args.force and outputs_ok(out_dir):
        note(f"up to date: {', '.join(os.path.join(out_dir, f) for f in OUTPUTS)}")
        return
    os.makedirs(out_dir, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix=PROG + ".") as tmp:
        deb = os.path.abspath(args.deb) if args.deb else download_deb(tmp)
        got = sha256_file(deb)
        if got != DEB_SHA256:
            die(f"sha256 mismatch for {deb}\n{PROG}: expected {DEB_SHA256}\n{PROG}: got      {got}")
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        extract_deb(deb, root)
        data_dir = os.path.join(root, *DATA_DIR_IN_DEB.split("/"))
        rdx, rdb = os.path.join(data_dir, "Rdata.rdx"), os.path.join(data_dir, "Rdata.rdb")
        if not (os.path.isfile(rdx) and os.path.isfile(rdb)):
            die(f"{DATA_DIR_IN_DEB}/Rdata.rdx/.rdb not found in {DEB_FILE}")

        for fname, (obj_name, want_rows, want_sha) in OUTPUTS.items():
            cols = data_frame_columns(lazyload_object(rdx, rdb, obj_name))
            texts, labels = cols["review"].value, factor_values(cols["score"])
            if len(texts) != want_rows or len(labels) != want_rows:
                die(f"{obj_name}: expected {want_rows} rows, got {len(texts)}")
            if any(t is None for t in texts) or set(labels) != {"great", "other"}:
                die(f"{obj_name}: unexpected missing review or labels {sorted(set(map(str, labels)))}")
            path = os.path.join(out_dir, fname)
            tmp_out = path + ".tmp"
            with open(tmp_out, "w", encoding="utf-8", newline="\n") as f:
                for text, label in zip(texts, labels):
                    text = cut_words(text)
                    f.write(json.dumps({"text": text, LABEL_FIELD: label}, ensure_ascii=False) + "\n")
            got = sha256_file(tmp_out)
            if got != want_sha:
                note(f"warning: {fname}: sha256 {got} differs from the pinned {want_sha}")
                if os.environ.get("FINE_FOODS_ALLOW_MISMATCH") != "1":
                    os.remove(tmp_out)
                    die(f"{fname} does not match the pinned sha256 (set "
                        "FINE_FOODS_ALLOW_MISMATCH=1 to write it anyway)")
            os.replace(tmp_out, path)
            great = labels.count("great")
            cut = sum(cut_words(t) != t for t in texts)
            note(f"wrote {path}: {want_rows} reviews ({great} great, {want_rows - great} other; "
                 f"{cut} cut to {MAX_WORDS} words)")


if __name__ == "__main__":
    main()
