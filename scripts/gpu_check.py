#!/usr/bin/env python3
"""The GPU check (run by scripts/gpu-check.sh on the lent GPU machine, in one invocation):

1. parity: every case of CASES (each family and task, --evaluate (LRP included), --mixing all,
   --all-positions, --label, --pair, --hide-special, generation with --flow, --correction
   and --mixing, batch mode, --attention) run by the CPU binary on the CPU and by the CUDA
   binary on the GPU, and every number of the two JSON reports compared (TOLERANCE below);
   the Python package built with the cuda feature, against the CPU command line;
2. throughput: a bert-base-shaped masked LM (random weights from transformers, seed 0),
   batch mode on CUDA producing raw, rollout and flow for every line, against torch's own
   CUDA forward with output_attentions (eager, batch 1), at n = 128 and n = 512.

Writes parity.md, parity.json, throughput.md, throughput.json and the logs into OUT.
--dry-run runs it all on the CPU (the CPU binary in both roles, torch on the CPU, fewer
lines): a check of the script itself on a machine without a GPU, whose numbers mean nothing.

Usage: python3 scripts/gpu_check.py --cpu BIN --cuda BIN [--wheel-dir DIR] OUT [--dry-run]
       [--skip-parity] [--skip-throughput] [--repeat K] [--budget S]
"""

import argparse
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(REPO, "models")

# Every number of the CUDA report must be within ATOL + RTOL·|cpu| of the CPU's. The models
# run in f32 on both, but cuBLAS and the CPU's gemm add in different orders, so each
# product differs in its last bits (f32: 6e-8 relative) and the differences grow through
# the layers: 1e-4 leaves a margin of about 100× over what reaches an attention
# probability after a few layers, and every map is built from those probabilities in f64.
ATOL, RTOL = 1e-4, 1e-4
# Gradients are not bounded like probabilities: compared relative to their array's largest
# magnitude.
GRADIENT_RTOL = 1e-3
# Rank statistics (Spearman correlations, ERASER's AOPC, which erases tokens in the maps'
# order) move by a whole step when two near-equal values swap places: one swap of adjacent
# ranks among n = 10 tokens moves a Spearman correlation by 12 / (n (n² − 1)) = 0.012.
# They are compared at RANK_ATOL, and each one beyond it is listed.
RANK_ATOL = 0.05


def case(name, model, *args, stdin_lines=None, attention=None):
    return {"name": name, "model": model, "args": list(args), "lines": stdin_lines, "attention": attention}


MASKED = [("tiny-bert-modern", "[MASK]"), ("tiny-roberta-mlm", "<mask>"), ("tiny-xlmr-mlm", "<mask>"),
          ("tiny-distilbert-mlm", "[MASK]"), ("tiny-albert-mlm", "[MASK]"), ("tiny-electra-mlm", "[MASK]"),
          ("tiny-bert-legacy", "[MASK]"), ("tiny-modernbert-mlm", "[MASK]"), ("tiny-deberta-mlm", "[MASK]"),
          ("tiny-deberta-v2-mlm", "[MASK]")]
CLASSIFIERS = ["tiny-bert-cls", "tiny-roberta-cls", "tiny-distilbert-cls", "tiny-albert-cls",
               "tiny-electra-cls", "agreement-classifier", "tiny-modernbert-cls", "tiny-modernbert-mean",
               "tiny-deberta-cls"]
CAUSAL = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen2-window", "tiny-mistral", "tiny-qwen3",
          "tiny-gemma", "tiny-gemma2", "tiny-gemma3", "tiny-gemma3-mm", "tiny-phi3"]
# Decoders read as classifiers: score at the last token; their vocabularies have no [UNK].
DECODER_CLASSIFIERS = ["tiny-llama-cls", "tiny-qwen2-cls", "tiny-mistral-cls", "tiny-qwen3-cls",
                       "tiny-gemma-cls", "tiny-gemma2-cls", "tiny-gemma3-cls", "tiny-phi3-cls"]

CASES = (
    [case(f"{m} masked LM, --evaluate --mixing all", m, "--evaluate", "--mixing", "all",
          f"the book {mask} here on the table .") for m, mask in MASKED]
    + [case(f"{m} classifier, --evaluate --mixing all", m, "--evaluate", "--mixing", "all",
            "the book is here on the table .") for m in CLASSIFIERS]
    + [case(f"{m} decoder classifier, --evaluate --blank pad --mixing all", m, "--evaluate", "--blank",
            "pad", "--mixing", "all", "the book is here on the table .") for m in DECODER_CLASSIFIERS]
    + [
        case("tiny-bert-cls, --pair --label 1 --evaluate", "tiny-bert-cls", "--pair", "a book on the table",
             "--label", "1", "--evaluate", "the book is here"),
        case("tiny-bert-modern, --all-positions", "tiny-bert-modern", "--all-positions",
             "the cat sat on the [MASK] ."),
        case("tiny-bert-modern, --hide-special --mixing norm,alti", "tiny-bert-modern", "--hide-special",
             "--mixing", "norm,alti", "the cat sat on the [MASK] ."),
        case("tiny-bert-modern, --fusion max --residual 0.3", "tiny-bert-modern", "--fusion", "max",
             "--residual", "0.3", "the cat sat on the [MASK] ."),
        case("tiny-electra-disc, --target 3 --mixing all", "tiny-electra-disc", "--target", "3",
             "--mixing", "all", "the book is here"),
        case("tiny-bert-encoder, --target 2 --mixing norm,alti,value-zeroing", "tiny-bert-encoder",
             "--target", "2", "--mixing", "norm,alti,value-zeroing", "the book is here"),
    ]
    + [case(f"{m} generation, --generate 4 --flow --mixing all", m, "--generate", "4", "--flow",
            "--mixing", "all", "the book is") for m in CAUSAL]
    + [case(f"{m} generation, --generate 4 --correction --flow", m, "--generate", "4", "--correction",
            "--flow", "the cat sat") for m in ["tiny-gpt2", "tiny-llama"]]
    # Every generated token's importance (gradients, blank-out, integrated gradients, AttnLRP and
    # CP-LRP: the rules of src/model/rules.rs on the device), correlations and ERASER.
    + [case(f"{m} generation, --generate 3 --evaluate --mixing norm", m, "--generate", "3", "--evaluate",
            "--mixing", "norm", "the book is") for m in ["tiny-gpt2", "tiny-llama", "tiny-gemma2"]]
    + [
        case("batch mode, tiny-bert-modern --evaluate --mixing all", "tiny-bert-modern", "--evaluate",
             "--mixing", "all", stdin_lines=[
                 {"text": "the keys to the cabinet [MASK] on the table .", "candidates": ["is", "are"]},
                 {"text": "the cat sat on the [MASK] ."},
                 {"text": "no mask here"},
                 {"text": "the author talked to sara about [MASK] book", "target": 7}]),
        case("batch mode, agreement-classifier --evaluate", "agreement-classifier", "--evaluate",
             stdin_lines="data/agreement-heldout.jsonl:40"),
        case("--attention (a .npy stack) on the device", None, "--all-positions", "--target", "4",
             attention=True),
    ]
)


def log(*a):
    print("gpu-check:", *a, file=sys.stderr, flush=True)


def run(cmd, timeout=300, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p, time.perf_counter() - t0


def report_of(binary, device, c, work):
    """The case's JSON report(s) from one binary on one device: a dict, or a list (batch)."""
    args = list(c["args"])
    if c["model"]:
        args = ["--model", os.path.join(MODELS, c["model"])] + args
    if c["attention"]:
        args = ["--attention", os.path.join(work, "stack.npy")] + args
    if c["lines"] is not None:
        out = os.path.join(work, f"batch-{device}.jsonl")
        p, took = run([binary, "--device", device, *args, "--input", lines_file(c, work), "--output", out])
        if p.returncode != 0:
            return None, took, p.stderr.strip()[-600:]
        return [json.loads(l) for l in open(out)], took, ""
    p, took = run([binary, "--device", device, *args, "--json"])
    if p.returncode != 0:
        return None, took, p.stderr.strip()[-600:]
    return json.loads(p.stdout), took, ""


def lines_file(c, work):
    path = os.path.join(work, "lines.jsonl")
    if isinstance(c["lines"], str):
        source, count = c["lines"].split(":")
        lines = [l for l in open(os.path.join(REPO, source)) if l.strip()][: int(count)]
        open(path, "w").writelines(lines)
    else:
        open(path, "w").write("".join(json.dumps(l) + "\n" for l in c["lines"]))
    return path


def field(path):
    """The field a number belongs to, indices dropped: relevance.flow, importance.blank_out..."""
    return re.sub(r"\[\d+\]", "", path).lstrip(".")


def is_rank(path):
    return path.startswith("evaluation") or ".evaluation" in path


def is_gradient(path):
    """An importance score made of gradients (not a correlation with one)."""
    return not is_rank(path) and "gradient" in path.rsplit(".", 1)[-1]


def noise_only(path):
    """gradient_sum_abs, the paper's |Σ_d ∂p/∂e_d|, is zero in exact arithmetic behind a
    LayerNorm: what both devices print is rounding (1e-7 of a gradient norm), and the
    correlations with it rank that rounding. The score itself is compared against the scale
    of the gradient it sums (see compare); its correlations are not compared."""
    return is_rank(path) and "gradient_sum_abs" in path


def compare(cpu, cuda, path="", out=None):
    """Every difference between two reports: {'max': {field: diff}, 'bad': [...]}"""
    if out is None:
        out = {"max": {}, "bad": []}
    if isinstance(cpu, dict) and isinstance(cuda, dict):
        if set(cpu) != set(cuda):
            out["bad"].append(f"{path}: keys differ: {sorted(set(cpu) ^ set(cuda))}")
        for k in cpu.keys() & cuda.keys():
            if k == "device" or noise_only(f"{path}.{k}"):
                continue
            if k == "gradient_sum_abs" and isinstance(cpu.get("gradient_norm"), list):
                scale = max(abs(x) for x in cpu["gradient_norm"])
                for i, (a, b) in enumerate(zip(cpu[k], cuda[k])):
                    number(a, b, f"{path}.{k}[{i}]", out, GRADIENT_RTOL * max(scale, 1e-12))
                continue
            compare(cpu[k], cuda[k], f"{path}.{k}", out)
    elif isinstance(cpu, list) and isinstance(cuda, list):
        if len(cpu) != len(cuda):
            out["bad"].append(f"{path}: {len(cpu)} items on the CPU, {len(cuda)} on CUDA")
            return out
        scale = max([abs(x) for x in cpu if isinstance(x, (int, float)) and not isinstance(x, bool)] or [0.0])
        for i, (a, b) in enumerate(zip(cpu, cuda)):
            if isinstance(a, (int, float)) and not isinstance(a, bool) and is_gradient(path):
                number(a, b, f"{path}[{i}]", out, GRADIENT_RTOL * max(scale, 1e-12))
            else:
                compare(a, b, f"{path}[{i}]", out)
    elif isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and isinstance(cuda, (int, float)):
        tol = RANK_ATOL if is_rank(path) else ATOL + RTOL * abs(cpu)
        number(cpu, cuda, path, out, tol)
    elif cpu != cuda:
        out["bad"].append(f"{path}: {cpu!r} on the CPU, {cuda!r} on CUDA")
    return out


def number(a, b, path, out, tol):
    diff = abs(a - b)
    if not (math.isfinite(a) and math.isfinite(b)):
        diff = 0.0 if a == b else math.inf
    f = field(path)
    out["max"][f] = max(out["max"].get(f, 0.0), diff)
    if diff > tol:
        out["bad"].append(f"{path}: {a!r} on the CPU, {b!r} on CUDA (tolerance {tol:.1e})")


def write_stack(work):
    """A 4-layer, 3-head, 9-token attention stack (softmax rows, seed 3) for --attention."""
    import numpy as np

    rng = np.random.default_rng(3)
    logits = rng.normal(0.0, 2.0, size=(4, 3, 9, 9))
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.save(os.path.join(work, "stack.npy"), (e / e.sum(-1, keepdims=True)).astype(np.float32))


PARITY_HEAD = ["| case | CUDA vs CPU | largest difference (field) | rank statistics | time CPU / CUDA |",
               "|---|---|---|---|---|"]
THROUGHPUT_HEAD = ["| n | lines | torch forward, lines/s | bert-explain batch on CUDA, lines/s | ratio | "
                   "bert-explain on the CPU, lines/s |", "|---|---|---|---|---|---|"]


def save(out, name, head, rows, results, intro=""):
    """Writes NAME.md and NAME.json; called after every row, so a run stopped by its time
    limit still leaves what it measured."""
    open(os.path.join(out, f"{name}.md"), "w").write(intro + "\n".join(head + rows) + "\n")
    json.dump(results, open(os.path.join(out, f"{name}.json"), "w"), indent=1)


def parity_intro():
    return (f"Tolerance: |cuda − cpu| ≤ {ATOL:g} + {RTOL:g}·|cpu| for every number; gradients "
            f"{GRADIENT_RTOL:g} × their array's largest magnitude; rank statistics (Spearman, "
            f"ERASER) {RANK_ATOL:g}; gradient_sum_abs (zero in exact arithmetic: rounding on both) "
            f"{GRADIENT_RTOL:g} × the largest gradient norm, its correlations not compared.\n\n")


def parity(args, work, cuda_device):
    write_stack(work)
    rows, results = [], []
    for c in CASES:
        cpu, t_cpu, err_cpu = report_of(args.cpu, "cpu", c, work)
        gpu, t_gpu, err_gpu = report_of(args.cuda, cuda_device, c, work)
        if cpu is None or gpu is None:
            status = "FAIL (exit)"
            detail = f"cpu: {err_cpu}" if cpu is None else f"cuda: {err_gpu}"
            diff = {"max": {}, "bad": [detail]}
        else:
            diff = compare(cpu, gpu)
            status = "equal" if not diff["bad"] else "FAIL"
        worst = max(((v, k) for k, v in diff["max"].items() if not is_rank(k)), default=(0.0, "-"))
        rank = max((v for k, v in diff["max"].items() if is_rank(k)), default=None)
        results.append({"case": c["name"], "status": status, "max_by_field": diff["max"],
                        "problems": diff["bad"][:20], "seconds": {"cpu": t_cpu, "cuda": t_gpu}})
        rank_text = "-" if rank is None else f"{rank:.1e}"
        rows.append(f"| {c['name']} | {status} | {worst[0]:.1e} ({worst[1]}) | {rank_text} | "
                    f"{t_cpu:.2f} s / {t_gpu:.2f} s |")
        log(f"{status:12} {c['name']}" + ("" if status == "equal" else f": {diff['bad'][:3]}"))
        save(args.out, "parity", PARITY_HEAD, rows, results, parity_intro())
    results.append(python_package(args, work, cuda_device, rows))
    save(args.out, "parity", PARITY_HEAD, rows, results, parity_intro())
    return results


def python_package(args, work, cuda_device, rows):
    """The wheel built with the cuda feature, installed into a scratch folder, against the
    CPU command line's report of the same text."""
    name = "Python package (cuda feature): Explainer.explain(..., evaluate, mixing='all')"
    wheels = [f for f in os.listdir(args.wheel_dir or work) if f.endswith(".whl")] if args.wheel_dir else []
    if not wheels:
        rows.append(f"| {name} | not run: no wheel given | - | - | - |")
        return {"case": name, "status": "not run", "problems": ["no wheel"]}
    target = os.path.join(work, "site")
    p, _ = run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", target,
                os.path.join(args.wheel_dir, wheels[0])])
    if p.returncode != 0:
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "pip failed"
        rows.append(f"| {name} | not run: {why} | - | - | - |")
        return {"case": name, "status": "not run", "problems": [p.stderr[-600:]]}
    model = os.path.join(MODELS, "tiny-bert-modern")
    text = "the cat sat on the [MASK] ."
    code = ("import json, sys, bert_explain; e = bert_explain.Explainer(sys.argv[1], device=sys.argv[2]); "
            "print(json.dumps(e.explain(sys.argv[3], evaluate=True, mixing='all')))")
    env = dict(os.environ, PYTHONPATH=target)
    p, t_py = run([sys.executable, "-c", code, model, cuda_device, text], env=env)
    cpu, t_cpu, _ = report_of(args.cpu, "cpu", case("", "tiny-bert-modern", "--evaluate", "--mixing", "all", text),
                              work)
    if p.returncode != 0 or cpu is None:
        rows.append(f"| {name} | FAIL (exit) | - | - | - |")
        return {"case": name, "status": "FAIL (exit)", "problems": [p.stderr[-600:]]}
    diff = compare(cpu, json.loads(p.stdout))
    status = "equal" if not diff["bad"] else "FAIL"
    worst = max(((v, k) for k, v in diff["max"].items() if not is_rank(k)), default=(0.0, "-"))
    rank = max((v for k, v in diff["max"].items() if is_rank(k)), default=0.0)
    rows.append(f"| {name} | {status} | {worst[0]:.1e} ({worst[1]}) | {rank:.1e} | {t_cpu:.2f} s / {t_py:.2f} s |")
    log(f"{status:12} {name}")
    return {"case": name, "status": status, "max_by_field": diff["max"], "problems": diff["bad"][:20]}


# ------------------------------------------------------------------------------ throughput

WORDS = 30000


def bert_base(folder, peaked=False):
    """bert-base-uncased's shape with random weights (seed 0), and a vocabulary of made-up
    words w0 … w29999; `peaked` scales the query and key weights by 8 (sharp attention)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    # Eager attention: the implementation that hands back its probabilities.
    model = BertForMaskedLM(BertConfig())
    model.set_attn_implementation("eager")
    if peaked:
        with torch.no_grad():
            for layer in model.bert.encoder.layer:
                layer.attention.self.query.weight.mul_(8.0)
                layer.attention.self.key.weight.mul_(8.0)
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + [f"w{i}" for i in range(WORDS)]
    vocab += [f"x{i}" for i in range(BertConfig().vocab_size - len(vocab))]
    open(os.path.join(folder, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
    return model


def texts(n, count, seed):
    """`count` texts of n tokens with [CLS] and [SEP], one [MASK] in the middle."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [f"w{rng.randrange(WORDS)}" for _ in range(n - 2)]
        words[(n - 2) // 2] = "[MASK]"
        out.append(" ".join(words))
    return out


def torch_rate(model, lines, n, device):
    """torch's forward with output_attentions (eager, batch 1), lines per second."""
    import torch

    model = model.to(device).eval()
    ids = [torch.randint(5, 5 + WORDS, (1, n), device=device) for _ in range(lines)]
    with torch.no_grad():
        for x in ids[:5]:
            attentions = model(input_ids=x, output_attentions=True).attentions
            assert len(attentions) == 12 and attentions[0].shape[-1] == n, "no attentions came back"
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x in ids:
            model(input_ids=x, output_attentions=True)
        if device == "cuda":
            torch.cuda.synchronize()
    return lines / (time.perf_counter() - t0)


def explain_rate(binary, device, folder, lines, work, timeout):
    """bert-explain's batch mode: (its own sentences/s after loading, the whole process's)."""
    path = os.path.join(work, "throughput.jsonl")
    open(path, "w").write("".join(json.dumps({"text": t}) + "\n" for t in lines))
    out = os.path.join(work, "throughput-out.jsonl")
    try:
        p, took = run([binary, "--device", device, "--model", folder, "--input", path, "--output", out],
                      timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None, f"stopped after {timeout} s"
    if p.returncode != 0:
        return None, None, p.stderr.strip()[-400:]
    summary = p.stdout.strip().splitlines()[-1]
    m = re.search(r"([\d.]+) sentences/s", summary)
    reports = [json.loads(l) for l in open(out)]
    bad = [r for r in reports if not (isinstance(r.get("relevance"), dict) and r["relevance"].get("flow"))]
    if len(reports) != len(lines) or bad:
        why = json.dumps(bad[0])[:400] if bad else f"{len(reports)} records for {len(lines)} lines"
        return None, None, f"{summary}; {len(bad)} records without flow, the first: {why}"
    return float(m.group(1)), len(lines) / took, summary


def throughput(args, work, cuda_device, dry, deadline):
    """Each row saved as soon as it is measured; a step that fails or would start past the
    deadline is recorded as such and the rest go on."""
    rows, results = [], []
    torch_device = "cuda" if not dry else "cpu"
    plan = [(128, 200, 20), (512, 100, 10)] if not dry else [(128, 6, 3), (512, 3, 2)]
    folder = os.path.join(work, "bert-base")
    model = bert_base(folder)
    fmt = lambda v: "-" if v is None else f"{v:.1f}"
    # With --repeat K, torch and bert-explain take turns K times at each n (the CPU once), so
    # that each ratio pairs two measurements made a few seconds apart.
    for run, (n, count, cpu_count) in itertools.product(range(args.repeat), plan):
        label = f"{n}" if args.repeat == 1 else f"{n} (run {run + 1})"
        if time.perf_counter() > deadline:
            rows.append(f"| {label} | {count} | not run: out of time | - | - | - |")
            save(args.out, "throughput", THROUGHPUT_HEAD, rows, results)
            continue
        lines = texts(n, count, seed=n)
        t_rate = torch_rate(model, count, n, torch_device)
        cuda_rate, cuda_whole, summary = explain_rate(args.cuda, cuda_device, folder, lines, work, 240)
        cpu_rate, cpu_summary = None, None
        if run == 0:
            cpu_rate, _, cpu_summary = explain_rate(args.cpu, "cpu", folder, lines[:cpu_count], work, 120)
        ratio = "-" if cuda_rate is None else f"{cuda_rate / t_rate:.2f}"
        rows.append(f"| {label} | {count} | {t_rate:.1f} | {fmt(cuda_rate)} ({fmt(cuda_whole)} whole process) | "
                    f"{ratio} | {fmt(cpu_rate)} |")
        results.append({"n": n, "run": run + 1, "lines": count, "torch_lines_per_s": t_rate,
                        "cuda_lines_per_s": cuda_rate, "cuda_whole_process_lines_per_s": cuda_whole,
                        "cuda_summary": summary, "cpu_lines_per_s": cpu_rate, "cpu_summary": cpu_summary})
        log(f"n = {n}, run {run + 1}: torch {t_rate:.1f}/s, bert-explain on {cuda_device} {summary}; "
            f"on the CPU {cpu_summary or 'not run again'}")
        save(args.out, "throughput", THROUGHPUT_HEAD, rows, results)
    # Sharp attention (issue 31): the same shape, query and key weights × 8, where flow
    # needs a search for nearly every flow and the host's reports are most of the time.
    peaked = os.path.join(work, "bert-base-peaked")
    for n, count, timeout in ([(128, 20, 90), (512, 6, 150)] if not dry else [(128, 2, 90), (512, 1, 150)]):
        if time.perf_counter() > deadline:
            rows.append(f"| {n}, query and key × 8 | - | not run: out of time | - | - | - |")
            save(args.out, "throughput", THROUGHPUT_HEAD, rows, results)
            continue
        if not os.path.exists(peaked):  # made only when a step runs
            bert_base(peaked, peaked=True)
        lines = texts(n, count, seed=7)
        rate, whole, summary = explain_rate(args.cuda, cuda_device, peaked, lines, work, timeout)
        results.append({"n": n, "peaked": True, "lines": len(lines), "cuda_lines_per_s": rate,
                        "cuda_summary": summary})
        rows.append(f"| {n}, query and key × 8 | {len(lines)} | - | {fmt(rate)} ({summary}) | - | - |")
        log(f"peaked, n = {n}: {summary}")
        save(args.out, "throughput", THROUGHPUT_HEAD, rows, results)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--wheel-dir")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-parity", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="torch and bert-explain in turn this many times at each n (default 1)")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds after which no further throughput step starts (default 420)")
    ap.add_argument("out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cuda_device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:
        # No driver here: the CPU binary plays both parts, and the CUDA wheel cannot load.
        args.cuda, args.wheel_dir = args.cpu, None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        results = [] if args.skip_parity else parity(args, work, cuda_device)
        failed = sum(1 for r in results if r["status"] not in ("equal", "not run"))
        if not args.skip_throughput:
            try:
                throughput(args, work, cuda_device, args.dry_run, t0 + args.budget)
            except Exception as e:  # recorded, so that the parity results still come back
                log(f"throughput stopped: {type(e).__name__}: {e}")
                open(os.path.join(args.out, "throughput-error.txt"), "w").write(f"{type(e).__name__}: {e}\n")
                failed += 1
    log(f"done in {time.perf_counter() - t0:.0f} s; {failed} step(s) failed; results in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
