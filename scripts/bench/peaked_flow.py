#!/usr/bin/env python3
"""Attention flow on peaked attention beside diffuse attention (issue 31): one position's flow
at 8 positions spread over the sequence, and --all-positions, on each stack below; the median
and the worst position of this checkout's engine, its worst against the same stack unsharpened,
and against the first engine (595641c) where one is given.

Stacks (float32 .npy, made here once into DIR, reused):
- minilm-L{6,12}-n{128,512}-t{1,2,4,8}: all-MiniLM-L6-v2's real attention (real_attention.py;
  12 layers are its 6 tiled twice), each head's rows raised to the power t and renormalised,
  softmax(t · log a): the same heads made sharper; t = 1 is the real attention;
- random-s{1,2,4}: 12 layers, one head, n = 128, rows softmax(N(0, s²)) (seed 128);
- bertbase-qk8-n128: a bert-base-shaped model with random weights (seed 0) whose query and key
  weights are scaled by 8, as scripts/gpu_check.py makes it;
- iglm-L12-n{128,500}: a real GPT-2 decoder (iglm, 4 layers tiled 3 times) on a protein:
  lower-triangular rows with most of their weight on position 0 (an attention sink);
- rxnfp-L12-n{128,512}, rxnmapper-L12-n{128,512}: two real trained 12-layer encoders, rxnfp's
  BERT masked LM and rxnmapper's ALBERT masked LM (models/downloaded/, scripts/fetch-real-models.sh),
  on a reaction SMILES of exactly n tokens made of six textbook reactions repeated (two thirds
  of the tokens their reactants joined by ".", the rest ">>" and their products, each side cut
  to fit): trained attention as it is, on input of their kind;
- minilm-L12-n128-t{1,8}-q{0,8,64,1024,65536}: the minilm stack's heads averaged into one (the
  engine's own first step, so the flows are the same), and each row rounded to multiples of 1/q
  (largest remainders, so that it still sums to 1; q0: not rounded): at most 2q + 2 distinct
  capacities once the residual is added. Rounding to few values also zeroes the small weights.

A run is the whole process `bert-explain --attention FILE --target P --json`. The first
engine's runs are stopped at max(5 s, 2 × the new engine's time at that position), which
already shows it slower there (counted as "stopped at the cap", its time as the cap). The new
engine runs --runs times (best kept) where a run takes under a second, once otherwise.

    peaked_flow.py --new BIN [--old BIN] --dir DIR [--stacks PATTERN] [--all-positions LIST]
                   [--python PY] [--runs 3] [--counts]

--python: an interpreter with torch, transformers and numpy, to make the stacks
(.venv-reference/bin/python). --counts: one more run at each stack's worst position with
BERT_EXPLAIN_FLOW_STATS set, for a last column: the share of the flows of layers 3 and up that
were searched, and the searches' mean phases and steps. Prints a markdown table.
"""

import argparse
import fnmatch
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MINILM = REPO / "models/downloaded/all-MiniLM-L6-v2"
CHEMISTRY = {"rxnfp": REPO / "models/downloaded/rxnfp-bert-mlm",
             "rxnmapper": REPO / "models/downloaded/rxnmapper-albert-mlm"}
IGLM = REPO / "models/downloaded/iglm-gpt2"


def stack_names():
    names = [f"minilm-L{l}-n{n}-t{t}" for n in (128, 512) for l in (6, 12) for t in (1, 2, 4, 8)]
    names += [f"random-s{s}" for s in (1, 2, 4)]
    names += ["bertbase-qk8-n128", "iglm-L12-n128", "iglm-L12-n500"]
    names += [f"{model}-L12-n{n}" for model in ("rxnfp", "rxnmapper") for n in (128, 512)]
    names += [f"minilm-L12-n128-t{t}-q{q}" for t in (1, 8) for q in (0, 8, 64, 1024, 65536)]
    return names


def rounded(name):
    """Whether the stack is one of the rounded ones (`-q…`)."""
    return name.startswith("minilm-") and re.search(r"-q\d+$", name) is not None


def baseline_of(name):
    """The unsharpened stack of the same size, or None when the stack is its own."""
    if rounded(name):
        return None if name.endswith("-q0") else name.rsplit("-q", 1)[0] + "-q0"
    if name.startswith("minilm-") and not name.endswith("-t1"):
        return name.rsplit("-t", 1)[0] + "-t1"
    if name.startswith("random-") and name != "random-s1":
        return "random-s1"
    return None


MAKER = r'''
import sys, json, numpy as np, torch
kind, out = sys.argv[1], sys.argv[2]
def sharpen(a, t):
    a = np.power(np.maximum(a.astype(np.float64), 1e-300), t)
    return a / a.sum(-1, keepdims=True)
if kind == "minilm":
    src, t = sys.argv[3], float(sys.argv[4])
    a = np.load(src)
    np.save(out, (sharpen(a, t) if t != 1 else a).astype(np.float32))
elif kind == "rounded":
    src, t, q = sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    a = np.load(src).astype(np.float64)
    a = (sharpen(a, t) if t != 1 else a).mean(1, keepdims=True)
    if q:
        scaled = a * q
        units = np.floor(scaled)
        short = (q - units.sum(-1, keepdims=True)).astype(np.int64)
        # One more unit to each of the `short` largest remainders of the row.
        order = np.argsort(-(scaled - units), axis=-1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(a.shape[-1]), axis=-1)
        a = (units + (rank < short)) / q
    np.save(out, a.astype(np.float32))
elif kind == "random":
    s = float(sys.argv[3])
    rng = np.random.default_rng(128)
    logits = rng.normal(0.0, s, size=(12, 1, 128, 128))
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.save(out, (e / e.sum(-1, keepdims=True)).astype(np.float32))
elif kind == "bertbase":
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig(), add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.mul_(8.0)
            layer.attention.self.key.weight.mul_(8.0)
        ids = torch.randint(5, 30000, (1, 128), generator=torch.Generator().manual_seed(1))
        att = model(input_ids=ids, output_attentions=True).attentions
    np.save(out, torch.cat(att, 0).numpy().astype(np.float32))
elif kind == "chemistry":
    import re
    model_dir, n = sys.argv[3], int(sys.argv[4])
    sys.path.insert(0, sys.argv[5])
    import real_reference as real  # the loading and encoding of the real-model fixtures
    # Textbook reactions (reactants >> product): aspirin from salicylic acid, an amide coupling,
    # a Suzuki coupling, a Fischer esterification, paracetamol, a Williamson ether synthesis.
    reactions = [
        ("CC(=O)OC(C)=O.Oc1ccccc1C(=O)O", "CC(=O)Oc1ccccc1C(=O)O"),
        ("CC(C)Cc1ccc(cc1)C(C)C(=O)O.NCc1ccccc1", "CC(C)Cc1ccc(cc1)C(C)C(=O)NCc1ccccc1"),
        ("Brc1ccc(cc1)C(F)(F)F.OB(O)c1ccccc1", "FC(F)(F)c1ccc(cc1)-c1ccccc1"),
        ("OC(=O)c1ccccc1.CCO", "CCOC(=O)c1ccccc1"),
        ("CC(=O)OC(C)=O.Nc1ccc(O)cc1", "CC(=O)Nc1ccc(O)cc1"),
        ("Oc1ccc(Cl)cc1.BrCC[C@H](C)O", "C[C@@H](O)CCOc1ccc(Cl)cc1"),
    ]
    text = ".".join(r for r, _ in reactions * 8) + ">>" + ".".join(p for _, p in reactions * 8)
    tokens = re.findall(r"\[[^\]]+\]|Br|Cl|>>|%\d\d|[A-Za-z]|\d|[().=#+\-\\/:~@*$]", text)
    reactants = tokens[: tokens.index(">>")][: (n - 2) * 2 // 3]
    rest = tokens[tokens.index(">>"):][: n - 2 - len(reactants)]
    ids = real.encode_pretokenized(real.read_vocab(model_dir)[1], " ".join(reactants + rest))
    assert len(ids) == n, len(ids)
    config = real.load_config(model_dir)
    model = real.load_model(model_dir, *real.family_and_task(config), config)
    with torch.no_grad():
        att = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    np.save(out, torch.cat(att, 0).numpy().astype(np.float32))
elif kind == "iglm":
    from transformers import GPT2LMHeadModel
    model_dir, n = sys.argv[3], int(sys.argv[4])
    model = GPT2LMHeadModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    rng = np.random.default_rng(5)
    ids = torch.tensor(rng.integers(5, 25, size=(1, n)))  # amino-acid tokens
    with torch.no_grad():
        att = model(input_ids=ids, output_attentions=True).attentions
    a = torch.cat(att, 0).numpy()
    np.save(out, np.concatenate([a, a, a], 0).astype(np.float32))
'''


def make(name, folder, python):
    path = folder / f"{name}.npy"
    if path.exists():
        return path
    if rounded(name):
        _, layers, n, t, q = name.split("-")
        source = make(f"minilm-{layers}-{n}-t1", folder, python)
        args = ["rounded", str(path), str(source), t[1:], q[1:]]
    elif name.startswith("minilm-"):
        _, layers, n, t = name.split("-")
        source = folder / f"minilm-{layers}-{n}.npy"
        if not source.exists():
            tile = int(layers[1:]) // 6
            subprocess.run([python, str(REPO / "scripts/bench/real_attention.py"), "--model", str(MINILM),
                            "--n", n[1:], "--tile", str(tile), "--out", str(source)], check=True,
                           stderr=subprocess.DEVNULL)
        args = ["minilm", str(path), str(source), t[1:]]
    elif name.startswith("random-"):
        args = ["random", str(path), name.split("-s")[1]]
    elif name.startswith("bertbase-"):
        args = ["bertbase", str(path)]
    elif name.startswith(tuple(CHEMISTRY)):
        args = ["chemistry", str(path), str(CHEMISTRY[name.split("-")[0]]), name.rsplit("-n", 1)[1],
                str(REPO / "scripts/reference")]
    else:
        args = ["iglm", str(path), str(IGLM), name.rsplit("-n", 1)[1]]
    subprocess.run([python, "-c", MAKER, *args], check=True, stderr=subprocess.DEVNULL)
    return path


def timed(binary, args, timeout=None):
    """Wall seconds of one process, or None when stopped at `timeout`; its JSON on stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        try:
            done = subprocess.run([binary, *args], stdout=out, stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, None
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{binary} {' '.join(args)} failed: {done.stderr.decode()}")
        out.seek(0)
        return wall, out.read()


def counts(binary, args):
    """The engine's own counts (BERT_EXPLAIN_FLOW_STATS) for one run, over layers 3 and up (1
    and 2 have a closed form): the share of flows searched, and the searches' mean phases and
    steps."""
    done = subprocess.run([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True,
                          env={**os.environ, "BERT_EXPLAIN_FLOW_STATS": "1"})
    flows = searched = phases = steps = 0.0
    for line in done.stderr.decode().splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 9 and cells[0].isdigit() and int(cells[0]) >= 3:
            found = int(cells[4])
            flows += sum(int(c) for c in cells[2:5])
            searched += found
            phases += found * float(cells[5])
            steps += found * float(cells[6])
    if not flows:
        return "-"
    return (f"{searched / flows:.0%} searched, {phases / max(searched, 1):.1f} phases and "
            f"{steps / max(searched, 1):,.0f} steps a search")


def positions(n):
    return sorted({round(1 + (n - 3) * k / 7) for k in range(8)})


def largest_difference(a, b):
    """Largest |a − b| / max(|a|, |b|) over the flow maps of two reports."""
    fa, fb = json.loads(a)["relevance"]["flow"], json.loads(b)["relevance"]["flow"]
    return max((abs(x - y) / max(abs(x), abs(y), 1e-300) for ra, rb in zip(fa, fb) for x, y in zip(ra, rb)),
               default=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new", required=True)
    ap.add_argument("--old")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--stacks", default="*")
    ap.add_argument("--all-positions", default="", help="stacks (patterns, comma-separated) to time with --all-positions")
    ap.add_argument("--python", default=str(REPO / ".venv-reference/bin/python"))
    ap.add_argument("--runs", type=int, default=3, help="runs of the new engine per position (best kept)")
    ap.add_argument("--counts", action="store_true",
                    help="one more run at each stack's worst position, with the engine's counts")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    names = [s for s in stack_names() if fnmatch.fnmatch(s, args.stacks)]
    medians, worst = {}, {}
    rows = []
    for name in names:
        path = make(name, args.dir, args.python)
        import numpy  # noqa: the shape, from the file's header
        shape = numpy.load(path, mmap_mode="r").shape
        n = shape[-1]
        times, olds, diffs = [], [], []
        for p in positions(n):
            runs = [timed(args.new, ["--attention", str(path), "--target", str(p), "--json"])]
            while len(runs) < args.runs and runs[0][0] < 1.0:  # one run is enough past a second
                runs.append(timed(args.new, ["--attention", str(path), "--target", str(p), "--json"]))
            wall = min(r[0] for r in runs)
            times.append((wall, p))
            if args.old:
                cap = max(5.0, 2 * wall)
                old, report = timed(args.old, ["--attention", str(path), "--target", str(p), "--json"], timeout=cap)
                olds.append((old, cap, p))
                if report is not None:
                    diffs.append(largest_difference(runs[0][1], report))
        medians[name] = statistics.median(t for t, _ in times)
        worst[name] = max(times)
        base = baseline_of(name)
        vs_base = "-"
        if base in worst:
            vs_base = f"{worst[name][0] / worst[base][0]:.1f}×"
        old_text = "-"
        if olds:
            slower = [(t, p) for (t, p), (o, cap, _) in zip(times, olds) if o is not None and t > o]
            worst_old = max(((o if o is not None else cap), p) for o, cap, p in olds)
            capped = sum(1 for o, _, _ in olds if o is None)
            old_text = (f"median {statistics.median(o if o is not None else cap for o, cap, _ in olds):.2f} s, "
                        f"worst {worst_old[0]:.2f} s (position {worst_old[1]})"
                        + (f", {capped} stopped at the cap" if capped else "")
                        + (f"; new slower at {len(slower)}" if slower else "; new faster everywhere"))
            if diffs:
                old_text += f"; maps within {max(diffs):.1e}"
        row = (f"| {name} | {'×'.join(map(str, shape))} | {medians[name]:.3f} s | "
               f"{worst[name][0]:.3f} s (position {worst[name][1]}) | {vs_base} | {old_text} |")
        if args.counts:
            row += f" {counts(args.new, ['--attention', str(path), '--target', str(worst[name][1]), '--json'])} |"
        rows.append(row)
        print(rows[-1], file=sys.stderr, flush=True)
    every = [s for s in names if any(fnmatch.fnmatch(s, pat) for pat in args.all_positions.split(",") if pat)]
    every_rows = []
    for name in every:
        path = args.dir / f"{name}.npy"
        wall, _ = timed(args.new, ["--attention", str(path), "--all-positions", "--target", "1", "--json"])
        every_rows.append(f"| {name} | {wall:.1f} s |")
        print(every_rows[-1], file=sys.stderr, flush=True)
    print("| stack | shape | one position, median | worst position | worst against the unsharpened "
          "stack | first engine |" + (" worst position: flows of layers 3 and up |" if args.counts else ""))
    print("|---|---|---|---|---|---|" + ("---|" if args.counts else ""))
    print("\n".join(rows))
    if every_rows:
        print("\n| stack | --all-positions |\n|---|---|")
        print("\n".join(every_rows))


if __name__ == "__main__":
    main()
