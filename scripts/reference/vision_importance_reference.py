#!/usr/bin/env python3
"""Independent reference for the importance scores and the faithfulness evaluation
(`--evaluate`: correlations and ERASER) of the vision transformers (ViT, DeiT, DINOv2, DINOv2
with registers), written from the definitions below with transformers + torch + captum + numpy
(+ scipy for a cross-check). Never calls or reads the Rust code, nor any output of it.

Input: transformers' own pixel values of a vision case (tests/fixtures/vision/<case>.pixels.npy,
3×H×W float32, written by make_vision_fixtures.py; no preprocessing here), the checkpoint loaded
as vision_reference.Checkpoint loads it (the `architectures` class, float32, eval, eager
attention), and the attention maps of tests/fixtures/methods/vision/<case>.json (written by
vision_methods_reference.py: "attention" layer = raw, rollout, flow, L × n).

Tokens, in the model's order: [CLS], then DeiT's [DIST] or DINOv2-with-registers' [REG1] …
(transformers inserts the registers right after [CLS]), then the patches row-major; n tokens.

  e      the "word embeddings" (n × d): each token BEFORE positions are added: the cls_token /
         distillation_token / register_tokens parameters, and each patch's projection (the patch
         convolution's output, its bias included)
  h      the embedding block's output, what the first encoder layer reads: e plus the position
         embeddings (ViT/DeiT: `position_embeddings`, or the module's own
         `interpolate_pos_encoding` when the model is asked to interpolate; DINOv2: always the
         module's `interpolate_pos_encoding`, bicubic, antialiased for the register model);
         registers get none: [CLS] and the patches get their positions first and the register
         rows are put back after [CLS], as transformers does. The embeddings module's forward is
         replaced (an instance attribute, for the duration of a call) by one that builds h this
         way from a given e and ignores the pixels' content (their height and width still decide
         the position grid); encoder, final norm, pooling and head are transformers' own.
  y, p   y = argmax of the model's `logits` (DeiT with teacher: its `logits`, the mean of the
         class and distillation heads), p = softmax(logits)[y] from the float32 model
  b      the blank ("mean pixel"): the patch projection's bias, i.e. the embedding of a patch
         whose pixel values are all 0 (the processor's image_mean after normalisation)

Scores (n values each, every token including the leading ones), float32 autograd:

  gradient_norm                   ‖∂p/∂e_j‖₂
  gradient_x_input                Σ_d (∂p/∂e_j)_d e_jd
  gradient_sum_abs                |Σ_d (∂p/∂e_j)_d|, computed as it comes out (not written as 0):
                                  the pre-norm model is invariant to e_j + c·1 (every block reads
                                  the residual stream through a LayerNorm, the head reads the
                                  final LayerNorm), so this is float32 rounding only; its largest
                                  value over the largest gradient_norm is printed and stored
                                  under checks.gradient_sum_relative
  gradient_x_input_abs            |gradient_x_input|
  embedding_gradient_sum_abs      |Σ_d (∂p/∂h_j)_d|
  embedding_gradient_x_input_abs  |Σ_d (∂p/∂h_j)_d h_jd|
                                  (h = e + a constant, so ∂p/∂h = ∂p/∂e exactly, and
                                  embedding_gradient_sum_abs = gradient_sum_abs: rounding too)
  blank_out                       p − p(e with row j replaced by b), for every j (the leading
                                  tokens too); blank_out_abs its absolute value
  integrated_gradients            captum's IntegratedGradients on e, baseline b at every row (the
                                  leading tokens too), method "gausslegendre", n_steps 50,
                                  summed over d; integrated_gradients_check = {steps, sum,
                                  difference = p − p(baseline), delta = sum − difference}

`importance` = {word (config id2label[y]), id y, probability p, blank_token "mean pixel", the
nine scores, integrated_gradients_check}: the JSON of bert-explain's `Importance`.

`evaluation` (bert-explain's `Evaluation`): per score {raw, rollout, flow}: one Spearman ρ per
layer of the attention maps, over all n tokens (without_specials false), as
src/faithfulness/correlations.rs defines it: Pearson's correlation of the ranks, ties sharing
their mean rank, where values count as tied when |a − b| ≤ 1e-12·max(|a|, |b|) (a run of ties
compared with its first value, after sorting ascending); null where either side's ranks are
constant. `eraser` = {"attention": {"rollout": Aopc, "flow": Aopc}} of the last layer's rollout
and flow maps, `eraser_importance` = {score: Aopc} (signed scores as they are), Aopc =
{comprehensiveness, sufficiency}:

  removable   the patches except the explained target position (the leading tokens never)
  ranking     removable tokens by round(v_j·1e10) (half away from zero, as Rust's f64::round),
              highest first, ties by the lower position
  k           ⌈pct·m/100⌉ for pct in 1, 5, 10, 20, 50 (m = number of removable tokens)
  comprehensiveness_k = p − p(the top k rows of e → b)
  sufficiency_k       = p − p(every removable row but the top k → b)
  AOPC        the mean over the five k

Self-checks (each asserted; the maxima printed and stored under `checks`):

  forward        the replaced embeddings forward reproduces the unpatched model's logits
                 (≤ 1e-6; in practice 0) and the first layer's input h (≤ 1e-6)
  blank          for every patch j, p(e with row j → b) equals p of the unpatched model on the
                 pixel values with patch j's pixels set to 0 (≤ 1e-6)
  eraser_pixels  every ERASER input (rows → b) likewise against zeroed pixels (≤ 1e-6)
  h_gradient     ∂p/∂h equals ∂p/∂e (≤ 1e-12, in practice identical)
  gradient64     the float32 gradient against a float64 copy of the model (relative ≤ 1e-4;
                 informational: the float64 gradient_sum relative size is stored too)
  ig             captum's convergence delta equals sum − difference (≤ 1e-6). Completeness at
                 50 points is NOT asserted: these tiny models are sharp, and the straight path
                 from the blank passes through dips of p that 50 Gauss-Legendre points
                 under-resolve (|delta| is 0.7% to 130% of |difference| here). Instead: the same
                 rule with 1000 points sums to the difference (≤ 1e-3 relative; 1e-7 to 3.4e-4),
                 so the attributions are right, and the 50-point rule on a float64 copy of the
                 model gives the same per-token values (≤ 1e-4 of the largest; ~2e-6), so the
                 50-point values are a float32-stable target, deltas and all
  prediction     y and p against the vision fixture's prediction (tests/fixtures/vision/<case>.json,
                 ≤ 1e-6) and the maps' token count against n
  spearman       where no two values of a side are within 1e-9 relative, ρ equals
                 scipy.stats.spearmanr's (≤ 1e-12)

Fixtures: tests/fixtures/importance/vision/<case>.json = {"name", "model", "pixels" (repo-relative
.npy), "target", "tokens", "importance", "evaluation", "checks", "rank_gaps", "eraser_details"},
numbers rounded to 12 significant digits, and cases.json: [{"name", "model", "pixels", "target"}]. The
extra keys: `checks` (the self-checks' maxima, gradient_sum_relative, ig delta); `rank_gaps`
(how close the correlations are to a rank swap: per score the smallest gap between two values
not counted as tied, over max |v|, and per attention map row the same over the pair's larger
value; a gap near float32 noise, ~1e-6, can swap two ranks in another implementation and move ρ
by about 12/(n(n²−1)) per swap); and
`eraser_details` per map ("attention rollout", "attention flow", each score): k,
comprehensiveness_k, sufficiency_k, ranked (token positions), cuts (for each distinct 0 < k < m:
the k-th and (k+1)-th ranked values, their gap over max |v| of the removable tokens, and
whether they tie after the 1e-10 rounding), and `fragile` (a cut with relative gap < 1e-4 that
is not an exact tie: another implementation's float32 noise can reorder it; gradient_sum_abs and
embedding_gradient_sum_abs, rounding only, always are).

Cases: every case of tests/fixtures/methods/vision/cases.json whose model has a classification
head (the encoder-only ones are skipped), with its target (the maps' explained position; the
head reads what it reads regardless).

Usage (from the repository root; one torch thread, deterministic):
  .venv-reference/bin/python scripts/reference/vision_importance_reference.py [NAME ...]
"""

import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402
import vision_reference as vis  # noqa: E402
from vision_methods_reference import layers_of  # noqa: E402

METHODS = os.path.join(REPO, "tests", "fixtures", "methods", "vision")
VISION = os.path.join(REPO, "tests", "fixtures", "vision")
OUT = os.path.join(REPO, "tests", "fixtures", "importance", "vision")
DIGITS = 12
STEPS = 50
MANY_STEPS = 1000
PERCENTS = (1, 5, 10, 20, 50)
BLANK_TOKEN = "mean pixel"
# bert-explain's report order (src/faithfulness/mod.rs: gradients, blank-out, integrated gradients)
SCORES = ("gradient_norm", "gradient_x_input", "gradient_sum_abs", "gradient_x_input_abs",
          "embedding_gradient_sum_abs", "embedding_gradient_x_input_abs", "blank_out", "blank_out_abs",
          "integrated_gradients")
ROUNDING_ONLY = ("gradient_sum_abs", "embedding_gradient_sum_abs")
MIN_RELATIVE_GAP = 1e-4
BOUNDS = {"forward_logits": 1e-6, "forward_h": 1e-6, "blank_pixels": 1e-6, "eraser_pixels": 1e-6,
          "h_gradient": 1e-12, "gradient64_relative": 1e-4, "ig_delta_vs_captum": 1e-6,
          f"ig_delta_relative_{MANY_STEPS}_steps": 1e-3, "ig_float64_relative": 1e-4,
          "vs_vision_fixture": 1e-6, "spearman_vs_scipy": 1e-12}


class Embedder:
    """The model run from its word embeddings e ([b, n, d]) instead of its pixels."""

    def __init__(self, model, family, specials, pixels):
        self.model = model
        self.emb = model.base_model.embeddings
        self.family = family
        self.registers = sum(s.startswith("[REG") for s in specials)
        self.lead = len(specials)
        self.pixels = pixels  # [1, 3, H, W], the model's dtype
        self.h = None
        if family == "deit" and not hasattr(self.emb, "distillation_token"):
            ref.fail("DeiT embeddings without a distillation token")
        tokens = getattr(self.emb, "register_tokens", None)
        if self.registers != (0 if tokens is None else tokens.shape[1]):
            ref.fail("the register count and the embeddings module disagree")

    def words(self, pixels=None):
        """e: [1, n, d] (detached): [CLS], [DIST] or the registers, the patches' projections."""
        emb = self.emb
        with torch.no_grad():
            patches = emb.patch_embeddings(self.pixels if pixels is None else pixels)
            parts = [emb.cls_token]
            if self.family == "deit":
                parts.append(emb.distillation_token)
            if self.registers:
                parts.append(emb.register_tokens)
            return torch.cat([p.expand(patches.shape[0], -1, -1) for p in parts] + [patches], dim=1).detach()

    def blank(self):
        return self.emb.patch_embeddings.projection.bias.detach().clone()

    def block(self, e, height, width, interpolate_pos_encoding=False):
        """h from e, as transformers' embeddings module builds it from its own e."""
        emb = self.emb
        if self.family in ("vit", "deit"):
            if interpolate_pos_encoding:
                h = e + emb.interpolate_pos_encoding(e, height, width)
            else:
                if height != emb.image_size[0] or width != emb.image_size[1]:
                    ref.fail(f"input image size ({height}*{width}) is not the model's {emb.image_size}")
                h = e + emb.position_embeddings
        elif self.family == "dinov2":
            h = e + emb.interpolate_pos_encoding(e, height, width)
        elif self.family == "dinov2_with_registers":
            r = self.registers
            x = torch.cat((e[:, :1], e[:, 1 + r:]), dim=1)
            x = x + emb.interpolate_pos_encoding(x, height, width)
            h = torch.cat((x[:, :1], e[:, 1:1 + r], x[:, 1:]), dim=1)
        else:
            ref.fail(f"unknown family {self.family}")
        return emb.dropout(h)

    def logits(self, e):
        """The model's logits with the embeddings module replaced by block(e)."""
        def forward(pixel_values, bool_masked_pos=None, interpolate_pos_encoding=False):
            if bool_masked_pos is not None:
                ref.fail("bool_masked_pos is not expected")
            _, _, height, width = pixel_values.shape
            h = self.block(e, height, width, interpolate_pos_encoding)
            if h.requires_grad:
                h.retain_grad()
            self.h = h
            return h

        self.emb.forward = forward
        try:
            return self.model(pixel_values=self.pixels.expand(e.shape[0], -1, -1, -1)).logits
        finally:
            del self.emb.forward

    def probability(self, e, y):
        return torch.softmax(self.logits(e).float(), dim=-1)[:, y]


def first_layer_input(model, pixels):
    """(logits, h) of the unpatched model on `pixels` ([b, 3, H, W]); h caught by a forward
    pre-hook on the first encoder layer."""
    got = {}

    def hook(module, args, kwargs):
        got.setdefault("h", (args[0] if args else kwargs["hidden_states"]).detach().clone())

    handle = layers_of(model)[0].register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            logits = model(pixel_values=pixels).logits
    finally:
        handle.remove()
    return logits, got["h"]


def zeroed_pixels(pixels, sets, lead, cols, patch):
    """A batch of the pixels with the patches of each set of token positions set to 0."""
    batch = pixels.expand(len(sets), -1, -1, -1).clone()
    for i, positions in enumerate(sets):
        for j in positions:
            q = j - lead
            if q < 0:
                ref.fail("only patches are zeroed in pixel space")
            r, c = divmod(q, cols)
            batch[i, :, r * patch:(r + 1) * patch, c * patch:(c + 1) * patch] = 0.0
    return batch


def rust_round(x):
    """f64::round: half away from zero."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def ranked(values, removable):
    key = {j: rust_round(float(values[j]) * 1e10) for j in removable}
    return sorted(removable, key=lambda j: (-key[j], j)), key


def top_k(percent, m):
    return (percent * m + 99) // 100


def spearman(a, b):
    """correlations.rs's spearman: ranks with ties within 1e-12 relative, Pearson of the ranks;
    None where either side's ranks are constant."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = ranks(a), ranks(b)
    n = float(len(a))
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = va = vb = 0.0
    for x, y in zip(ra, rb):
        dx, dy = x - ma, y - mb
        cov += dx * dy
        va += dx * dx
        vb += dy * dy
    if va > 0.0 and vb > 0.0:
        return cov / math.sqrt(va * vb)
    return None


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])  # stable, as sort_by
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and tied(values[order[start]], values[order[end + 1]]):
            end += 1
        rank = (start + end) / 2.0 + 1.0
        for i in order[start:end + 1]:
            out[i] = rank
        start = end + 1
    return out


def tied(a, b):
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def near_ties(values, rel=1e-9):
    v = np.sort(np.asarray(values, dtype=np.float64))
    scale = np.maximum(np.abs(v[1:]), np.abs(v[:-1]))
    return bool(np.any(np.abs(np.diff(v)) <= rel * scale))


def closest(values, scale):
    """The smallest gap between two neighbouring values that the correlations do not count as
    tied, over max |v| ("largest") or over the pair's larger |value| ("pair"); None if none."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    big = np.maximum(np.abs(v[1:]), np.abs(v[:-1]))
    gap = np.diff(v)
    keep = gap > 1e-12 * big
    if not keep.any():
        return None
    over = np.abs(v).max() if scale == "largest" else big[keep]
    return float((gap[keep] / over).min())


def scores_of(ck, pixels_np, checks):
    """(tokens, y, p, importance dict, Embedder, e, b) for one case."""
    from captum.attr import IntegratedGradients

    model = ck.model
    pixels = torch.as_tensor(pixels_np, dtype=torch.float32)[None]
    rows, cols = pixels.shape[2] // ck.patch, pixels.shape[3] // ck.patch
    tokens = ck.specials + [f"patch r{r} c{c}" for r in range(rows) for c in range(cols)]
    emb = Embedder(model, ck.family, ck.specials, pixels)
    e = emb.words()
    n = e.shape[1]
    if n != len(tokens):
        ref.fail(f"{n} embeddings but {len(tokens)} tokens")
    b = emb.blank()

    # forward self-check: the replaced embeddings reproduce the model
    logits_ref, h_ref = first_layer_input(model, pixels)
    with torch.no_grad():
        logits_mine = emb.logits(e)
    checks["forward_logits"] = float((logits_mine - logits_ref).abs().max())
    checks["forward_h"] = float((emb.h - h_ref).abs().max())

    y = int(torch.argmax(logits_ref[0]))
    # gradients at e and h
    with torch.enable_grad():
        words = e.clone().requires_grad_(True)
        p_t = emb.probability(words, y)[0]
        p_t.backward()
    p = float(p_t.detach())
    g = words.grad[0].detach()
    gh = emb.h.grad[0].detach()
    h = emb.h[0].detach()
    checks["h_gradient"] = float((g - gh).abs().max())
    e0 = e[0]
    gradient_norm = g.norm(dim=-1)
    gradient_x_input = (g * e0).sum(dim=-1)
    gradient_sum = g.sum(dim=-1)
    embedding_sum = gh.sum(dim=-1)
    embedding_x_input = (gh * h).sum(dim=-1)
    checks["gradient_sum_relative"] = float(gradient_sum.abs().max() / gradient_norm.max())

    # the same gradient from a float64 copy (informational bound: float32 noise)
    model64 = copy.deepcopy(model).double().eval()
    emb64 = Embedder(model64, ck.family, ck.specials, pixels.double())
    with torch.enable_grad():
        w64 = e.double().clone().requires_grad_(True)
        torch.softmax(emb64.logits(w64), dim=-1)[0, y].backward()
    g64 = w64.grad[0]
    checks["gradient64_relative"] = float((g.double() - g64).abs().max() / g64.abs().max())
    checks["gradient_sum_relative_float64"] = float(g64.sum(dim=-1).abs().max() / g64.norm(dim=-1).max())

    # blank-out: row j → b, for every j, one batch
    with torch.no_grad():
        batch = e.expand(n, -1, -1).clone()
        for j in range(n):
            batch[j, j] = b
        blanked = emb.probability(batch, y)
        drops = [p - float(q) for q in blanked]
        # the same through the pixels: patch j's pixel values set to 0
        patches = list(range(emb.lead, n))
        zero = zeroed_pixels(pixels, [[j] for j in patches], emb.lead, cols, ck.patch)
        q_pix = torch.softmax(model(pixel_values=zero).logits.float(), dim=-1)[:, y]
    checks["blank_pixels"] = float((blanked[emb.lead:] - q_pix).abs().max())

    # integrated gradients (captum, Gauss-Legendre)
    baseline = b.expand(1, n, -1).clone()

    def forward(batch):
        return emb.probability(batch, y)

    with torch.enable_grad():
        ig = IntegratedGradients(forward)
        attributions, delta = ig.attribute(e.clone(), baselines=baseline, n_steps=STEPS, method="gausslegendre",
                                           internal_batch_size=STEPS, return_convergence_delta=True)
    per_token = attributions.detach().sum(dim=-1)[0]
    with torch.no_grad():
        p_base = float(emb.probability(baseline, y)[0])
    total = float(per_token.double().sum())
    difference = p - p_base
    completeness = {"steps": STEPS, "sum": total, "difference": difference, "delta": total - difference}
    checks["ig_delta"] = completeness["delta"]
    checks["ig_delta_relative"] = abs(completeness["delta"]) / abs(difference) if difference else float("inf")
    checks["ig_delta_vs_captum"] = abs(float(delta[0]) - completeness["delta"])
    # 50 points need not be enough (a path through a sharp dip of p): that the attributions are
    # right is checked by the same rule with many more points, which must sum to the difference
    # (1e-3 relative), and by the 50-point rule on a float64 copy of the model (float32 noise only)
    with torch.enable_grad():
        many = IntegratedGradients(forward).attribute(e.clone(), baselines=baseline, n_steps=MANY_STEPS,
                                                      method="gausslegendre", internal_batch_size=STEPS)
        f64 = lambda x: torch.softmax(emb64.logits(x), dim=-1)[:, y]  # noqa: E731
        ig64 = IntegratedGradients(f64).attribute(e.double().clone(), baselines=baseline.double(), n_steps=STEPS,
                                                  method="gausslegendre", internal_batch_size=STEPS)
    checks[f"ig_delta_relative_{MANY_STEPS}_steps"] = abs(float(many.double().sum()) - difference) / abs(difference)
    checks["ig_float64_relative"] = float((ig64.sum(dim=-1)[0] - per_token.double()).abs().max()
                                          / per_token.double().abs().max())

    label = ck.label_names(logits_ref.shape[-1])[y]
    fl = lambda t: [float(v) for v in t]  # noqa: E731
    importance = {
        "word": label,
        "id": y,
        "probability": p,
        "blank_token": BLANK_TOKEN,
        "gradient_norm": fl(gradient_norm),
        "gradient_x_input": fl(gradient_x_input),
        "gradient_sum_abs": [abs(v) for v in fl(gradient_sum)],
        "gradient_x_input_abs": [abs(v) for v in fl(gradient_x_input)],
        "embedding_gradient_sum_abs": [abs(v) for v in fl(embedding_sum)],
        "embedding_gradient_x_input_abs": [abs(v) for v in fl(embedding_x_input)],
        "blank_out": drops,
        "blank_out_abs": [abs(d) for d in drops],
        "integrated_gradients": fl(per_token),
        "integrated_gradients_check": completeness,
    }
    return tokens, importance, emb, e, b, pixels, cols


def eraser(emb, e, b, y, p, pixels, cols, patch, removable, maps, checks):
    """{map name: details} for each (name, values) in `maps`; every blanked input run once."""
    plans = {}
    for name, values in maps:
        order, key = ranked(values, removable)
        m = len(order)
        ks = [top_k(pct, m) for pct in PERCENTS]
        plans[name] = (order, key, ks)
    sets = sorted({tuple(sorted(s)) for order, _, ks in plans.values() for k in ks
                   for s in (order[:k], order[k:])})
    with torch.no_grad():
        batch = e.expand(len(sets), -1, -1).clone()
        for i, s in enumerate(sets):
            for j in s:
                batch[i, j] = b
        q = emb.probability(batch, y)
        zero = zeroed_pixels(pixels, sets, emb.lead, cols, patch)
        q_pix = torch.softmax(emb.model(pixel_values=zero).logits.float(), dim=-1)[:, y]
    checks["eraser_pixels"] = float((q - q_pix).abs().max())
    prob = {s: float(v) for s, v in zip(sets, q)}
    out = {}
    for name, values in maps:
        order, key, ks = plans[name]
        comp = [p - prob[tuple(sorted(order[:k]))] for k in ks]
        suff = [p - prob[tuple(sorted(order[k:]))] for k in ks]
        scale = max(abs(float(values[j])) for j in removable)
        cuts = []
        for k in sorted(set(ks)):
            if 0 < k < len(order):
                above, below = float(values[order[k - 1]]), float(values[order[k]])
                cuts.append({"k": k, "above": above, "below": below, "gap": above - below,
                             "relative_gap": (above - below) / scale if scale > 0 else None,
                             "tie": key[order[k - 1]] == key[order[k]]})
        fragile = name in ROUNDING_ONLY or any(
            not c["tie"] and (c["relative_gap"] is None or c["relative_gap"] < MIN_RELATIVE_GAP) for c in cuts)
        out[name] = {"comprehensiveness": sum(comp) / len(ks), "sufficiency": sum(suff) / len(ks), "k": ks,
                     "comprehensiveness_k": comp, "sufficiency_k": suff, "ranked": order, "cuts": cuts,
                     "fragile": fragile}
    return out


def evaluation_of(importance, attention, checks):
    from scipy.stats import spearmanr

    out = {}
    worst = 0.0
    for score in SCORES:
        values = importance[score]
        per = {}
        for mine, theirs in (("raw", "layer"), ("rollout", "rollout"), ("flow", "flow")):
            rows = []
            for row in attention[theirs]:
                rho = spearman(row, values)
                rows.append(rho)
                if rho is not None and not near_ties(row) and not near_ties(values):
                    worst = max(worst, abs(rho - float(spearmanr(row, values).statistic)))
            per[mine] = rows
        out[score] = per
    checks["spearman_vs_scipy"] = worst
    return out


def run(case):
    ck = vis.Checkpoint(os.path.join(REPO, "models", case["model"]))
    if ck.task != "image-classification":
        ref.fail(f"{case['model']} has no classification head")
    pixels_np = np.load(os.path.join(REPO, case["pixels"]))
    if pixels_np.dtype != np.float32 or pixels_np.ndim != 3 or pixels_np.shape[0] != 3:
        ref.fail(f"{case['pixels']}: {pixels_np.dtype} {pixels_np.shape} is not 3×H×W float32")
    checks = {}
    tokens, importance, emb, e, b, pixels, cols = scores_of(ck, pixels_np, checks)
    n, t = len(tokens), case["target"]
    if not 0 <= t < n:
        ref.fail(f"target {t} out of range")

    with open(os.path.join(METHODS, case["name"] + ".json")) as f:
        methods = json.load(f)
    if methods["tokens"] != tokens or methods["target"] != t or methods["model"] != case["model"]:
        ref.fail(f"{case['name']}: the methods fixture has other tokens, target or model")
    attention = methods["methods"]["attention"]
    if any(len(row) != n for key in ("layer", "rollout", "flow") for row in attention[key]):
        ref.fail("the attention maps do not have n values per row")

    vision_path = os.path.join(VISION, case["name"] + ".json")
    with open(vision_path) as f:
        report = json.load(f)
    top = report["prediction"]["labels"][0]
    if top["id"] != importance["id"] or top["label"] != importance["word"]:
        ref.fail(f"top label {importance['id']} is not the vision fixture's {top}")
    checks["vs_vision_fixture"] = abs(top["probability"] - importance["probability"])

    evaluation = evaluation_of(importance, attention, checks)
    evaluation["without_specials"] = False

    removable = [j for j in range(emb.lead, n) if j != t]
    maps = [("attention rollout", attention["rollout"][-1]), ("attention flow", attention["flow"][-1])]
    maps += [(score, importance[score]) for score in SCORES]
    details = eraser(emb, e, b, importance["id"], importance["probability"], pixels, cols, ck.patch,
                     removable, maps, checks)
    aopc = lambda d: {"comprehensiveness": d["comprehensiveness"], "sufficiency": d["sufficiency"]}  # noqa: E731
    evaluation["eraser"] = {"attention": {"rollout": aopc(details["attention rollout"]),
                                          "flow": aopc(details["attention flow"])}}
    evaluation["eraser_importance"] = {score: aopc(details[score]) for score in SCORES}

    bad = {k: checks[k] for k, bound in BOUNDS.items() if not checks[k] <= bound}
    if bad:
        ref.fail("self-checks failed: " + ", ".join(f"{k} {v:.2e}" for k, v in bad.items()))
    rank_gaps = {"scores": {score: closest(importance[score], "largest") for score in SCORES},
                 "maps": {mine: [closest(row, "pair") for row in attention[theirs]]
                          for mine, theirs in (("raw", "layer"), ("rollout", "rollout"), ("flow", "flow"))}}
    doc = {"name": case["name"], "model": case["model"], "pixels": case["pixels"], "target": t,
           "tokens": tokens, "importance": importance, "evaluation": evaluation, "checks": checks,
           "rank_gaps": rank_gaps,
           "eraser_details": {"removable": removable, "maps": details,
                              "fragile": [name for name, d in details.items() if d["fragile"]]}}
    return doc


def short(x):
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return float(f"{float(x):.{DIGITS}g}")


def rounded(x):
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return short(x)


def dump(x, indent=0):
    """JSON: objects one key a line, lists of scalars (and of small objects) on one line."""
    pad = " " * (indent + 1)
    if isinstance(x, dict):
        if not x:
            return "{}"
        items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1)}" for k, v in x.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(x, list) and any(isinstance(v, (list, dict)) for v in x):
        if all(isinstance(v, dict) and not any(isinstance(w, (list, dict)) for w in v.values()) for v in x):
            return "[\n" + ",\n".join(pad + json.dumps(v, ensure_ascii=False) for v in x) + "\n" + " " * indent + "]"
        return "[\n" + ",\n".join(pad + dump(v, indent + 1) for v in x) + "\n" + " " * indent + "]"
    return json.dumps(x, ensure_ascii=False)


def cases():
    with open(os.path.join(METHODS, "cases.json")) as f:
        listed = json.load(f)
    out = []
    for c in listed:
        with open(os.path.join(REPO, "models", c["model"], "config.json")) as f:
            architecture = (json.load(f).get("architectures") or ["AutoModel"])[0]
        if vis.task_of(architecture) == "image-classification":
            out.append({k: c[k] for k in ("name", "model", "pixels", "target")})
    return out


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    names = sys.argv[1:]
    todo = cases()
    unknown = set(names) - {c["name"] for c in todo}
    if unknown:
        ref.fail(f"unknown case(s) {sorted(unknown)}; the cases are {[c['name'] for c in todo]}")
    os.makedirs(OUT, exist_ok=True)
    for case in todo:
        if names and case["name"] not in names:
            continue
        start = time.time()
        doc = rounded(run(case))
        text = dump(doc) + "\n"
        if rounded(json.loads(text)) != doc:
            ref.fail("the JSON does not read back")
        with open(os.path.join(OUT, case["name"] + ".json"), "w") as f:
            f.write(text)
        c = doc["checks"]
        info = ", ".join(f"{k} {v:.2e}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items())
        imp = doc["importance"]
        print(f"vision_importance_reference: {case['name']} ({len(doc['tokens'])} tokens, {imp['word']} "
              f"p {imp['probability']:.6f}; {time.time() - start:.1f} s): {info}; fragile ERASER rankings: "
              f"{', '.join(doc['eraser_details']['fragile']) or 'none'}", file=sys.stderr, flush=True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        f.write("[\n" + ",\n".join(" " + json.dumps(c) for c in todo) + "\n]\n")


if __name__ == "__main__":
    try:
        main()
    except ref.ReferenceError as e:
        print(f"vision_importance_reference: error: {e}", file=sys.stderr)
        sys.exit(1)
