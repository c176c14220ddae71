#!/usr/bin/env python3
"""Reference reports for the real pretrained checkpoints of scripts/fetch-real-models.sh.

For every case of tests/fixtures/real/cases.json ({"name", "model", "text", "target",
"candidates", "top_k"}; "model" is a fetch name, its folder models/downloaded/<model>, fetched
with scripts/fetch-real-models.sh when missing) writes tests/fixtures/real/<name>.json: the
SPEC §4 report plus the §7 fields "family" and "task", computed with transformers (eager
attention, float32, eval mode) and networkx, never with any Rust code.

The text is encoded as bert-explain's --pretokenized does: every whitespace-separated piece is
looked up as it is in vocab.txt (no lowercasing, no splitting; an unknown piece is an error),
[CLS] first and [SEP] last, token types 0, attention mask 1, no padding.

- family: config.json's model_type ("bert" when absent, as in rxnfp's bert_pretrained).
- task: "sequence-classification" when architectures names a *ForSequenceClassification
  (loaded with num_labels from config.json; labels LABEL_k where id2label has fewer entries),
  else "masked-lm" (BertForMaskedLM / AlbertForMaskedLM).
- relevance: reference.py's head-mean fusion, rollout and networkx flow, for target t: the one
  [MASK] for masked LMs, position 0 ([CLS]) for classifiers, unless the case gives "target".
- prediction, masked LM: p = softmax(logits[t]) in float32; candidates looked up in vocab.txt
  as they are (they must be single vocabulary entries), the top_k entries by probability.
  Classifier: {"labels": [{"label", "id", "probability"}, ...]}, every label, highest first.

Usage (with the reference venv's python):
  real_reference.py                   every case
  real_reference.py --only NAME       one case (repeat or comma-separate)
  real_reference.py --jobs 2          parallel processes (one torch thread each)
  real_reference.py --model DIR --text "C C ... [MASK] ..." [--target I] [--candidates c,n]
                    [--top-k 5] [--out FILE]            one report, to stdout by default
  real_reference.py --importance      tests/fixtures/real/importance/<name>.json for the runs in
                    IMPORTANCE (needs the case's report): --evaluate's importance scores
                    (importance.py's definitions, for the top word or label) and their Spearman
                    correlations with the report's maps
  real_reference.py --check-rust BIN [--model-root DIR] [--tolerance 1e-4]
                    runs `BIN --json --pretokenized --model DIR/<model> ...` for every case and
                    compares its report with the stored fixture (every number, to the
                    tolerance; "model" and "device" are not compared). DIR defaults to
                    models/downloaded; any folder of the same checkpoints (for instance
                    safetensors copies) works.
"""

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "real")
DOWNLOADED = os.path.join(REPO, "models", "downloaded")

sys.path.insert(0, HERE)

import reference as ref  # noqa: E402  (rollout, flow, fuse_and_augment, fail, ReferenceError)


def log(msg):
    print(f"real_reference: {msg}", file=sys.stderr, flush=True)


def read_vocab(folder):
    path = os.path.join(folder, "vocab.txt")
    if not os.path.isfile(path):
        ref.fail(f"{folder} has no vocab.txt")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    return tokens, vocab


def encode_pretokenized(vocab, text):
    """[CLS] + every whitespace-separated piece as it is in vocab.txt + [SEP]."""
    ids = [vocab["[CLS]"]]
    for piece in text.split():
        if piece not in vocab:
            ref.fail(f"the token {piece!r} is not in the model's vocabulary")
        ids.append(vocab[piece])
    ids.append(vocab["[SEP]"])
    return ids


def load_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def family_and_task(config):
    family = config.get("model_type") or "bert"
    archs = config.get("architectures") or []
    if any(a.endswith("ForSequenceClassification") for a in archs):
        task = "sequence-classification"
    else:
        task = "masked-lm"
    return family, task


def load_model(folder, family, task, config):
    import torch
    from transformers import (AlbertForMaskedLM, AlbertForSequenceClassification, BertForMaskedLM,
                              BertForSequenceClassification)

    classes = {
        ("bert", "masked-lm"): BertForMaskedLM,
        ("bert", "sequence-classification"): BertForSequenceClassification,
        ("albert", "masked-lm"): AlbertForMaskedLM,
        ("albert", "sequence-classification"): AlbertForSequenceClassification,
    }
    cls = classes.get((family, task))
    if cls is None:
        ref.fail(f"{folder}: no reference for family {family!r} with task {task!r}")
    extra = {}
    if task == "sequence-classification":
        # rxnfp's bert_ft_10k_25s: num_labels 50, id2label with 2 entries -> LABEL_0..LABEL_49.
        extra["num_labels"] = int(config.get("num_labels", len(config.get("id2label") or {}) or 2))
    model, info = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                      output_loading_info=True, **extra)
    if info.get("missing_keys"):
        ref.fail(f"{folder}: missing tensors: {sorted(info['missing_keys'])}")
    if info.get("mismatched_keys"):
        ref.fail(f"{folder}: tensors with the wrong shape: {sorted(info['mismatched_keys'])}")
    return model.float().eval()


def run(folder, text, target=None, candidates=(), top_k=5, name=None):
    import numpy as np
    import torch

    folder = os.path.abspath(folder)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        ref.fail(f"{folder} has no config.json")
    torch.set_grad_enabled(False)
    t0 = time.time()
    config = load_config(folder)
    family, task = family_and_task(config)
    vocab_list, vocab = read_vocab(folder)
    ids = encode_pretokenized(vocab, text)
    tokens = [vocab_list[i] for i in ids]
    n = len(ids)
    log(f"{os.path.basename(folder)} ({family}, {task}): {n} tokens")

    model = load_model(folder, family, task, config)
    if n > model.config.max_position_embeddings:
        ref.fail(f"{n} tokens, more than the model's {model.config.max_position_embeddings} positions")

    if target is None:
        if task == "sequence-classification":
            t = 0
        else:
            masks = [i for i, x in enumerate(ids) if x == vocab["[MASK]"]]
            if len(masks) != 1:
                ref.fail(f"the text has {len(masks)} [MASK] tokens; give exactly one or a target")
            t = masks[0]
    else:
        t = int(target)
        if not 0 <= t < n:
            ref.fail(f"target {t} is out of range (0..{n - 1})")

    input_ids = torch.tensor([ids])
    enc = {"input_ids": input_ids, "token_type_ids": torch.zeros_like(input_ids),
           "attention_mask": torch.ones_like(input_ids)}
    out = model(**enc, output_attentions=True)
    att32 = torch.stack([a[0] for a in out.attentions])  # L×H×n×n, float32
    if att32.dtype != torch.float32:
        ref.fail(f"attention is {att32.dtype}, expected float32")
    att = att32.double().numpy()
    L, H = att.shape[0], att.shape[1]
    assert att.shape == (L, H, n, n)
    log(f"{L} layers, {H} heads, max row-sum error {np.abs(att.sum(-1) - 1).max():.1e}")

    mean, aug = ref.fuse_and_augment(att)
    raw = mean[:, t, :]
    roll = ref.rollout_rows(aug, t)
    flow = ref.flow_rows(aug, t)

    if task == "sequence-classification":
        probs = torch.softmax(out.logits[0].float(), dim=-1)
        id2label = model.config.id2label or {}
        labels = [{"label": id2label.get(k, f"LABEL_{k}"), "id": k, "probability": float(probs[k])}
                  for k in range(probs.shape[0])]
        labels.sort(key=lambda x: (-x["probability"], x["id"]))
        pred = {"labels": labels}
    else:
        probs = torch.softmax(out.logits[0, t].float(), dim=-1)
        cands = []
        for word in candidates:
            if word not in vocab:
                ref.fail(f"candidate {word!r} is not a vocabulary entry")
            cands.append({"word": word, "id": vocab[word], "probability": float(probs[vocab[word]])})
        values, indices = torch.topk(probs, min(top_k, probs.shape[0]))
        top = [{"word": vocab_list[int(i)], "id": int(i), "probability": float(v)}
               for v, i in zip(values, indices)]
        pred = {"candidates": cands, "top": top}

    report = {
        "model": name or os.path.basename(folder.rstrip("/")),
        "family": family,
        "task": task,
        "device": "cpu",
        "tokens": tokens,
        "target": {"index": t, "token": tokens[t]},
        "prediction": pred,
        "layers": L,
        "heads": H,
        "relevance": {"raw": raw.tolist(), "rollout": roll.tolist(), "flow": flow.tolist()},
    }
    log(f"done in {time.time() - t0:.1f} s")
    return report


def ensure_model(model):
    import subprocess

    folder = os.path.join(DOWNLOADED, model)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        log(f"fetching {model}")
        subprocess.run([os.path.join(REPO, "scripts", "fetch-real-models.sh"), model, folder], check=True)
    return folder


def run_case(case, threads, out_dir):
    import torch

    if threads:
        torch.set_num_threads(threads)
    start = time.time()
    report = run(os.path.join(DOWNLOADED, case["model"]), case["text"], case.get("target"),
                 case.get("candidates", []), case.get("top_k", 5), name=case["model"])
    with open(os.path.join(out_dir, case["name"] + ".json"), "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    return case["name"], time.time() - start


# Importance fixtures (--evaluate): one masked-LM case and one classifier case, top word/label,
# blanking with [UNK]. Format as tests/fixtures/importance/.
IMPORTANCE = [
    {"name": "rxnmapper-mlm-bromination", "case": "rxnmapper-mlm-bromination", "word": None, "blank": "unk"},
    {"name": "rxnfp-cls-ester", "case": "rxnfp-cls-ester", "word": None, "blank": "unk"},
]


def importance_scores(folder, text, target=None, blank="unk"):
    """importance.py's scores for the top word (masked LM) or the top label (classifier).

    gradient_norm[j] = ‖∂p/∂e_j‖₂ and gradient_x_input[j] = Σ_d (∂p/∂e_j)_d (e_j)_d with e_j the
    word embedding of token j (inputs_embeds: before positions, token types and, for ALBERT,
    before the embedding-size → hidden mapping); blank_out[j] = p − p(token j replaced by
    [UNK] or [MASK]). p is the softmax probability at the target (float32).
    """
    import torch

    folder = os.path.abspath(folder)
    config = load_config(folder)
    family, task = family_and_task(config)
    vocab_list, vocab = read_vocab(folder)
    ids = encode_pretokenized(vocab, text)
    n = len(ids)
    model = load_model(folder, family, task, config)
    classifier = task == "sequence-classification"
    if target is None:
        target = 0 if classifier else ids.index(vocab["[MASK]"])
    input_ids = torch.tensor([ids])
    extra = {"token_type_ids": torch.zeros_like(input_ids), "attention_mask": torch.ones_like(input_ids)}

    def probs_of(logits):
        return torch.softmax((logits[0] if classifier else logits[0, target]).float(), dim=-1)

    with torch.enable_grad():
        words = model.get_input_embeddings()(input_ids).detach().clone().requires_grad_(True)
        probs = probs_of(model(inputs_embeds=words, **extra).logits)
        wid = int(torch.argmax(probs))
        p = probs[wid]
        p.backward()
    grad = words.grad[0]
    blank_id = vocab["[UNK]"] if blank == "unk" else vocab["[MASK]"]
    drops = []
    with torch.no_grad():
        for j in range(n):
            blanked = input_ids.clone()
            blanked[0, j] = blank_id
            drops.append(float(p.detach()) - float(probs_of(model(input_ids=blanked, **extra).logits)[wid]))
    if classifier:
        word = (model.config.id2label or {}).get(wid, f"LABEL_{wid}")
    else:
        word = vocab_list[wid]
    return {
        "word": word,
        "id": wid,
        "probability": float(p.detach()),
        "blank_token": vocab_list[blank_id],
        "gradient_norm": [float(v) for v in grad.norm(dim=-1)],
        "gradient_x_input": [float(v) for v in (grad * words[0].detach()).sum(dim=-1)],
        "blank_out": drops,
    }


def make_importance(cases, out_dir):
    import importance

    by_name = {c["name"]: c for c in cases}
    os.makedirs(os.path.join(out_dir, "importance"), exist_ok=True)
    for run in IMPORTANCE:
        case = by_name[run["case"]]
        if run["word"] is not None:
            ref.fail("importance fixtures here explain the top word or label only")
        scores = importance_scores(os.path.join(DOWNLOADED, case["model"]), case["text"], case["target"],
                                   run["blank"])
        with open(os.path.join(out_dir, case["name"] + ".json")) as f:
            report = json.load(f)
        # Flow rows hold values that are equal in exact arithmetic (tokens whose max flow is
        # bounded by the same cut) but differ by ~1e-15 in networkx's floating point; Spearman
        # ranks are discontinuous there. Round to 1e-10 so that such values rank as ties.
        for method in ("raw", "rollout", "flow"):
            report["relevance"][method] = [[round(x, 10) for x in row] for row in report["relevance"][method]]
        result = {**run, "text": case["text"], "model": case["model"], "target": case["target"],
                  "importance": scores, "evaluation": importance.evaluation(report, scores)}
        with open(os.path.join(out_dir, "importance", run["name"] + ".json"), "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")
        log(f"wrote importance/{run['name']}.json")


def rust_args(case, folder):
    args = ["--json", "--pretokenized", "--model", folder]
    if case.get("target") is not None:
        args += ["--target", str(case["target"])]
    if case.get("candidates"):
        args += ["--candidates", ",".join(case["candidates"]), "--top-k", str(case.get("top_k", 5))]
    return args + [case["text"]]


def compare(want, got, tol, path="", out=None):
    """Every difference between two reports: a list of (path, want, got)."""
    out = [] if out is None else out
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if path == "" and k in ("model", "device"):
                continue
            if k not in want or k not in got:
                out.append((f"{path}.{k}", want.get(k, "<absent>"), got.get(k, "<absent>")))
            else:
                compare(want[k], got[k], tol, f"{path}.{k}", out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append((f"{path} (length)", len(want), len(got)))
        for i, (a, b) in enumerate(zip(want, got)):
            compare(a, b, tol, f"{path}[{i}]", out)
    elif isinstance(want, float) or isinstance(got, float):
        if not (isinstance(got, (int, float)) and abs(float(want) - float(got)) <= tol):
            out.append((path, want, got))
    elif want != got:
        out.append((path, want, got))
    return out


def check_rust(binary, cases, model_root, tol):
    import subprocess

    bad = 0
    for case in cases:
        with open(os.path.join(FIXTURES, case["name"] + ".json")) as f:
            want = json.load(f)
        cmd = [binary] + rust_args(case, os.path.join(model_root, case["model"]))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            bad += 1
            print(f"{case['name']}: exit {proc.returncode}: {proc.stderr.strip()}")
            continue
        got = json.loads(proc.stdout)
        diffs = compare(want, got, tol)
        if diffs:
            bad += 1
            print(f"{case['name']}: {len(diffs)} difference(s) beyond {tol}:")
            for p, a, b in diffs[:20]:
                print(f"  {p}: reference {a!r}, rust {b!r}")
        else:
            maxdiff = max_abs_diff(want, got)
            print(f"{case['name']}: ok (largest difference {maxdiff:.2e})")
    return bad


def max_abs_diff(a, b):
    if isinstance(a, dict):
        return max([max_abs_diff(a[k], b[k]) for k in a if k not in ("model", "device") and k in b] or [0.0])
    if isinstance(a, list):
        return max([max_abs_diff(x, y) for x, y in zip(a, b)] or [0.0])
    if isinstance(a, float):
        return abs(a - b)
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=os.path.join(FIXTURES, "cases.json"))
    ap.add_argument("--out-dir", default=FIXTURES)
    ap.add_argument("--only", action="append", default=[], help="case name(s)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--model", help="single run: a checkpoint folder")
    ap.add_argument("--text")
    ap.add_argument("--target", type=int)
    ap.add_argument("--candidates", default="")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--importance", action="store_true", help="write the importance fixtures")
    ap.add_argument("--check-rust", metavar="BIN", help="compare BIN's reports with the fixtures")
    ap.add_argument("--model-root", default=DOWNLOADED, help="with --check-rust: folder of the checkpoints")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()

    if args.model:
        if not args.text:
            ap.error("--model needs --text")
        cands = [c for c in args.candidates.split(",") if c]
        try:
            report = run(args.model, args.text, args.target, cands, args.top_k)
        except ref.ReferenceError as e:
            print(f"real_reference: error: {e}", file=sys.stderr)
            sys.exit(1)
        text = json.dumps(report, indent=1) + "\n"
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        return

    with open(args.cases) as f:
        cases = json.load(f)
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        sys.exit("real_reference: duplicate case names")
    only = {n.strip() for group in args.only for n in group.split(",") if n.strip()}
    if only - set(names):
        sys.exit(f"real_reference: unknown case(s) {sorted(only - set(names))}; known: {names}")
    if only:
        cases = [c for c in cases if c["name"] in only]
    if args.check_rust:
        bad = check_rust(args.check_rust, cases, os.path.abspath(args.model_root), args.tolerance)
        sys.exit(1 if bad else 0)
    for model in sorted({c["model"] for c in cases}):
        ensure_model(model)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.importance:
        make_importance(cases, args.out_dir)
        return

    start = time.time()
    if args.jobs <= 1:
        for case in cases:
            name, secs = run_case(case, 0, args.out_dir)
            log(f"{name} done in {secs:.1f} s")
    else:
        cases = sorted(cases, key=lambda c: -len(c["text"].split()))  # longest first
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, c, 1, args.out_dir) for c in cases]
            for fut in as_completed(futures):
                name, secs = fut.result()
                log(f"{name} done in {secs:.1f} s")
    log(f"{len(cases)} case(s) in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
