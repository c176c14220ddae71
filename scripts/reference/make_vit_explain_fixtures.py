#!/usr/bin/env python3
"""Regenerate tests/fixtures/vision/vit-explain/: vit-explain's rollout and gradient rollout
(as published and fixed) and bert-explain's --discard-ratio maps on the tiny vision
classifiers, from vit_explain_reference.py. Prints a summary of how far the published bugs move
the maps.

Inputs are the pixel values already in tests/fixtures/vision/<case>.pixels.npy (transformers'
own preprocessing), so no preprocessing is involved. Target t = 0 ([CLS]) throughout.

Per case, <case>.json (numbers to 12 significant digits) with
  model, case, pixels, attention_npy / gradient_npy (the .npy files beside it: the float32 attention
  probabilities L×H×n×n the model gave, and ∂s/∂A, s = the top class's logit), tokens,
  special, grid, layers, heads, target, alpha, class {id, label, logit}
  cases: for discard_ratio in (0, 0.5, 0.9) × fusion in (mean, max, min):
    discarded     k = int(n²·r) per layer; zeroed: how many each layer actually zeroed
    boundary_gap  the smallest gap, over the layers, between the largest discarded and the
                  smallest kept entry of Ā (null when nothing is discarded)
    relevance     bert-explain's raw, rollout, flow (L×n, float64): what the Rust side must equal
    vit_explain   {"published", "fixed"}: vit_rollout.py's mask, axis as published (issue #16)
                  and fixed: mask (before the division by its max), normalised, grid ([w, w] or
                  "fails" with torch's error), layout, max_token (see vx_mask)
    fixed_vs_relevance  max |vit-explain fixed result[0, 0, :] - rollout| over every layer
                  (~1e-16 for mean fusion; max/min differ by design: no renormalisation)
  gradient: {"chefer": {"layer", "rollout"} (L×n, SPEC §8 grad-attention),
             "cases": for discard_ratio in (0, 0.5, 0.9): masks as above for
               published      hook order (layer l with gradient L+1-l, issue #6), wrong axis
               fixed_pairing  each layer with its own gradient, wrong axis
               fixed          own gradient, axis fixed
               hooked         what the published code gets from timm's hooks: ∂s/∂scores
                              (pre-softmax) instead of ∂s/∂A, hook order, wrong axis}
index.json lists the files and the summary rows.

Usage: make_vit_explain_fixtures.py [--no-check]   (one torch thread; ~1 min)
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
VISION = os.path.join("tests", "fixtures", "vision")
OUT = os.path.join(VISION, "vit-explain")
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402
import vision_reference as vref  # noqa: E402
import vit_explain_reference as vx  # noqa: E402

CASES = [  # (model folder, case in tests/fixtures/vision with target null)
    ("tiny-vit-cls", "vit-cls-shapes"),
    ("tiny-vit-cls", "vit-cls-tall"),
    ("tiny-deit-teacher", "deit-teacher-shapes"),
    ("tiny-dinov2-cls", "dinov2-cls-shapes"),
    ("tiny-dinov2-registers-cls", "dinov2-registers-cls-shapes"),
]
RATIOS = (0.0, 0.5, 0.9)
DIGITS = 12


def rounded(x):
    import numpy as np

    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v) for v in x]
    if isinstance(x, np.ndarray):
        return rounded(x.tolist())
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if x != x or x in (float("inf"), float("-inf")):
            return None
        return float(f"{x:.{DIGITS}g}")
    return x


def masks_diff(a, b):
    """max |a - b| of two vx_mask()['normalised'] lists (nan if either is null)."""
    import numpy as np

    if a["normalised"] is None or b["normalised"] is None:
        return float("nan")
    return float(np.abs(np.array(a["normalised"]) - np.array(b["normalised"])).max())


def one_case(model_name, case, check):
    import numpy as np
    import torch

    folder = os.path.join("models", model_name)
    ck = vref.Checkpoint(folder)
    pixels = np.load(os.path.join(VISION, case + ".pixels.npy"))
    rows, cols = pixels.shape[1] // ck.patch, pixels.shape[2] // ck.patch
    tokens = ck.specials + [f"patch r{r} c{c}" for r in range(rows) for c in range(cols)]
    n = len(tokens)
    att32, grad32, logits, c = vx.attention_and_gradients(ck.model, pixels)
    if att32.shape[-1] != n:
        ref.fail(f"{case}: {att32.shape[-1]} tokens, expected {n}")
    np.save(os.path.join(OUT, case + ".attention.npy"), att32.numpy())
    np.save(os.path.join(OUT, case + ".gradient.npy"), grad32.numpy())
    att, grad = att32.double().numpy(), grad32.double().numpy()
    atts = [torch.from_numpy(a[None].copy()) for a in att]
    grads = [torch.from_numpy(g[None].copy()) for g in grad]
    atts32 = [a[None].clone() for a in att32]
    label = ck.label_names(logits.shape[0])[c]
    checks = {}
    if check:
        checks = vx.check_gradients(folder, ck.architecture, pixels, c, att32, grad32)
        # bert-explain at r = 0 with mean fusion is SPEC §1: the vision fixture's maps.
        with open(os.path.join(VISION, case + ".json")) as f:
            report = json.load(f)
        maps, _, _, _ = vx.bert_explain_maps(att, 0.0, "mean")
        checks["r0_vs_vision_fixture"] = max(
            float(np.abs(np.array(report["relevance"][k]) - maps[k]).max()) for k in maps)
        if checks["r0_vs_vision_fixture"] > 1e-5:
            ref.fail(f"{case}: r = 0 disagrees with {case}.json by {checks['r0_vs_vision_fixture']:.1e}")

    summary = []
    settings = []
    for ratio in RATIOS:
        for fusion in vx.FUSIONS:
            maps, _, zeroed, gap = vx.bert_explain_maps(att, ratio, fusion)
            pub, _, pub_info = vx.vx_rollout(atts, ratio, fusion, fix_axis=False)
            fix, fix_rows, fix_info = vx.vx_rollout(atts, ratio, fusion, fix_axis=True)
            pub32, _, _ = vx.vx_rollout(atts32, ratio, fusion, fix_axis=False)
            m_pub, m_fix = vx.vx_mask(pub, tokens, (rows, cols)), vx.vx_mask(fix, tokens, (rows, cols))
            m_pub32 = vx.vx_mask(pub32.double(), tokens, (rows, cols))
            fixed_vs = float(np.abs(fix_rows.numpy() - maps["rollout"]).max())
            # Only mean fusion ranks the same matrix in both (max/min: bert-explain renormalises first).
            same_sets = (all(np.array_equal(np.sort(a.numpy()), b) for a, b in zip(fix_info["zeroed"], zeroed))
                         if fusion == "mean" else None)
            if fusion == "mean" and fixed_vs > 1e-12:
                ref.fail(f"{case} r={ratio}: vit-explain fixed differs from bert-explain by {fixed_vs:.1e}")
            settings.append({
                "discard_ratio": ratio, "fusion": fusion,
                "discarded": vx.discard_count(n, ratio), "zeroed": [int(len(z)) for z in zeroed],
                "boundary_gap": gap,
                "relevance": {k: v for k, v in maps.items()},
                "vit_explain": {"published": m_pub, "fixed": m_fix},
                "fixed_vs_relevance": fixed_vs,
            })
            summary.append({"case": case, "fusion": fusion, "r": ratio,
                            "bug16": masks_diff(m_pub, m_fix), "fixed_vs_item3": fixed_vs,
                            "same_discard": same_sets, "topk_stable": pub_info["stable"], "gap": gap,
                            "f32_vs_f64": masks_diff(m_pub, m_pub32),
                            "grid": m_pub["grid"] if m_pub["grid"] == "fails" else "x".join(map(str, m_pub["grid"]))})

    chefer_layer, chefer_roll = vx.chefer(att, grad)
    score_grads = [torch.from_numpy(g[None].copy()) for g in vx.grad_wrt_scores(att, grad)]
    patch = [i for i, tok in enumerate(tokens) if tok.startswith("patch")]
    grad_cases, grad_summary = [], []
    for ratio in RATIOS:
        variants = {
            "published": vx.vx_grad_rollout(atts, grads, ratio, "published", False),
            "fixed_pairing": vx.vx_grad_rollout(atts, grads, ratio, "fixed", False),
            "fixed": vx.vx_grad_rollout(atts, grads, ratio, "fixed", True),
            "hooked": vx.vx_grad_rollout(atts, score_grads, ratio, "published", False),
        }
        masks = {k: {**vx.vx_mask(v[0], tokens, (rows, cols)), "cls_zeroed": v[2]["cls_zeroed"]}
                 for k, v in variants.items()}
        grad_cases.append({"discard_ratio": ratio, **masks})

        def rho(name):
            m = masks[name]["mask"]
            return vx.spearman([m[i - 1] for i in patch], chefer_roll[-1][patch])

        grad_summary.append({"case": case, "r": ratio,
                             "bug6": masks_diff(masks["published"], masks["fixed_pairing"]),
                             "axis": masks_diff(masks["fixed_pairing"], masks["fixed"]),
                             "hooked": masks_diff(masks["hooked"], masks["published"]),
                             "rho_fixed": rho("fixed"), "rho_published": rho("published"),
                             "rho_hooked": rho("hooked"),
                             "cls_zeroed": "/".join(str(masks[k]["cls_zeroed"]) for k in variants),
                             "topk_stable": all(v[2]["stable"] for v in variants.values())})

    fixture = {
        "model": folder, "case": case,
        "pixels": os.path.join(VISION, case + ".pixels.npy"),
        "attention_npy": os.path.join(OUT, case + ".attention.npy"),
        "gradient_npy": os.path.join(OUT, case + ".gradient.npy"),
        "tokens": tokens, "special": [i < len(ck.specials) for i in range(n)],
        "grid": [rows, cols], "layers": int(att.shape[0]), "heads": int(att.shape[1]),
        "target": 0, "alpha": vx.ALPHA,
        "class": {"id": c, "label": label, "logit": float(logits[c])},
        "checks": checks,
        "cases": settings,
        "gradient": {"chefer": {"layer": chefer_layer, "rollout": chefer_roll}, "cases": grad_cases},
    }
    with open(os.path.join(OUT, case + ".json"), "w") as f:
        json.dump(rounded(fixture), f, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")
    return summary, grad_summary, checks


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        if x != x:
            return "nan"
        if x == float("inf"):
            return "-"
        return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.1e}"
    return str(x)


def table(rows, keys):
    cells = [keys] + [[fmt(r[k]) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(keys))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells)


def main():
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true", help="skip the gradient and r = 0 checks")
    args = ap.parse_args()
    os.chdir(REPO)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    summary, grad_summary, files = [], [], []
    try:
        for model_name, case in CASES:
            s, g, checks = one_case(model_name, case, not args.no_check)
            summary += s
            grad_summary += g
            files.append({"model": model_name, "case": case, "file": case + ".json"})
            ref.log(f"{case}: done" + ("".join(f", {k} {v:.1e}" for k, v in checks.items())))
    except ref.ReferenceError as e:
        print(f"make_vit_explain_fixtures: error: {e}", file=sys.stderr)
        sys.exit(1)
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(rounded({"files": files, "rollout_summary": summary, "gradient_summary": grad_summary}),
                  f, indent=1)
        f.write("\n")
    print("rollout: bug16 = max |published - fixed| of the normalised masks (tokens after [CLS]);")
    print("  fixed_vs_item3 = max |vit-explain fixed result[0,0,:] - bert-explain rollout| (all layers);")
    print("  (max/min differ by design); same_discard = vit-explain zeroes the entries bert-explain does")
    print("  (mean only); topk_stable = torch.topk's choice among ties gives the stable sort's matrix;")
    print("  gap = bert-explain's smallest discard boundary gap; f32_vs_f64 = published mask computed in")
    print("  float32 (as published) vs float64; grid = what the reshape gives; nan: a mask of zeros (0/0)")
    print(table(summary, ["case", "fusion", "r", "bug16", "fixed_vs_item3", "same_discard", "topk_stable",
                          "gap", "f32_vs_f64", "grid"]))
    print()
    print("gradient rollout: bug6 = max |published - fixed pairing| (normalised masks); axis = fixed pairing")
    print("  with vs without the axis fix; hooked = max |∂s/∂scores variant - published|; rho_* = Spearman")
    print("  with Chefer's last-layer rollout over the patches; cls_zeroed = layers whose nonzero [CLS]->[CLS]")
    print("  entry the discard zeroed (published/fixed_pairing/fixed/hooked: no exemption in vit_grad_rollout.py)")
    print(table(grad_summary, ["case", "r", "bug6", "axis", "hooked", "rho_fixed", "rho_published", "rho_hooked",
                               "cls_zeroed", "topk_stable"]))


if __name__ == "__main__":
    main()
