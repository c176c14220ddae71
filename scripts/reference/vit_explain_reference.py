#!/usr/bin/env python3
"""An independent reference for vit-explain's methods (jacobgil/vit-explain, `vit_rollout.py` and
`vit_grad_rollout.py`), written from their description, and for bert-explain's `--discard-ratio`.
Never uses any Rust code, and copies no vit-explain code.

vit-explain (on one image, batch 1; `attentions` in layer order, each 1×H×n×n):

  rollout (as published)
      fused_l   = mean / max / min over heads (no renormalisation)
      discard   k = int(n·n·r) (Python float product, truncated); the k smallest entries of the
                flattened fused n×n matrix (torch.topk(largest=False), whose order among ties is
                torch's); flat index 0 ([CLS]→[CLS]) is removed from them, the rest set to 0
                (in place: the flat view shares the fused matrix's storage)
      a_l       = (fused_l + I) / 2, then a_l / a_l.sum(dim=-1): a (1, n) divisor broadcast
                against (1, n, n), so entry [i][j] is divided by ROW j's sum (issue #16)
      result    = a_L ··· a_1 (result = a_l @ result from the identity)
      mask      = result[0, 0, 1:] (every token after [CLS]), reshaped to int(sqrt(len))²,
                then divided by its max
  rollout (axis fixed): the same with a_l / a_l.sum(dim=-1, keepdim=True)
  gradient rollout (as published)
      per layer (attention · grad).mean(heads), entries < 0 set to 0 (after the head mean),
      then the same discard WITHOUT the [CLS]→[CLS] exemption (that line is commented out in
      vit_grad_rollout.py), + I, / 2, normalise on the wrong axis, product, mask.
      The gradients come from backward hooks, which fire last layer first, and are zipped with
      the attentions first layer first (issue #6): layer l's attention meets layer L+1-l's
      gradient. `pairing="fixed"` pairs layer l with its own gradient.

bert-explain's --discard-ratio r (SPEC §1 plus the discard; numpy, float64):

  Ā_l      mean over heads (max/min: then rows renormalised to sum 1)
  Ā'_l     Ā_l with its k = floor(float64(n²)·r) smallest entries set to 0, ties by lower flat
           index first (a stable sort), except entry (0, 0), which is kept (so one fewer is
           zeroed when it is among them); r = 0: Ā'_l = Ā_l
  Â_l      rownormalise((1 - α)·Ā'_l + α·I), α = 0.5 (a zero row stays zero)
  raw[l] = Ā_l[t] (not discarded); rollout and flow as SPEC §1 on Â (reference.py's
  rollout_rows and flow_rows: networkx Edmonds-Karp), L × n from target t.

For mean fusion at α = 0.5, Â_l is exactly vit-explain's a_l with the axis fixed, so its
rollout row t = 0 equals vit-explain's fixed result[0, 0, :] (checked in the fixtures).

Chefer et al. 2021 as SPEC §8's grad-attention: M_l = mean_h max(0, ∂s/∂A ⊙ A), R_0 = I,
R_l = R_{l-1} + M_l·R_{l-1}, rollout[l] = R_l[t] / Σ_j R_l[t][j], layer[l] = M_l[t].

Gradients: s = the class logit (DeiT with teacher: its `logits`, the mean of both heads), taken
with torch autograd on the eager attention probabilities (retain_grad on output_attentions; in
eval mode the returned tensor is the one multiplied by the values). check_gradients() verifies
them by central finite differences through a registered attention function that perturbs A.

What vit-explain's hooks actually deliver (checked on a timm-shaped toy module, torch 2.15):
timm's Attention runs `attn = attn.softmax(-1); attn = self.attn_drop(attn)`; Dropout in eval
(or with p = 0) returns its input tensor itself, so no autograd node belongs to attn_drop and
the old-style `register_backward_hook` lands on the softmax's node: grad_input[0] is ∂s/∂scores
(pre-softmax), not ∂s/∂A. grad_wrt_scores() gives that from A and ∂s/∂A (softmax Jacobian:
A ⊙ (g - rowsum(A ⊙ g))); the fixtures carry it as the "hooked" variant.

Usage: vit_explain_reference.py --model DIR --pixels FILE.npy [--discard-ratio R] [--fusion F]
                                [--check]
prints the last-layer masks and maps as JSON (the fixtures come from
make_vit_explain_fixtures.py).
"""

import argparse
import contextlib
import io
import json
import os
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402

FUSIONS = ("mean", "max", "min")
ALPHA = 0.5


def discard_count(n, ratio):
    """int(n·n·ratio) as vit-explain computes it (float product, truncated), which is also
    bert-explain's floor(float64(n²)·r). Fails where that differs from the exact ⌊r·n²⌋ of the
    ratio's decimal value, so that no fixture depends on the float rounding."""
    k = int(n * n * ratio)
    exact = int(Fraction(repr(ratio)) * n * n)
    if k != exact:
        ref.fail(f"int({n}·{n}·{ratio}) = {k} but ⌊{ratio}·{n * n}⌋ = {exact}: pick another ratio")
    return k


# ---------------------------------------------------------------- vit-explain (torch)

def _vx_fuse(attention, fusion):
    """1×H×n×n → 1×n×n, no renormalisation."""
    if fusion == "mean":
        return attention.mean(dim=1)
    if fusion == "max":
        return attention.max(dim=1).values
    if fusion == "min":
        return attention.min(dim=1).values
    ref.fail(f"fusion {fusion!r} is not one of {FUSIONS}")


def _vx_discard(fused, ratio, keep_cls, info):
    """Zero the int(n²·r) smallest entries of fused (1×n×n) in place through its flat view;
    keep_cls drops flat index 0 from them (vit_rollout.py), as vit_grad_rollout.py does not.
    Records in info: "zeroed" (the flat indices, per layer), "stable" (False once torch.topk's
    choice among ties changed the matrix compared with a stable sort: ties by lower index) and
    "cls_zeroed" (layers where a nonzero [CLS]→[CLS] entry was zeroed)."""
    import torch

    flat = fused.view(fused.size(0), -1)
    k = discard_count(fused.size(-1), ratio)
    _, chosen = flat.topk(k, dim=-1, largest=False)
    chosen = chosen.reshape(-1)
    stable = torch.argsort(flat[0], stable=True)[:k]
    if keep_cls:
        chosen = chosen[chosen != 0]
        stable = stable[stable != 0]
    if bool((flat[0, 0] != 0) & (chosen == 0).any()):
        info["cls_zeroed"] += 1
    other = flat[0].clone()
    other[stable] = 0
    flat[0, chosen] = 0
    info["stable"] = info["stable"] and bool(torch.equal(other, flat[0]))
    info["zeroed"].append(chosen)


def _vx_step(fused, fix_axis):
    import torch

    n = fused.size(-1)
    a = (fused + torch.eye(n, dtype=fused.dtype)) / 2
    return a / a.sum(dim=-1, keepdim=fix_axis)


def vx_rollout(attentions, ratio, fusion, fix_axis=False):
    """vit_rollout.py's rollout (fix_axis: issue #16 fixed). attentions: L tensors 1×H×n×n.
    Returns (result 1×n×n, rows L×n: result[0, 0, :] after each layer, info: see _vx_discard)."""
    import torch

    n = attentions[0].size(-1)
    result = torch.eye(n, dtype=attentions[0].dtype)
    rows, info = [], {"zeroed": [], "stable": True, "cls_zeroed": 0}
    for attention in attentions:
        fused = _vx_fuse(attention, fusion)
        _vx_discard(fused, ratio, True, info)
        result = _vx_step(fused, fix_axis) @ result
        rows.append(result[0, 0].clone())
    return result, torch.stack(rows), info


def vx_grad_rollout(attentions, gradients, ratio, pairing="published", fix_axis=False):
    """vit_grad_rollout.py's rollout. gradients: L tensors 1×H×n×n in layer order;
    pairing "published" zips them in hook order (last layer first) with the attentions,
    "fixed" pairs each layer with its own. Returns (result, rows L×n, info)."""
    import torch

    if pairing not in ("published", "fixed"):
        ref.fail(f"pairing {pairing!r}")
    grads = list(reversed(gradients)) if pairing == "published" else list(gradients)
    n = attentions[0].size(-1)
    result = torch.eye(n, dtype=attentions[0].dtype)
    rows, info = [], {"zeroed": [], "stable": True, "cls_zeroed": 0}
    for attention, grad in zip(attentions, grads):
        fused = (attention * grad).mean(dim=1)
        fused[fused < 0] = 0
        _vx_discard(fused, ratio, False, info)
        result = _vx_step(fused, fix_axis) @ result
        rows.append(result[0, 0].clone())
    return result, torch.stack(rows), info


def vx_mask(result, tokens, grid):
    """What vit-explain returns from result (1×n×n): result[0, 0, 1:] reshaped to
    int(sqrt(len))² and divided by its max. `mask` is before the division; `normalised` is after
    it, over every token after [CLS] (so also where the reshape fails, as if it had not been
    there; null when the max is 0); `grid` is the shape it reshapes to or "fails" (with torch's
    message), `layout` says whether that grid is the image's patch grid."""
    import numpy as np

    mask = result[0, 0, 1:]
    width = int(mask.size(-1) ** 0.5)
    out = {"mask": mask.tolist()}
    try:
        mask.reshape(width, width)
        out["grid"] = [width, width]
        patches_only = all(tok.startswith("patch") for tok in tokens[1:])
        out["layout"] = "patch grid" if patches_only and [width, width] == list(grid) else "wrong layout"
    except RuntimeError as e:
        out["grid"] = "fails"
        out["error"] = str(e)
        out["layout"] = "fails"
    m = np.asarray(mask.tolist())
    top = m.max()
    out["normalised"] = (m / top).tolist() if top > 0 else None
    out["max_token"] = tokens[1 + int(np.argmax(m))]
    return out


# ---------------------------------------------------------------- bert-explain (numpy, f64)

def fuse(att, fusion):
    """att L×H×n×n → Ā L×n×n; max/min rows renormalised to sum 1 (SPEC §1)."""
    if fusion == "mean":
        return att.mean(axis=1)
    if fusion not in FUSIONS:
        ref.fail(f"fusion {fusion!r} is not one of {FUSIONS}")
    fused = att.max(axis=1) if fusion == "max" else att.min(axis=1)
    sums = fused.sum(axis=-1, keepdims=True)
    return fused / sums


def discard(matrix, ratio):
    """One layer's n×n Ā → (Ā', zeroed flat indices, gap): the k smallest entries (stable sort:
    ties by lower flat index) set to 0 except flat index 0. gap = the distance between the
    largest value discarded and the smallest kept (before the exemption), which says how far
    float noise is from changing the choice (inf when k is 0 or n²)."""
    import numpy as np

    n = matrix.shape[0]
    k = discard_count(n, ratio)
    flat = matrix.reshape(-1)
    order = np.argsort(flat, kind="stable")
    chosen = order[:k]
    gap = float(flat[order[k]] - flat[order[k - 1]]) if 0 < k < n * n else float("inf")
    chosen = chosen[chosen != 0]
    out = flat.copy()
    out[chosen] = 0.0
    return out.reshape(n, n), np.sort(chosen), gap


def augment(matrix, alpha=ALPHA):
    """rownormalise((1 - α)·M + α·I); a zero row stays zero."""
    import numpy as np

    n = matrix.shape[0]
    m = (1 - alpha) * matrix + alpha * np.eye(n)
    sums = m.sum(axis=-1, keepdims=True)
    return np.divide(m, sums, out=np.zeros_like(m), where=sums != 0)


def bert_explain_maps(att, ratio, fusion, t=0, alpha=ALPHA, flow=True):
    """att: float64 L×H×n×n. Returns {"raw", "rollout", "flow"} (L×n arrays), the augmented
    matrices Â (L×n×n), the zeroed index sets and the smallest boundary gap."""
    import numpy as np

    fused = fuse(att, fusion)
    kept, zeroed, gaps = [], [], []
    for layer in fused:
        d, z, gap = discard(layer, ratio) if ratio > 0 else (layer, np.zeros(0, dtype=int), float("inf"))
        kept.append(augment(d, alpha))
        zeroed.append(z)
        gaps.append(gap)
    aug = np.stack(kept)
    maps = {"raw": fused[:, t, :], "rollout": ref.rollout_rows(aug, t)}
    if flow:
        with contextlib.redirect_stderr(io.StringIO()):  # flow_rows logs every layer
            maps["flow"] = ref.flow_rows(aug, t)
    return maps, aug, zeroed, min(gaps)


# ---------------------------------------------------------------- gradients, Chefer

def chefer(att, grad, t=0):
    """SPEC §8 grad-attention: (layer L×n = M_l[t] unnormalised, rollout L×n)."""
    import numpy as np

    m = np.maximum(0.0, grad * att).mean(axis=1)
    n = att.shape[-1]
    r = np.eye(n)
    layer, roll = [], []
    for ml in m:
        r = r + ml @ r
        layer.append(ml[t])
        roll.append(r[t] / r[t].sum())
    return np.stack(layer), np.stack(roll)


def grad_wrt_scores(att, grad):
    """∂s/∂scores from A = softmax(scores) and g = ∂s/∂A: A ⊙ (g - Σ_k A_ik g_ik)."""
    return att * (grad - (att * grad).sum(axis=-1, keepdims=True))


def attention_and_gradients(model, pixels, class_index=None):
    """One forward and backward pass. pixels: 3×H×W. Returns (att L×H×n×n, grad L×H×n×n, both
    as float32 torch tensors the model gave, logits, class index): grad = ∂ logits[class] / ∂A
    for every layer's attention probabilities (the full derivative, through later layers)."""
    import torch

    with torch.enable_grad():
        model.zero_grad(set_to_none=True)
        x = torch.as_tensor(pixels)[None]
        out = model(pixel_values=x, output_attentions=True)
        atts = list(out.attentions)
        for a in atts:
            a.retain_grad()
        logits = out.logits[0]
        c = int(torch.argmax(logits)) if class_index is None else int(class_index)
        logits[c].backward()
        grads = [a.grad for a in atts]
        if any(g is None for g in grads):
            ref.fail("no gradient reached the returned attention probabilities")
        att = torch.stack([a.detach()[0] for a in atts])
        grad = torch.stack([g[0] for g in grads])
    return att, grad, logits.detach(), c


_PROBE = {"calls": 0, "delta": None, "layer": None, "keep": []}


def _probe_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention that adds _PROBE["delta"] to one layer's probabilities (for finite
    differences) and keeps the scores and probabilities (for the scores' gradient)."""
    import torch

    layer = _PROBE["calls"]
    _PROBE["calls"] += 1
    scores = torch.matmul(query, key.transpose(2, 3)) * (scaling if scaling is not None else query.size(-1) ** -0.5)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1)
    if _PROBE["delta"] is not None and layer == _PROBE["layer"]:
        probs = probs + _PROBE["delta"]
    if scores.requires_grad:
        scores.retain_grad()
        probs.retain_grad()
    _PROBE["keep"].append((scores, probs))
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


def check_gradients(folder, architecture, pixels, class_index, att32, grad32, eps=1e-6, seed=0):
    """The float64 model, loaded with _probe_attention: (1) its ∂s/∂A agrees with grad32 (f32)
    to 1e-4 relative; (2) for a random direction D per layer, (s(A+εD) - s(A-εD)) / 2ε agrees
    with <∂s/∂A, D> to 1e-6 relative; (3) its ∂s/∂scores agrees with grad_wrt_scores. Returns
    the worst relative errors."""
    import numpy as np
    import torch
    import transformers
    from transformers import AttentionInterface

    AttentionInterface.register("vit_explain_probe", _probe_attention)
    cls = getattr(transformers, architecture)
    model = cls.from_pretrained(folder, attn_implementation="vit_explain_probe", dtype=torch.float64).eval()
    x = torch.as_tensor(pixels, dtype=torch.float64)[None]

    def score():
        _PROBE["calls"] = 0
        _PROBE["keep"] = []
        return model(pixel_values=x).logits[0, class_index]

    with torch.enable_grad():
        s = score()
        s.backward()
    kept = list(_PROBE["keep"])
    g64 = torch.stack([p.grad[0] for _, p in kept]).numpy()
    a64 = torch.stack([p.detach()[0] for _, p in kept]).numpy()
    gs64 = torch.stack([sc.grad[0] for sc, _ in kept]).numpy()
    scale = np.abs(g64).max()
    worst = {"grad_f32_vs_f64": float(np.abs(g64 - grad32.double().numpy()).max() / scale),
             "attention_f32_vs_f64": float(np.abs(a64 - att32.double().numpy()).max()),
             "scores_grad": float(np.abs(gs64 - grad_wrt_scores(a64, g64)).max() / np.abs(gs64).max())}
    rng = np.random.default_rng(seed)
    fd = 0.0
    with torch.no_grad():
        for layer in range(a64.shape[0]):
            d = rng.standard_normal(a64.shape[1:])
            _PROBE["layer"] = layer
            _PROBE["delta"] = torch.as_tensor(eps * d)[None]
            up = float(score())
            _PROBE["delta"] = torch.as_tensor(-eps * d)[None]
            down = float(score())
            _PROBE["delta"] = None
            numeric = (up - down) / (2 * eps)
            analytic = float((g64[layer] * d).sum())
            fd = max(fd, abs(numeric - analytic) / max(abs(analytic), 1e-12))
    worst["finite_differences"] = fd
    bounds = {"grad_f32_vs_f64": 1e-4, "attention_f32_vs_f64": 5e-5, "scores_grad": 1e-12, "finite_differences": 1e-6}
    bad = {k: v for k, v in worst.items() if v > bounds[k]}
    if bad:
        ref.fail(f"{folder}: gradient check failed: {bad}")
    return worst


def spearman(a, b):
    """Spearman's rank correlation (average ranks for ties)."""
    import numpy as np

    def ranks(x):
        x = np.asarray(x, dtype=float)
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        sx = x[order]
        i = 0
        while i < len(x):
            j = i
            while j + 1 < len(x) and sx[j + 1] == sx[i]:
                j += 1
            r[order[i:j + 1]] = (i + j) / 2.0
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


# ---------------------------------------------------------------- command line

def main():
    import numpy as np
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="local classifier folder (vit, deit, dinov2)")
    ap.add_argument("--pixels", required=True, help="pixel values (3×H×W float32 .npy)")
    ap.add_argument("--discard-ratio", type=float, default=0.9)
    ap.add_argument("--fusion", default="max", choices=FUSIONS)
    ap.add_argument("--check", action="store_true", help="verify the gradients (float64, finite differences)")
    args = ap.parse_args()
    import vision_reference as vref

    try:
        ck = vref.Checkpoint(args.model)
        pixels = np.load(args.pixels)
        rows, cols = pixels.shape[1] // ck.patch, pixels.shape[2] // ck.patch
        tokens = ck.specials + [f"patch r{r} c{c}" for r in range(rows) for c in range(cols)]
        att32, grad32, logits, c = attention_and_gradients(ck.model, pixels)
        atts = [a[None] for a in att32.double()]
        grads = [g[None] for g in grad32.double()]
        out = {"class": c, "tokens": tokens}
        for name, fix in (("published", False), ("fixed", True)):
            result, _, _ = vx_rollout([a.clone() for a in atts], args.discard_ratio, args.fusion, fix)
            out[f"rollout_{name}"] = vx_mask(result, tokens, (rows, cols))
        for name, pairing, fix in (("published", "published", False), ("fixed", "fixed", True)):
            result, _, _ = vx_grad_rollout(atts, grads, args.discard_ratio, pairing, fix)
            out[f"grad_rollout_{name}"] = vx_mask(result, tokens, (rows, cols))
        maps, _, _, _ = bert_explain_maps(att32.double().numpy(), args.discard_ratio, args.fusion)
        out["bert_explain"] = {k: v.tolist() for k, v in maps.items()}
        out["chefer_rollout"] = chefer(att32.double().numpy(), grad32.double().numpy())[1].tolist()
        if args.check:
            out["check"] = check_gradients(args.model, ck.architecture, pixels, c, att32, grad32)
    except ref.ReferenceError as e:
        print(f"vit_explain_reference: error: {e}", file=sys.stderr)
        sys.exit(1)
    torch.set_printoptions(precision=6)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
