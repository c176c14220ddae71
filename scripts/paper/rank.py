#!/usr/bin/env python3
"""Which method is most faithful: two tables over several tasks, from batch mode's reports
(`scripts/paper/faithfulness.sh`, which runs --evaluate --mixing all).

Rows: every method × aggregation at the last layer (attention's raw, rollout and flow; each SPEC
§8 method's layer, rollout and flow), and the importance scores as non-attention baselines:
integrated gradients, |gradient × input|, the gradient's norm, AttnLRP and CP-LRP (signed and
absolute), and the paper's grad and inputgrad at the embedding block's output, where the
reports hold them. An encoder's report is one example; a causal model's (the next-word task:
`"generate": 1`) one per generated token, over the prompt.

Table 1, per task: the Spearman correlation with the paper's blank-out score (|p − p(blanked)|)
over the tokens with [CLS] and [SEP] left out, and over every token, mean ± standard error over
the examples; rows ranked by their mean rank over the tasks on the first column. The
correlations are computed here with scipy (average ranks, as bert-explain; a constant side
gives no value and the example is skipped).

Table 2, per task: ERASER's comprehensiveness and sufficiency AOPC, which bert-explain computes
for the rollout and flow of each method and for each score's ranking (signed scores ranked as
they are, so their absolute values have none; blank-out, the first table's reference, is a row
here); rows ranked by their mean rank over the tasks by comprehensiveness.

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


def examples(report):
    """The explained predictions of one report, each as (tokens, its maps' last layers by
    (method, aggregation), importance, evaluation): an encoder's report is one; a causal
    model's has one per generated token, over the prompt (its maps are [token][layer])."""
    if "generated_tokens" not in report:
        maps = {("attention", agg): report["relevance"][agg][-1] for agg in ("raw", "rollout", "flow")}
        for name, by_agg in (report.get("methods") or {}).items():
            if name != "attention":
                maps.update({(name, agg): by_agg[agg][-1] for agg in ("layer", "rollout", "flow")})
        yield report["tokens"], maps, report["importance"], report["evaluation"]
        return
    tokens = report["prompt_tokens"]
    m = len(tokens)
    last = lambda rows: [row[-1] for row in rows[:m]]  # noqa: E731
    rel = report["relevance"]
    for k, (imp, evaluation) in enumerate(zip(report["importance"], report["evaluation"])):
        aggregations = ("raw", "rollout", "rollout_corrected", "flow")  # corrected: --correction
        maps = {("attention", agg): last(rel[agg][k]) for agg in aggregations if rel.get(agg)}
        for name, by_agg in (report.get("methods") or {}).items():
            if name != "attention":
                maps.update({(name, agg): last(by_agg[agg][k]) for agg in ("layer", "rollout", "flow")
                             if by_agg.get(agg)})
        imp = {key: (v[:m] if isinstance(v, list) else v) for key, v in imp.items()}
        yield tokens, maps, imp, evaluation


def rankings(maps, imp, evaluation):
    """(method, aggregation) → (the last layer's map over the tokens, or None where the row is
    ERASER's only; the report's ERASER AOPC of it, where computed)."""
    eraser = evaluation.get("eraser") or {}
    by_score = evaluation.get("eraser_importance") or {}
    out = {}
    for (name, agg), values in maps.items():
        out[(name, agg)] = (values, eraser.get(name, {}).get(agg))
    # The scores, each with its own ERASER (reports made since --evaluate computes it); the
    # absolute values of signed ones have none (ERASER blanks the most positive first).
    rows = [("integrated gradients", "integrated_gradients", False),
            ("gradient × input (absolute)", "gradient_x_input_abs", False),
            ("gradient norm", "gradient_norm", False),
            # LRP of the explained logit (reports made since --evaluate includes it), signed as
            # integrated gradients and absolute as gradient × input.
            ("AttnLRP", "attnlrp", True),
            ("CP-LRP", "cp_lrp", True),
            # The paper's grad and inputgrad at the embedding block's output.
            ("grad (the paper's)", "embedding_gradient_sum_abs", False),
            ("inputgrad (the paper's)", "embedding_gradient_x_input_abs", False)]
    for name, key, absolute in rows:
        if not imp.get(key):
            continue
        out[(name, "-")] = (imp[key], by_score.get(key))
        if absolute:
            out[(f"{name} (absolute)", "-")] = ([abs(v) for v in imp[key]], None)
    # Blank-out itself: the correlations' reference, so in ERASER's table only.
    if by_score.get("blank_out"):
        out[("blank-out", "-")] = (None, by_score["blank_out"])
    return out


def task_columns(path):
    cols = {}
    n = 0
    for line in open(path):
        report = json.loads(line)
        if "error" in report:
            continue
        for tokens, maps, imp, evaluation in examples(report):
            n += 1
            score = imp[SCORE]
            no_specials = [j for j, t in enumerate(tokens) if t not in SPECIALS]
            every = list(range(len(tokens)))
            for key, (values, e) in rankings(maps, imp, evaluation).items():
                c = cols.setdefault(key, {"rho": [], "rho_all": [], "comp": [], "suff": []})
                if values is not None:
                    c["rho"].append(rho(values, score, no_specials))
                    c["rho_all"].append(rho(values, score, every))
                if e:
                    c["comp"].append(e["comprehensiveness"])
                    c["suff"].append(e["sufficiency"])
    return cols, n


def fmt(stat, signed=True):
    if stat is None:
        return "–"
    m, se, _ = stat
    return f"{m:+.3f} ± {se:.3f}" if signed else f"{m:.3f} ± {se:.3f}"


def mean_ranks(tasks, columns, keys, column, higher_is_better=True):
    """Each row's mean over the tasks of its rank there by `column`'s mean (rows without it
    in a task are left out of that task's ranking)."""
    ranks = {k: [] for k in keys}
    sign = -1 if higher_is_better else 1
    for name, _ in tasks:
        having = [k for k in keys if mean_se(columns[name].get(k, {}).get(column, []))]
        having.sort(key=lambda k: sign * mean_se(columns[name][k][column])[0])
        for position, k in enumerate(having, 1):
            ranks[k].append(position)
    return {k: float(np.mean(r)) for k, r in ranks.items() if r}


def main():
    tasks = [arg.split("=", 1) for arg in sys.argv[1:]]
    if not tasks:
        sys.exit(__doc__)
    columns = {}
    counts = {}
    for name, path in tasks:
        columns[name], counts[name] = task_columns(path)
    keys = []
    for name, _ in tasks:
        keys += [k for k in columns[name] if k not in keys]
    examples = ", ".join(f"{n} {counts[n]}" for n, _ in tasks)

    by_rho = mean_ranks(tasks, columns, keys, "rho")
    print(f"Spearman ρ of each method's last-layer map with the absolute blank-out drop (mean ± "
          f"standard error; examples: {examples}); ranked by the mean rank over the tasks of the "
          f"first column.\n")
    table(tasks, columns, [("rank", by_rho)], [("rho", "ρ, no [CLS]/[SEP]"), ("rho_all", "ρ, every token")])

    by_comp = mean_ranks(tasks, columns, keys, "comp")
    by_suff = mean_ranks(tasks, columns, keys, "suff", higher_is_better=False)
    print(f"\nERASER AOPC of each last-layer rollout and flow map and of each score's ranking "
          f"(mean ± standard error; examples: {examples}); ranked by the mean rank over the tasks "
          f"of comprehensiveness (higher is better), with the mean rank of sufficiency (lower is "
          f"better) beside it.\n")
    table(tasks, columns, [("rank, comp.", by_comp), ("rank, suff.", by_suff)],
          [("comp", "comprehensiveness"), ("suff", "sufficiency")])


def table(tasks, columns, ranks, cells):
    """One Markdown table: a column per mean rank in `ranks` ((header, row → rank), rows in the
    first one's order), then per task a column per (statistic, header) in `cells`."""
    head = "| " + " | ".join(header for header, _ in ranks) + " | method | aggregation |"
    rule = "|---" * (len(ranks) + 2) + "|"
    for name, _ in tasks:
        head += "".join(f" {name}: {header} |" for _, header in cells)
        rule += "---|" * len(cells)
    print(head)
    print(rule)
    order = ranks[0][1]
    for k in sorted(order, key=order.get):
        row = "| " + " | ".join(f"{rank.get(k, float('nan')):.1f}" for _, rank in ranks)
        row += f" | {k[0]} | {k[1]} |"
        for name, _ in tasks:
            c = columns[name].get(k, {})
            row += "".join(f" {fmt(mean_se(c.get(stat, [])))} |" for stat, _ in cells)
        print(row)

if __name__ == "__main__":
    main()
