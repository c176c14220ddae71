"""One figure per correlation table: layer on x, mean Spearman correlation on y, one line per
map (attention's raw/rollout/flow and every --mixing method's layer/rollout/flow), from the
reports a batch run with --evaluate wrote (scripts/paper/faithfulness.sh). Plain SVG, no
plotting library.

Usage: python3 scripts/paper/figure.py REPORTS.jsonl SCORE OUT.svg [--title TEXT]
  SCORE: any score of the reports' importance (blank_out_abs, embedding_gradient_sum_abs, gradient_norm, ...).
"""

import argparse
import json
import math

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 60, 250, 40, 50
COLOURS = {"attention": "#1f77b4", "norm": "#2ca02c", "alti": "#d62728",
           "value-zeroing": "#9467bd", "grad-attention": "#ff7f0e"}
DASHES = {"layer": "2,3", "raw": "2,3", "rollout": "8,4", "flow": ""}


def series(reports, score):
    """{(method, map): [mean correlation per layer]} over the reports that have it."""
    sums = {}
    for report in reports:
        evaluation = report.get("evaluation")
        if not evaluation:
            continue
        maps = {("attention", m): evaluation[score][m] for m in ("raw", "rollout", "flow")}
        for method, e in (evaluation.get("methods") or {}).items():
            for m in ("layer", "rollout", "flow"):
                maps[(method, m)] = e[score][m]
        for key, values in maps.items():
            slot = sums.setdefault(key, [[] for _ in values])
            for layer, value in enumerate(values):
                if value is not None:
                    slot[layer].append(value)
    return {k: [sum(v) / len(v) if v else math.nan for v in layers] for k, layers in sums.items()}


def svg(lines, title):
    layers = max(len(v) for v in lines.values())
    x = lambda l: LEFT + (WIDTH - LEFT - RIGHT) * (l / max(layers - 1, 1))
    y = lambda r: TOP + (HEIGHT - TOP - BOTTOM) * (1 - (r + 1) / 2)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="{LEFT}" y="22" font-size="15">{escape(title)}</text>']
    for tick in (-1, -0.5, 0, 0.5, 1):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
                   f'stroke="{"#999" if tick == 0 else "#e5e5e5"}"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:+.1f}</text>')
    for l in range(layers):
        out.append(f'<text x="{x(l):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{l + 1}</text>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" text-anchor="middle">layer</text>')
    out.append(f'<text transform="translate(16,{(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
               'text-anchor="middle">mean Spearman ρ</text>')
    for i, ((method, m), values) in enumerate(sorted(lines.items())):
        colour, dash = COLOURS.get(method, "#333"), DASHES[m]
        points = " ".join(f"{x(l):.1f},{y(v):.1f}" for l, v in enumerate(values) if not math.isnan(v))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dash}"><title>{method} {m}</title></polyline>')
        ly = TOP + 16 * i
        out.append(f'<line x1="{WIDTH - RIGHT + 16}" x2="{WIDTH - RIGHT + 46}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 52}" y="{ly + 4}">{method} {m}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reports")
    parser.add_argument("score")
    parser.add_argument("out")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    with open(args.reports, encoding="utf-8") as f:
        reports = [json.loads(line) for line in f if line.strip()]
    lines = series(reports, args.score)
    title = args.title or f"Spearman correlation with {args.score} ({len(reports)} examples)"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(svg(lines, title))


if __name__ == "__main__":
    main()
