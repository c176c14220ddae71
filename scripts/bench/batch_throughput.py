#!/usr/bin/env python3
"""Batch mode against torch on the CPU, per line, side by side in one run (issue 64, item 4).

For each model and each length n, on the same texts and the same thread count T, it measures:

- torch, batch 1: transformers' forward with output_attentions=True (eager attention,
  torch.no_grad(), torch.set_num_threads(T)), one line at a time. For a masked LM that is
  the whole BertForMaskedLM forward, whose head computes logits at every position (as the
  usual script gets them); bert-explain's head reads only the target position;
- torch, batch b (--batch-sizes, default 2, 4, 8, 16, 32): the same forward on b lines at
  once, padded by the tokenizer with the attention mask. All lines of a run have the same
  token length, so there is no padding (checked: the attention mask is all ones). Whole
  batches only: ceil(lines / b) batches, so b = 32 times 32 lines even when --lines is 24
  (more lines of the same length and kind). "Best batch" is the batch size, 1 included,
  with the least time per line;
- torch + NumPy rollout, batch 1: the forward, then the usual script (Abnar & Zuidema's
  compute_joint_attention): the attentions to one NumPy array [L, H, n, n], the mean over
  heads, 0.5·A + 0.5·I, each row divided by its sum (f64, as np.eye promotes it), and the
  product over the layers, every layer's joint attention kept. Twice: with NumPy's BLAS on T
  threads like everything else, and on 1 thread (OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1 for
  that process), since NumPy's BLAS threads and torch's OpenMP threads, each waiting busily
  for work after a call, contend for the cores when the two alternate; the rollout's own part
  of the time is timed too;
- torch, batch 1, encoder only (masked LMs only; a detail, not in the main table):
  model.bert(...) with output_attentions, the forward without the masked-LM head;
- bert-explain's batch mode, `--model M --input FILE --output FILE` with no other flag: raw
  attention, rollout and flow for every line, at the line's [MASK] (an encoder's default).
  The whole process is timed on the N lines, and twice on a 1-line input (the first line of
  the same file), once before and once after; per line = (t_N − mean(t_1)) / (N − 1): the
  load, the process and the first line are subtracted (as the issue's "the whole process less
  its load"). The process's own summary ("in S s": from after the load to the last report,
  every line included) is shown beside it as S / N. Every report is checked: N records, raw,
  rollout and flow present, exactly n tokens.

Each torch configuration runs in a process of its own (the venv's python, --python), which
loads the model, tokenizes every line (outside the timing), checks every line's length, runs
one untimed batch-1 forward (with the rollout for the rollout row), then times the
configuration with time.perf_counter over all its lines. Peak resident memory: torch's is
resource.getrusage(RUSAGE_SELF).ru_maxrss of that process (Python, torch, the model and the
run; the report's header gives the peak of a process that imports torch and transformers
and loads nothing); bert-explain's is /usr/bin/time -v's "Maximum resident set size" of the
N-line process (os.wait4's rusage where /usr/bin/time is missing). Beside each measured
process the script notes how busy the rest of the machine was meanwhile (/proc/stat's busy
time less the process's own CPU time, and the hypervisor's steal, each over the wall time);
the report says when another process took more than 0.1 of a core, since such numbers are
not clean.

Threads: OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS and RAYON_NUM_THREADS are set
to T for every process; torch.set_num_threads(T); and where T is less than the cores this
process may use, every process runs under `taskset -c 0-(T-1)` (bert-explain's batch mode
sizes its pool from the cores it may use, not from RAYON_NUM_THREADS).

Models (--models):
- bert-base: a bert-base-shaped BertForMaskedLM (12 layers, hidden 768, 12 heads,
  intermediate 3072, vocab 30522, 512 positions) with random weights (torch.manual_seed(0),
  the recipe of scripts/gpu_check.py), and a WordPiece vocab.txt of [PAD] [UNK] [CLS] [SEP]
  [MASK], w0 … w29999 and x-words up to 30522; made once into --models-dir (default
  target/bench-models/, git-ignored) and reused while its stamp matches;
- minilm: the real all-MiniLM-L6-v2 (BertModel, no masked-LM head: 6 layers, hidden 384, 12
  heads), models/downloaded/all-MiniLM-L6-v2 or $BERT_EXPLAIN_MINILM, fetched with
  scripts/fetch-minilm.sh when absent;
- any other value: a folder holding a BERT checkpoint with a vocab.txt.
Texts: n − 2 words drawn (seeded by n) from the vocabulary's whole words of lowercase ASCII
letters and digits (each one token: in the vocabulary, and not split by BERT's basic
tokenizer), [MASK] at word (n − 2) // 2; so each line is [CLS], n − 2 words, [SEP]: n tokens,
checked by torch's tokenizer and in bert-explain's reports. --mixed adds a row per n whose
lines are n/4 … n tokens (uniform, seeded), in input order, padded to the longest of each
batch.

Not building anything: --bert-explain (default target/release/bert-explain) is used as it
is; the header says when it is older than the newest file under src/.

Usage: python3 scripts/bench/batch_throughput.py [--threads T] [--n 128,512]
           [--lines 128=24,512=8,minilm:128=96,minilm:512=32 | --lines 10]
           [--models bert-base,minilm] [--batch-sizes 1,2,4,8,16,32] [--mixed]
           [--bert-explain PATH] [--python PATH] [--models-dir DIR] [--timeout S] [--json FILE]
           [--quick]
--quick: a smoke run (a 2-layer, hidden-64 random BERT at n = 16, 3 lines, batch sizes 1 and 2,
every torch configuration in one process but the BLAS-1 rollout's, so peak RSS is shared):
about 15 seconds, numbers meaningless. Prints the Markdown report on stdout, progress on
stderr; exits 1 when a bert-explain run failed (the table says how). The default run took
7.3–7.9 minutes on a 2-core AMD EPYC. Needs only the system python3 (torch runs in --python).
"""

import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "target", "release", "bert-explain")
PYTHON = os.path.join(REPO, ".venv-reference", "bin", "python")
MODELS_DIR = os.path.join(REPO, "target", "bench-models")
MINILM = os.path.join(REPO, "models", "downloaded", "all-MiniLM-L6-v2")

SEED = 0
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = 30000
# bert-base-uncased's shape (transformers' BertConfig defaults, spelled out).
SHAPES = {
    "bert-base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                      intermediate_size=3072, vocab_size=30522, max_position_embeddings=512),
    "bert-tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                      intermediate_size=128, vocab_size=30522, max_position_embeddings=512),
}
DEFAULT_LINES = "128=24,512=8,minilm:128=96,minilm:512=32"
T0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the torch side
# Runs in --python (the venv with torch and transformers): `batch_throughput.py --worker SPEC`.

def make_model(spec):
    """A BertForMaskedLM of SHAPES[spec["shape"]] with random weights (seed SEED), and its vocab."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    folder = spec["folder"]
    torch.manual_seed(SEED)
    model = BertForMaskedLM(BertConfig(**SHAPES[spec["shape"]]))
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    vocab = SPECIALS + [f"w{i}" for i in range(WORDS)]
    vocab += [f"x{i}" for i in range(model.config.vocab_size - len(vocab))]
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    return {"parameters": sum(p.numel() for p in model.parameters())}


def usual_rollout(attentions):
    """Abnar & Zuidema's compute_joint_attention, as the usual script runs it on one line."""
    import numpy as np

    att = np.asarray([a[0].numpy() for a in attentions])  # [L, H, n, n], f32
    att = att.mean(axis=1)
    n = att.shape[-1]
    aug = 0.5 * att + 0.5 * np.eye(n)[None]  # f64 from here
    aug = aug / aug.sum(axis=-1)[..., None]
    joint = np.zeros(aug.shape)
    joint[0] = aug[0]
    for i in range(1, aug.shape[0]):
        joint[i] = aug[i].dot(joint[i - 1])
    return joint


def torch_config(model, tokenizer, cfg, torch):
    """One configuration: per-line seconds over whole batches, after one untimed forward."""
    texts, lengths, batch = cfg["texts"], cfg["lengths"], cfg["batch"]
    encoder_only = cfg["mode"] == "encoder"
    forward = model.bert if encoder_only else model
    rollout = cfg["mode"] == "rollout"
    batches = []
    for i in range(0, len(texts), batch):
        enc = tokenizer(texts[i:i + batch], padding=True, return_tensors="pt")
        got = enc["attention_mask"].sum(dim=1).tolist()
        if got != lengths[i:i + batch]:
            raise SystemExit(f"token lengths {got} where the texts were made for {lengths[i:i + batch]}")
        if cfg["equal"] and not bool(enc["attention_mask"].all()):
            raise SystemExit("padding in a batch of equal-length lines")
        batches.append(dict(enc))
    with torch.no_grad():
        warm = dict(tokenizer(texts[:1], return_tensors="pt"))
        out = forward(**warm, output_attentions=True)
        if out.attentions is None or len(out.attentions) != model.config.num_hidden_layers:
            raise SystemExit("no attentions came back")
        if rollout:
            usual_rollout(out.attentions)
        times, in_rollout = [], 0.0
        for enc in batches:
            start = time.perf_counter()
            out = forward(**enc, output_attentions=True)
            if rollout:
                mid = time.perf_counter()
                usual_rollout(out.attentions)
                in_rollout += time.perf_counter() - mid
            times.append(time.perf_counter() - start)
            assert out.attentions[0].shape[-1] == enc["input_ids"].shape[1]
    result = {"lines": len(texts), "seconds": sum(times), "per_line": sum(times) / len(texts),
              "batch_seconds": times}
    if rollout:
        result["rollout_per_line"] = in_rollout / len(texts)
    return result


def worker(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    if spec["task"] == "make-model":
        result = make_model(spec)
    elif spec["task"] == "baseline":
        import resource

        import numpy  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        from transformers import AutoModel, BertTokenizerFast  # noqa: F401

        result = {"max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    else:
        import resource

        import numpy
        import torch
        import transformers
        from transformers import AutoModel, AutoModelForMaskedLM, BertTokenizerFast

        torch.set_num_threads(spec["threads"])
        folder = spec["model"]
        with open(os.path.join(folder, "config.json")) as f:
            archs = json.load(f).get("architectures") or []
        cls = AutoModelForMaskedLM if any("MaskedLM" in a for a in archs) else AutoModel
        model = cls.from_pretrained(folder, attn_implementation="eager").float().eval()
        tokenizer = BertTokenizerFast.from_pretrained(folder)
        result = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                               "numpy": numpy.__version__, "python": platform.python_version()},
                  "torch_threads": torch.get_num_threads(), "class": type(model).__name__,
                  "configs": []}
        for cfg in spec["configs"]:
            if cfg["mode"] == "encoder" and not hasattr(model, "bert"):
                result["configs"].append({"skipped": "no encoder apart from a head"})
                continue
            result["configs"].append(torch_config(model, tokenizer, cfg, torch))
        result["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RESULT " + json.dumps(result), flush=True)


# ------------------------------------------------------------------------------- the driver

def env_for(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[k] = str(threads)
    env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               NO_COLOR="1")
    return env


def pin(threads):
    """taskset onto the first `threads` cores this process may use, where that is fewer."""
    cores = sorted(os.sched_getaffinity(0))
    if threads >= len(cores) or not shutil.which("taskset"):
        return []
    return ["taskset", "-c", ",".join(str(c) for c in cores[:threads])]


def run_worker(args, spec, work, label, blas_threads=None):
    """A torch process; `blas_threads`: NumPy's BLAS threads where not the others' count."""
    path = os.path.join(work, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    threads = spec.get("threads", args.threads)
    env = env_for(threads)
    if blas_threads is not None:
        env.update(OPENBLAS_NUM_THREADS=str(blas_threads), MKL_NUM_THREADS=str(blas_threads))
    _, p, _, others = time_v(pin(threads) + [args.python, os.path.abspath(__file__), "--worker", path],
                             env, 24 * 3600, use_time=False)
    results = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not results:
        raise RuntimeError(f"{label}: the torch process failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    return dict(json.loads(results[-1][len("RESULT "):]), others=others)


def ensure_random_bert(args, shape, work):
    folder = os.path.join(args.models_dir, f"{shape}-random-seed{SEED}")
    stamp = {"shape": SHAPES[shape], "seed": SEED, "words": WORDS, "recipe": 1}
    stamp_path = folder + ".stamp.json"
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp and os.path.exists(os.path.join(folder, "vocab.txt")):
                return folder
    except (OSError, ValueError):
        pass
    log(f"making {folder} (random weights, seed {SEED})")
    shutil.rmtree(folder, ignore_errors=True)
    run_worker(args, {"task": "make-model", "shape": shape, "folder": folder, "threads": args.threads},
               work, f"making {shape}")
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return folder


def ensure_minilm():
    folder = os.environ.get("BERT_EXPLAIN_MINILM", MINILM)
    if not os.path.exists(os.path.join(folder, "config.json")):
        log(f"fetching all-MiniLM-L6-v2 into {folder}")
        subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-minilm.sh"), folder], check=True)
    return folder


def model_folder(args, name, work):
    if name in SHAPES:
        return ensure_random_bert(args, name, work), f"{name}-shaped masked LM, random weights (seed {SEED})"
    if name == "minilm":
        return ensure_minilm(), "all-MiniLM-L6-v2 (real, no masked-LM head)"
    return os.path.abspath(name), name


def whole_words(folder):
    """Vocabulary entries that BERT's tokenizer keeps as one token on their own."""
    with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
        vocab = [l.rstrip("\n") for l in f]
    return [w for w in vocab if re.fullmatch(r"[a-z0-9]+", w)]


def make_texts(words, lengths, seed):
    rng = random.Random(seed)
    out = []
    for n in lengths:
        body = [rng.choice(words) for _ in range(n - 2)]
        body[(n - 2) // 2] = "[MASK]"
        out.append(" ".join(body))
    return out


def busy_seconds():
    """CPU seconds the whole machine has spent busy (/proc/stat: user, nice, system, irq,
    softirq), and stolen by the hypervisor (steal)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None, None
    hz = os.sysconf("SC_CLK_TCK")
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, (v[7] if len(v) > 7 else 0) / hz


def time_v(cmd, env, timeout, use_time=True):
    """Runs cmd: (wall seconds, process, max RSS KiB, others), the RSS from /usr/bin/time -v (or
    os.wait4's rusage where /usr/bin/time is missing), `others` the CPU seconds the rest of the
    machine was busy meanwhile (the machine's busy time less this process's) and the seconds
    stolen by the hypervisor, each over the wall time: how far the run was disturbed."""
    with tempfile.TemporaryDirectory() as tmp:
        tv, out_path, err_path = (os.path.join(tmp, x) for x in ("time", "out", "err"))
        use_time = use_time and os.path.exists("/usr/bin/time")
        timed = ["/usr/bin/time", "-v", "-o", tv] + cmd if use_time else cmd
        with open(out_path, "w") as out, open(err_path, "w") as err:
            busy0, steal0 = busy_seconds()
            start = time.perf_counter()
            # A session of its own, so that a timeout ends the process under /usr/bin/time too.
            proc = subprocess.Popen(timed, env=env, stdout=out, stderr=err, start_new_session=True)
            timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            wall = time.perf_counter() - start
            busy1, steal1 = busy_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if wall >= timeout:
            raise subprocess.TimeoutExpired(cmd, timeout)
        others = None
        if busy0 is not None:
            own = usage.ru_utime + usage.ru_stime
            others = {"cores": max(0.0, busy1 - busy0 - own) / wall, "steal": (steal1 - steal0) / wall,
                      "wall": wall}
        rss = usage.ru_maxrss
        if use_time and os.path.exists(tv):
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(tv).read())
            if m:
                rss = int(m.group(1))
        stdout, stderr = open(out_path).read(), open(err_path).read()
    return wall, subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), rss, others


def bert_explain_run(args, folder, texts, lengths, work, tag):
    path = os.path.join(work, f"{tag}.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = os.path.join(work, f"{tag}-out.jsonl")
    if os.path.exists(out):
        os.remove(out)
    cmd = pin(args.threads) + [args.bert_explain, "--model", folder, "--input", path, "--output", out]
    try:
        wall, p, rss, others = time_v(cmd, env_for(args.threads), args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {args.timeout} s", "lines": len(texts)}
    res = {"wall": wall, "rss_kib": rss, "lines": len(texts), "exit": p.returncode, "others": others,
           "stdout": p.stdout.strip()[-600:], "stderr": p.stderr.strip()[-600:]}
    if p.returncode != 0:
        res["error"] = f"exit {p.returncode}: {p.stderr.strip()[-600:]}"
        return res
    m = re.search(r"(\d+) sentences \((\d+) failed\) in ([\d.]+) s", p.stdout)
    if m:
        res["summary_seconds"] = float(m.group(3))
        res["failed"] = int(m.group(2))
    reports = [json.loads(l) for l in open(out)]
    problems = []
    if len(reports) != len(texts):
        problems.append(f"{len(reports)} records for {len(texts)} lines")
    for i, (r, n) in enumerate(zip(reports, lengths)):
        if "error" in r:
            problems.append(f"line {i + 1}: {r['error']}")
            continue
        rel = r.get("relevance") or {}
        missing = [k for k in ("raw", "rollout", "flow") if not rel.get(k)]
        if missing:
            problems.append(f"line {i + 1}: no {', '.join(missing)}")
        if len(r.get("tokens", [])) != n:
            problems.append(f"line {i + 1}: {len(r.get('tokens', []))} tokens, made for {n}")
    if problems:
        res["error"] = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
    return res


def parse_lines(spec, ns, models):
    """--lines: one count for every (model, n), or `[model:]n=count` entries (the model's own
    entry wins over the bare n's)."""
    if re.fullmatch(r"\d+", spec.strip()):
        return {(m, n): int(spec) for m in models for n in ns}
    table = {}
    for item in spec.split(","):
        key, _, count = item.strip().partition("=")
        model, _, n = key.rpartition(":")
        table[(model or None, int(n))] = int(count)
    out = {}
    for m in models:
        for n in ns:
            count = table.get((m, n), table.get((None, n)))
            if count is None:
                raise SystemExit(f"--lines gives no count for {m} at n = {n}")
            out[(m, n)] = count
    return out


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms" if seconds >= 0.0995 else f"{seconds * 1000:.1f} ms"


def mib(kib):
    return "-" if kib is None else f"{kib / 1024:,.0f} MiB"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git(*a):
    try:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def newest_under(folder):
    newest = 0.0
    for root, _, files in os.walk(folder):
        for name in files:
            newest = max(newest, os.path.getmtime(os.path.join(root, name)))
    return newest


def measure(args, name, n, count, work, mixed):
    folder, _ = model_folder(args, name, work)
    words = whole_words(folder)
    if not words:
        raise SystemExit(f"{folder}/vocab.txt has no whole words of lowercase letters and digits")
    rng = random.Random(1000 + n)
    want = max(count, *(math.ceil(count / b) * b for b in args.batch_sizes))
    if mixed:
        lengths = [rng.randint(max(3, n // 4), n) for _ in range(want)]
    else:
        lengths = [n] * want
    texts = make_texts(words, lengths, seed=n + (7 if mixed else 0))
    label = f"{name}, n = {'≤ ' if mixed else ''}{n}"
    row = {"model": name, "n": n, "mixed": mixed, "lines": count, "torch": {}, "bert_explain": {}}

    # torch: one process per configuration (all in one with --quick).
    configs = []
    for b in args.batch_sizes:
        k = math.ceil(count / b) * b
        configs.append((f"b{b}", {"mode": "forward", "batch": b}, k))
    configs.append(("rollout", {"mode": "rollout", "batch": 1}, count))
    # The same with NumPy's BLAS on one thread: its threads then do not contend with torch's.
    configs.append(("rollout-blas1", {"mode": "rollout", "batch": 1, "blas_threads": 1}, count))
    with open(os.path.join(folder, "config.json")) as f:
        if any("MaskedLM" in a for a in json.load(f).get("architectures") or []):
            configs.append(("encoder", {"mode": "encoder", "batch": 1}, count))
    specs = []
    for key, cfg, k in configs:
        cfg = dict(cfg, texts=texts[:k], lengths=lengths[:k], equal=not mixed)
        specs.append((key, cfg))
    base = {"task": "torch", "model": folder, "threads": args.threads}
    if args.quick:
        log(f"{label}: torch, every configuration in one process (two: NumPy's BLAS threads differ)")
        for blas in sorted({c.get("blas_threads", 0) for _, c in specs}):
            group = [(key, c) for key, c in specs if c.get("blas_threads", 0) == blas]
            res = run_worker(args, dict(base, configs=[c for _, c in group]), work, label, blas or None)
            for (key, _), r in zip(group, res["configs"]):
                row["torch"][key] = dict(r, max_rss_kib=res["max_rss_kib"], shared_process=True,
                                         others=res["others"])
            row["versions"] = res["versions"]
    else:
        for key, cfg in specs:
            log(f"{label}: torch {key}, {len(cfg['texts'])} lines")
            res = run_worker(args, dict(base, configs=[cfg]), work, f"{label}, torch {key}",
                             cfg.get("blas_threads"))
            r = res["configs"][0]
            if "skipped" not in r:
                row["torch"][key] = dict(r, max_rss_kib=res["max_rss_kib"], others=res["others"])
                log(f"{label}: torch {key}: {ms(r['per_line'])} a line, peak RSS {mib(res['max_rss_kib'])}")
            row["versions"] = res["versions"]
            row["torch_threads"] = res["torch_threads"]
            row["torch_class"] = res["class"]

    # bert-explain: a 1-line run, the N lines, a 1-line run again.
    tag = f"{name.replace('/', '_')}-{n}{'-mixed' if mixed else ''}"
    be = row["bert_explain"]
    log(f"{label}: bert-explain, 1 line (load only)")
    be["one_before"] = bert_explain_run(args, folder, texts[:1], lengths[:1], work, tag + "-1")
    log(f"{label}: bert-explain, {count} lines")
    be["all"] = bert_explain_run(args, folder, texts[:count], lengths[:count], work, tag)
    log(f"{label}: bert-explain, 1 line again")
    be["one_after"] = bert_explain_run(args, folder, texts[:1], lengths[:1], work, tag + "-1")
    errors = [f"{k}: {v['error']}" for k, v in be.items() if isinstance(v, dict) and v.get("error")]
    if errors:
        be["error"] = "; ".join(errors)
        log(f"{label}: bert-explain FAILED: {be['error']}")
    elif count > 1:
        load = (be["one_before"]["wall"] + be["one_after"]["wall"]) / 2
        be["per_line"] = (be["all"]["wall"] - load) / (count - 1)
        if be["all"].get("summary_seconds") is not None:
            be["summary_per_line"] = be["all"]["summary_seconds"] / count
        log(f"{label}: bert-explain {ms(be['per_line'])} a line (whole {be['all']['wall']:.2f} s, "
            f"1 line {be['one_before']['wall']:.2f} / {be['one_after']['wall']:.2f} s), "
            f"peak RSS {mib(be['all']['rss_kib'])}")
    return row


def row_others(r):
    """The most the rest of the machine was busy (cores) and stolen during a process of the row
    that ran for a second or more (/proc/stat counts in ticks of 10 ms)."""
    found = [v["others"] for v in list(r["torch"].values()) + list(r["bert_explain"].values())
             if isinstance(v, dict) and v.get("others") and v["others"]["wall"] >= 1.0]
    if not found:
        return None, None
    return max(o["cores"] for o in found), max(o["steal"] for o in found)


def disturbed(r):
    cores, steal = row_others(r)
    return "-" if cores is None else f"{cores:.2f} cores ({steal:.2f})"


def report(args, rows, meta):
    out = []
    p = out.append
    p(f"Batch mode against torch on the CPU, per line ({meta['date']}; `scripts/bench/batch_throughput.py`"
      f"{' --quick: a smoke run, numbers meaningless' if args.quick else ''})")
    p("")
    p(f"- machine: {meta['cpu']}, {meta['cores']} cores usable, {meta['threads']} threads for each side"
      f"{' (taskset)' if meta['pinned'] else ''}; {meta['mem']}; load average {meta['load_before']} before, "
      f"{meta['load_after']} after")
    p(f"- bert-explain: {meta['bert_explain']}")
    p(f"- torch {meta['versions'].get('torch', '?')}, transformers {meta['versions'].get('transformers', '?')}, "
      f"NumPy {meta['versions'].get('numpy', '?')}, Python {meta['versions'].get('python', '?')} ({args.python}); "
      f"a process that only imports torch and transformers peaks at {mib(meta['torch_baseline_kib'])}")
    p(f"- command: `{meta['command']}`; {meta['minutes']:.1f} minutes")
    worst = max((row_others(r)[0] or 0.0 for r in rows), default=0.0)
    if worst > 0.1:
        p(f"- **disturbed**: other processes kept up to {worst:.2f} cores busy during a measured process "
          "(last column of the second table); those numbers are not clean")
    for name, desc in meta["models"].items():
        p(f"- {name}: {desc}")
    p("")
    p("| model | n | lines | torch, batch 1 | torch, best batch (size), per line "
      f"| torch + NumPy rollout, batch 1 (NumPy's BLAS on {args.threads} / 1 thread) "
      "| bert-explain, raw + rollout + flow | ratio to torch batch 1 / best batch "
      "| peak RSS: torch batch 1 / best batch / bert-explain |")
    p("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["torch"]
        b1 = t.get("b1", {}).get("per_line")
        sizes = [(v["per_line"], int(k[1:])) for k, v in t.items() if re.fullmatch(r"b\d+", k)]
        best = min(sizes) if sizes else (None, None)
        best_rss = t.get(f"b{best[1]}", {}).get("max_rss_kib")
        roll = f"{ms(t.get('rollout', {}).get('per_line'))} / {ms(t.get('rollout-blas1', {}).get('per_line'))}"
        be = r["bert_explain"]
        if be.get("error"):
            bert, ratio, be_rss = f"FAILED ({be['error'][:200]})", "-", None
        else:
            bert = ms(be.get("per_line"))
            ratio = "-"
            if be.get("per_line") is not None and b1 and best[0]:
                ratio = f"{be['per_line'] / b1:.2f}× / {be['per_line'] / best[0]:.2f}×"
            be_rss = be["all"].get("rss_kib")
        n = f"≤ {r['n']} (mixed)" if r["mixed"] else f"{r['n']}"
        p(f"| {r['model']} | {n} | {r['lines']} | {ms(b1)} | {ms(best[0])} ({best[1]}) | {roll} | {bert} | "
          f"{ratio} | {mib(t.get('b1', {}).get('max_rss_kib'))} / {mib(best_rss)} / {mib(be_rss)} |")
    p("")
    p("Per line, every configuration (torch: per line (the rollout's part), lines timed, the process's peak RSS; "
      "bert-explain: the whole process on 1 line before, on all lines, on 1 line after, and its own summary's "
      "seconds / lines):")
    p("")
    p("| model | n | " + " | ".join(f"torch b{b}" for b in args.batch_sizes)
      + f" | torch encoder only, b1 | torch + rollout, BLAS on {args.threads} threads (the rollout alone) "
      "| the same, BLAS on 1 thread | bert-explain whole: 1 / N / 1 line | bert-explain summary / N "
      "| other processes' CPU, most in a process of the row (steal) |")
    p("|---|---|" + "---|" * (len(args.batch_sizes) + 6))
    for r in rows:
        t = r["torch"]
        def cell(k):
            if k not in t:
                return "-"
            alone = f"{ms(t[k]['rollout_per_line'])}; " if "rollout_per_line" in t[k] else ""
            return f"{ms(t[k]['per_line'])} ({alone}{t[k]['lines']}, {mib(t[k]['max_rss_kib'])})"
        be = r["bert_explain"]
        walls = " / ".join(f"{be[k]['wall']:.2f} s" if be.get(k, {}).get("wall") is not None else "-"
                           for k in ("one_before", "all", "one_after"))
        n = f"≤ {r['n']} (mixed)" if r["mixed"] else f"{r['n']}"
        p(f"| {r['model']} | {n} | " + " | ".join(cell(f"b{b}") for b in args.batch_sizes)
          + f" | {cell('encoder')} | {cell('rollout')} | {cell('rollout-blas1')} | {walls} | {ms(be.get('summary_per_line'))} | {disturbed(r)} |")
    if args.quick:
        p("")
        p("(--quick: every torch configuration of a row but the BLAS-1 rollout ran in one process, so its peak RSS "
          "is that process's.)")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None, help="threads for each side (default: the usable cores)")
    ap.add_argument("--n", default=None, help="token lengths, comma-separated (default 128,512)")
    ap.add_argument("--lines", default=None, help=f"lines per (model, n): N, or [model:]n=N,... (default {DEFAULT_LINES})")
    ap.add_argument("--models", default=None, help="bert-base, minilm or a folder, comma-separated (default bert-base,minilm)")
    ap.add_argument("--batch-sizes", default=None, help="torch batch sizes (default 1,2,4,8,16,32; 1 is always run)")
    ap.add_argument("--mixed", action="store_true", help="also lines of n/4 … n tokens, padded per batch")
    ap.add_argument("--bert-explain", default=BIN)
    ap.add_argument("--python", default=PYTHON, help="python with torch and transformers")
    ap.add_argument("--models-dir", default=MODELS_DIR)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one bert-explain process")
    ap.add_argument("--json", help="also write every measurement here")
    ap.add_argument("--quick", action="store_true", help="a smoke run of about 15 seconds")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)

    command = "python3 scripts/bench/batch_throughput.py " + " ".join(sys.argv[1:])
    cores = len(os.sched_getaffinity(0))
    args.threads = args.threads or cores
    if args.threads > cores:
        log(f"warning: {args.threads} threads on {cores} usable cores")
    if args.quick:
        args.n = args.n or "16"
        args.lines = args.lines or "3"
        args.models = args.models or "bert-tiny"
        args.batch_sizes = args.batch_sizes or "1,2"
    ns = [int(x) for x in (args.n or "128,512").split(",")]
    models = [m.strip() for m in (args.models or "bert-base,minilm").split(",") if m.strip()]
    args.batch_sizes = sorted({1} | {int(b) for b in (args.batch_sizes or "1,2,4,8,16,32").split(",")})
    lines = parse_lines(args.lines or DEFAULT_LINES, ns, models)
    args.bert_explain = os.path.abspath(args.bert_explain)
    if not os.access(args.bert_explain, os.X_OK):
        raise SystemExit(f"no bert-explain at {args.bert_explain}: build it (cargo build --release) or pass --bert-explain")
    if not os.access(args.python, os.X_OK):
        raise SystemExit(f"no python at {args.python}: scripts/setup-python.sh makes .venv-reference, or pass --python")
    os.makedirs(args.models_dir, exist_ok=True)

    version = subprocess.run([args.bert_explain, "--version"], capture_output=True, text=True).stdout.strip()
    built = os.path.getmtime(args.bert_explain)
    head = git("rev-parse", "--short", "HEAD")
    dirty = " (tree with changes)" if git("status", "--porcelain", "--untracked-files=no", "src") else ""
    stale = ""
    if newest_under(os.path.join(REPO, "src")) > built:
        stale = "; OLDER than the newest file under src/"
    be_desc = (f"{version}, {os.path.relpath(args.bert_explain, REPO)} built "
               f"{datetime.datetime.fromtimestamp(built, datetime.timezone.utc):%Y-%m-%d %H:%M} UTC{stale}; "
               f"HEAD {head}{dirty}")
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kib = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
        mem = f"{kib / 1024 / 1024:.0f} GiB memory"
    except (OSError, AttributeError):
        pass

    rows, descs = [], {}
    with tempfile.TemporaryDirectory(prefix="batch-throughput-") as work:
        baseline = run_worker(args, {"task": "baseline", "threads": args.threads}, work, "baseline")["max_rss_kib"]
        for name in models:
            descs[name] = model_folder(args, name, work)[1]
            for n in ns:
                rows.append(measure(args, name, n, lines[(name, n)], work, mixed=False))
                if args.mixed:
                    rows.append(measure(args, name, n, lines[(name, n)], work, mixed=True))
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": cpu_model(), "cores": cores, "threads": args.threads, "pinned": bool(pin(args.threads)),
            "mem": mem, "load_before": load_before, "load_after": load_after, "bert_explain": be_desc,
            "versions": rows[0].get("versions", {}) if rows else {}, "command": command,
            "minutes": (time.perf_counter() - T0) / 60, "models": descs, "torch_baseline_kib": baseline}
    text = report(args, rows, meta)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    failed = any(r["bert_explain"].get("error") for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
