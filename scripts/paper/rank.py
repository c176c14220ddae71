#!/usr/bin/env python3
"""Which method is most faithful: one table over several tasks, from batch mode's reports
(`scripts/paper/faithfulness.sh`, which runs --evaluate --mixing all).

For every method × aggregation at the last layer (attention's raw, rollout and flow; each SPEC §8
method's layer, rollout and flow), and for integrated gradients and |gradient × input| as
non-attention baselines (and the paper's grad and inputgrad at the embedding block's output, and
AttnLRP and CP-LRP, signed and absolute, where the reports hold them), per task: the Spearman correlation with the paper's blank-out score
(|p − p(blanked)|) over the tokens with [CLS] and [SEP] left out, and over every token, mean ±
standard error over the examples; and ERASER's comprehensiveness and sufficiency AOPC
(bert-explain computes them for the rollout and flow of each method). Rows are ranked by their
mean rank over the tasks on the first column. The correlations are computed here with scipy
(average ranks, as bert-explain; a constant side gives no value and the example is skipped).

Usage: python3 scripts/paper/rank.py NAME=REPORTS.jsonl [NAME=REPORTS.jsonl ...] > table.md
Needs numpy and scipy (the reference environment has them).
"""

import json
import math
import sys

import numpy as np
from scipy.stats import spearmanr

SPECIALS = {"[CLS]", "[SEP]", "<s>", "</s>"}
SCORE = "blank_out_abs"


def mean_se(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return None
    m = float(np.mean(values))
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return m, se, len(values)


def rho(a, b, keep):
    a, b = np.asarray(a)[keep], np.asarray(b)[keep]
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b).statistic)


def rankings(report):
    """(method, aggregation) → the last layer's map over the tokens, and the baselines."""
    out = {}
    rel = report["relevance"]
    for agg in ("raw", "rollout", "flow"):
        out[("attention", agg)] = rel[agg][-1]
    for name, maps in (report.get("methods") or {}).items():
        if name == "attention":
            continue
        for agg in ("layer", "rollout", "flow"):
            out[(name, agg)] = maps[agg][-1]
    imp = report["importance"]
    out[("integrated gradients", "-")] = imp["integrated_gradients"]
    out[("gradient × input (absolute)", "-")] = imp["gradient_x_input_abs"]
    # LRP of the explained logit (reports made since --evaluate includes it), signed as
    # integrated gradients and absolute as gradient × input.
    for name, key in (("AttnLRP", "attnlrp"), ("CP-LRP", "cp_lrp")):
        if imp.get(key):
            out[(name, "-")] = imp[key]
            out[(f"{name} (absolute)", "-")] = [abs(v) for v in imp[key]]
    # The paper's grad and inputgrad at the embedding block's output, where reports have them.
    for name, key in (("grad (the paper's)", "embedding_gradient_sum_abs"),
                      ("inputgrad (the paper's)", "embedding_gradient_x_input_abs")):
        if imp.get(key):
            out[(name, "-")] = imp[key]
    return out


def task_columns(path):
    cols = {}
    n = 0
    for line in open(path):
        report = json.loads(line)
        if "error" in report:
            continue
        n += 1
        score = report["importance"][SCORE]
        tokens = report["tokens"]
        no_specials = [j for j, t in enumerate(tokens) if t not in SPECIALS]
        every = list(range(len(tokens)))
        eraser = report["evaluation"].get("eraser") or {}
        for key, values in rankings(report).items():
            c = cols.setdefault(key, {"rho": [], "rho_all": [], "comp": [], "suff": []})
            c["rho"].append(rho(values, score, no_specials))
            c["rho_all"].append(rho(values, score, every))
            method, agg = key
            e = eraser.get(method, {}).get(agg)
            if e:
                c["comp"].append(e["comprehensiveness"])
                c["suff"].append(e["sufficiency"])
    return cols, n


def fmt(stat, signed=True):
    if stat is None:
        return "–"
    m, se, _ = stat
    return f"{m:+.3f} ± {se:.3f}" if signed else f"{m:.3f} ± {se:.3f}"


def main():
    tasks = [arg.split("=", 1) for arg in sys.argv[1:]]
    if not tasks:
        sys.exit(__doc__)
    columns = {}
    counts = {}
    for name, path in tasks:
        columns[name], counts[name] = task_columns(path)
    keys = list(next(iter(columns.values())).keys())
    # Rank within each task by the mean correlation (specials left out); then the mean rank.
    ranks = {k: [] for k in keys}
    for name, _ in tasks:
        ordered = sorted(keys, key=lambda k: -(mean_se(columns[name][k]["rho"]) or (-9,))[0])
        for position, k in enumerate(ordered, 1):
            ranks[k].append(position)
    keys.sort(key=lambda k: np.mean(ranks[k]))
    head = "| rank | method | aggregation |"
    rule = "|---|---|---|"
    for name, _ in tasks:
        head += f" {name}: ρ, no [CLS]/[SEP] | {name}: ρ, every token | {name}: comprehensiveness | {name}: sufficiency |"
        rule += "---|---|---|---|"
    print(f"Spearman ρ of each method's last-layer map with the absolute blank-out drop and ERASER AOPC (mean ± standard error; "
          f"examples: {', '.join(f'{n} {counts[n]}' for n, _ in tasks)}); ranked by the mean rank over the tasks of the "
          f"first column (comprehensiveness: higher is better; sufficiency: lower is better).\n")
    print(head)
    print(rule)
    for k in keys:
        row = f"| {np.mean(ranks[k]):.1f} | {k[0]} | {k[1]} |"
        for name, _ in tasks:
            c = columns[name][k]
            row += (f" {fmt(mean_se(c['rho']))} | {fmt(mean_se(c['rho_all']))} | {fmt(mean_se(c['comp']))} |"
                    f" {fmt(mean_se(c['suff']))} |")
        print(row)


if __name__ == "__main__":
    main()
