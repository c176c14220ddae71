#!/usr/bin/env python3
"""Independent reference for SPEC §8's mixing methods on the vision transformers (ViT, DeiT,
DINOv2, DINOv2 with registers), read as docs/methods.md reads pre-norm layers (ModernBERT, the
decoders): prenorm_methods_reference.py with the vision layers' modules. Never calls or reads
the Rust code.

Input: transformers' own pixel values of a vision case (tests/fixtures/vision/<case>.pixels.npy,
3×H×W float32, written by make_vision_fixtures.py); no preprocessing here.

Per layer l, from one float32 forward pass of the model (eager attention), with hooks:

  X      the layer's input (the residual stream), n × d
  x̂      norm1(X): the attention norm's output (ViT/DeiT `layernorm_before`, DINOv2 `norm1`)
  v      the value projection's output (`attention.v_proj`, bias included) of x̂
  A^h    head h's attention probabilities (the attention module's second output)
  W_O, b_O  the attention output projection (`attention.o_proj`; `attention.output.dense` in the
         checkpoints' key names)
  λ1     DINOv2's `layer_scale1.lambda1` (a vector of d); 1 for ViT and DeiT

  f^h(x̂_j) = λ1 ⊙ (v_j^h · W_O^h)   (W_O^h: head h's columns of W_O); the block's bias λ1 ⊙ b_O

In float64:

  attention       M[i][j] = mean_h A^h_ij
  norm            M[i][j] = ‖Σ_h A^h_ij f^h(x̂_j)‖₂
  alti            z_ij = Σ_h A^h_ij f^h(x̂_j) + [i=j](X_j + λ1 ⊙ b_O); y_i = Σ_j z_ij (the residual
                  stream after the attention block); M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − z_ij‖₁)
  value-zeroing   a float64 copy of the layer module, called on X with the arguments the model
                  called it with, once unchanged and once per j with row j of v_proj's output (token
                  j's value vector, every head) set to zero; x̃_i its output (the residual stream
                  after the MLP block: attention, λ1, residual, norm2, MLP, λ2, residual);
                  M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i) in float64. ViT's and DeiT's eager softmax
                  runs in float32 even there (DINOv2's in the input's dtype); a second path
                  written out by hand from the layer's weights, entirely in float64
                  (spelled_out_value_zeroing), must agree within 1e-6 (it does within 1e-7 on
                  ViT/DeiT, the float32 softmax, and 1e-15 on DINOv2).
  grad-attention  only with a head: s = the top label's logit (DeiT with teacher: its `logits`,
                  the mean of the class and distillation heads), ∂s/∂A^h_ij by autograd on the
                  output_attentions of a float64 copy of the model (retain_grad; the full
                  derivative through every later layer); M[i][j] = mean_h max(0, ∂s/∂A^h_ij · A^h_ij)

and the aggregations of methods_reference.py (layer rows, rollout, networkx Edmonds-Karp flow,
α = 0.5 where the residual is not in M). Self-checks (maxima printed per case): v = x̂ W_V + b_V
with x̂ = LN(X) recomputed (1e-5); Σ_j Σ_h A^h_ij f^h(x̂_j) + λ1 ⊙ b_O equals the block's output
after the layer scale (1e-4); y_i equals the residual stream after it, norm2's input (1e-4);
the float64 layer copy reproduces the layer's output (1e-4); the float64 model's attention
reproduces the float32 one (1e-5). Cross-checks (cross_check): attention's maps against the
vision fixture of the same case (tests/fixtures/vision/<name>.json; 1e-6), and grad-attention's
layer and rollout against Chefer's rule on vit-explain's float32 attention and ∂s/∂A where that
fixture has the case (1e-4 relative, 1e-5).

Writes tests/fixtures/methods/vision/<name>.json: {"name", "model", "pixels", "tokens",
"target", "methods": {mixing: {"layer", "rollout", "flow"}}} (each map L × n, numbers rounded
to 12 significant digits, one row a line), and cases.json: [{"name", "model", "pixels",
"target"}].

Usage: .venv-reference/bin/python scripts/reference/vision_methods_reference.py [NAME ...]
"""

import copy
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402
import vision_reference as vis  # noqa: E402
from methods_reference import flow, layer_rows, propagation_matrices, rollout  # noqa: E402

OUT = os.path.join(REPO, "tests", "fixtures", "methods", "vision")
PIXELS = "tests/fixtures/vision/{}.pixels.npy"
MIXINGS = ("attention", "norm", "alti", "value-zeroing", "grad-attention")
CASES = [
    {"name": "vit-cls-shapes", "model": "tiny-vit-cls", "target": 0},
    {"name": "vit-encoder-square", "model": "tiny-vit-encoder", "target": 0},
    {"name": "deit-teacher-shapes", "model": "tiny-deit-teacher", "target": 0},
    {"name": "dinov2-cls-shapes", "model": "tiny-dinov2-cls", "target": 0},
    {"name": "dinov2-registers-cls-shapes", "model": "tiny-dinov2-registers-cls", "target": 0},
    {"name": "dinov2-encoder-grey", "model": "tiny-dinov2-encoder", "target": 0},
    {"name": "dinov2-registers-cls-alpha-patch", "model": "tiny-dinov2-registers-cls", "target": 18},
]
DIGITS = 12


class Parts:
    """A vision layer's modules, whichever family: norm1, norm2, attention, λ1, λ2."""

    def __init__(self, layer):
        dinov2 = hasattr(layer, "norm1")
        self.norm1 = layer.norm1 if dinov2 else layer.layernorm_before
        self.norm2 = layer.norm2 if dinov2 else layer.layernorm_after
        self.attn = layer.attention
        self.scale1 = layer.layer_scale1 if dinov2 else None
        self.scale2 = layer.layer_scale2 if dinov2 else None
        d = self.norm1.weight.shape[0]
        ones = torch.ones(d, dtype=torch.float64)
        self.lambda1, self.lambda2 = (s.lambda1.detach().double() if s is not None else ones
                                      for s in (self.scale1, self.scale2))


def layers_of(model):
    base = model.base_model
    layers = base.layers if hasattr(base, "layers") else base.encoder.layer
    for layer in layers:
        if type(layer).__name__ not in ("ViTLayer", "DeiTLayer", "Dinov2Layer", "Dinov2WithRegistersLayer"):
            ref.fail(f"unexpected layer {type(layer).__name__}")
        if getattr(layer, "drop_path", torch.nn.Identity()).__class__.__name__ != "Identity":
            ref.fail("drop path in eval is the identity, but check it is absent")
    return layers


def capture(model, pixels, with_head):
    """Per layer: X, x̂, v, A, the attention output (before λ1) and after λ1, the residual
    stream after the attention block and after the layer (float64), the layer's call arguments;
    and ∂s/∂A (s = the top label's logit) where there is a head."""
    layers = layers_of(model)
    got = [{} for _ in layers]

    def keep(l, key, value):
        got[l][key] = value[0].detach().double()

    def called(l, args, kwargs):
        keep(l, "X", args[0] if args else kwargs["hidden_states"])
        got[l]["args"] = args[1:]
        got[l]["kwargs"] = {k: v for k, v in kwargs.items() if k != "hidden_states"}

    hooks = []
    for l, layer in enumerate(layers):
        p = Parts(layer)
        hooks += [
            layer.register_forward_pre_hook(lambda m, a, kw, l=l: called(l, a, kw), with_kwargs=True),
            p.norm1.register_forward_hook(lambda m, a, o, l=l: keep(l, "xhat", o)),
            p.attn.v_proj.register_forward_hook(lambda m, a, o, l=l: keep(l, "v", o)),
            p.attn.register_forward_hook(lambda m, a, o, l=l: keep(l, "out", o[0])),
            p.attn.register_forward_hook(lambda m, a, o, l=l: keep(l, "A", o[1])),
            p.norm2.register_forward_pre_hook(lambda m, a, l=l: keep(l, "mid", a[0])),
            layer.register_forward_hook(lambda m, a, o, l=l: keep(l, "after", o[0] if isinstance(o, tuple) else o)),
        ]
        if p.scale1 is not None:
            hooks.append(p.scale1.register_forward_hook(lambda m, a, o, l=l: keep(l, "scaled", o)))
    x = torch.as_tensor(pixels, dtype=torch.float32)[None]
    try:
        with torch.no_grad():
            model(pixel_values=x)
    finally:
        for hook in hooks:
            hook.remove()
    for parts in got:
        parts.setdefault("scaled", parts["out"])
    checks = {}
    if with_head:
        model64 = copy.deepcopy(model).double().eval()
        with torch.enable_grad():
            out = model64(pixel_values=x.double(), output_attentions=True)
            for a in out.attentions:
                a.retain_grad()
            logits = out.logits[0]
            label = int(torch.argmax(logits))
            logits[label].backward()
        checks["attention64"] = max((a[0].detach() - p["A"]).abs().max().item() for a, p in zip(out.attentions, got))
        if checks["attention64"] > 1e-5:
            ref.fail("the float64 model's attention is not the float32 model's")
        for parts, a in zip(got, out.attentions):
            parts["G"] = a.grad[0]
        checks["label"] = label
    return got, layers, checks


def zeroing_output(layer, X, args, kwargs):
    """(base n × d, perturbed n(j) × n(i) × d) from a float64 copy of the layer."""
    layer64 = copy.deepcopy(layer).double().eval()
    n = X.shape[0]
    wide = lambda v: v.double() if torch.is_tensor(v) and v.is_floating_point() else v  # noqa: E731
    args = tuple(wide(a) for a in args)
    kwargs = {k: wide(v) for k, v in kwargs.items()}
    first = lambda o: o[0] if isinstance(o, tuple) else o  # noqa: E731
    with torch.no_grad():
        base = first(layer64(X[None], *args, **kwargs))[0]

        def zero(module, inputs, output):
            out = output.clone()
            for j in range(n):
                out[j, j, :] = 0.0
            return out

        hook = Parts(layer64).attn.v_proj.register_forward_hook(zero)
        try:
            pert = first(layer64(X[None].expand(n, -1, -1).contiguous(), *args, **kwargs))
        finally:
            hook.remove()
    return base, pert


def spelled_out_value_zeroing(layer, X, heads, act):
    """The same, written out from the layer's weights alone, all in float64 (softmax too)."""
    p = Parts(layer)
    w = lambda m: (m.weight.detach().double(), m.bias.detach().double())  # noqa: E731
    n, d = X.shape
    dh = d // heads
    ln = lambda x, m: F.layer_norm(x, (d,), *w(m), m.eps)  # noqa: E731
    lin = lambda x, m: x @ w(m)[0].T + w(m)[1]  # noqa: E731
    xh = ln(X, p.norm1)
    q, k, v = (lin(xh, m).reshape(n, heads, dh).transpose(0, 1)
               for m in (p.attn.q_proj, p.attn.k_proj, p.attn.v_proj))
    A = torch.softmax(q @ k.transpose(1, 2) * p.attn.scaling, dim=-1)  # H × n × n

    def rest(vv):  # vv: B × H × n × dh
        ctx = (A[None] @ vv).permute(0, 2, 1, 3).reshape(vv.shape[0], n, d)
        h = X[None] + p.lambda1 * lin(ctx, p.attn.o_proj)
        inner = lin(act(lin(ln(h, p.norm2), layer.mlp.fc1)), layer.mlp.fc2)
        return h + p.lambda2 * inner

    base = rest(v[None])[0]
    vz = v[None].repeat(n, 1, 1, 1)
    for j in range(n):
        vz[j, :, j, :] = 0.0
    return base, rest(vz)


def one_minus_cos(base, pert):
    base, pert = base.numpy(), pert.numpy()
    cos = (pert * base[None]).sum(-1) / (np.linalg.norm(pert, axis=-1) * np.linalg.norm(base, axis=-1)[None])
    return (1.0 - cos).T  # [i][j]


def matrices(got, layers, heads, act, checks):
    """{mixing: [M_l]} for every layer; fills checks with the self-checks' maxima."""
    out = {m: [] for m in MIXINGS}
    worst = {k: 0.0 for k in ("v", "block", "y", "layer64", "vz_spelled", "vz_spelled_base")}
    for parts, layer in zip(got, layers):
        p = Parts(layer)
        X, A = parts["X"].numpy(), parts["A"].numpy()
        n, d = X.shape
        dh = d // heads
        # x̂ is norm1(X), v its value projection (bias included)
        wv, bv = p.attn.v_proj.weight.detach().double().numpy(), p.attn.v_proj.bias.detach().double().numpy()
        xh = F.layer_norm(parts["X"], (d,), p.norm1.weight.detach().double(), p.norm1.bias.detach().double(),
                          p.norm1.eps).numpy()
        worst["v"] = max(worst["v"], float(np.abs(xh @ wv.T + bv - parts["v"].numpy()).max()),
                         float(np.abs(xh - parts["xhat"].numpy()).max()))
        v = parts["v"].numpy().reshape(n, heads, dh)
        wo = p.attn.o_proj.weight.detach().double().numpy()
        bo = p.attn.o_proj.bias.detach().double().numpy()
        lam = p.lambda1.numpy()
        f = np.stack([lam * (v[:, h, :] @ wo[:, h * dh:(h + 1) * dh].T) for h in range(heads)])  # H × n × d
        zatt = np.einsum("hij,hjd->ijd", A, f)
        worst["block"] = max(worst["block"], float(np.abs(zatt.sum(1) + lam * bo - parts["scaled"].numpy()).max()),
                             float(np.abs(zatt.sum(1) / lam + bo - parts["out"].numpy()).max()))
        z = zatt.copy()
        z[np.arange(n), np.arange(n)] += X + lam * bo
        y = z.sum(1)
        worst["y"] = max(worst["y"], float(np.abs(y - parts["mid"].numpy()).max()))
        out["attention"].append(A.mean(0))
        out["norm"].append(np.linalg.norm(zatt, axis=-1))
        out["alti"].append(np.maximum(0.0, np.abs(y).sum(-1)[:, None] - np.abs(y[:, None, :] - z).sum(-1)))
        base, pert = zeroing_output(layer, parts["X"], parts["args"], parts["kwargs"])
        worst["layer64"] = max(worst["layer64"], float((base - parts["after"]).abs().max()))
        vz = one_minus_cos(base, pert)
        base2, pert2 = spelled_out_value_zeroing(layer, parts["X"], heads, act)
        worst["vz_spelled_base"] = max(worst["vz_spelled_base"], float((base2 - base).abs().max()))
        worst["vz_spelled"] = max(worst["vz_spelled"], float(np.abs(one_minus_cos(base2, pert2) - vz).max()))
        out["value-zeroing"].append(vz)
        if "G" in parts:
            out["grad-attention"].append(np.maximum(0.0, parts["G"].numpy() * A).mean(0))
    bounds = {"v": 1e-5, "block": 1e-4, "y": 1e-4, "layer64": 1e-4, "vz_spelled": 1e-6, "vz_spelled_base": 1e-4}
    bad = {k: x for k, x in worst.items() if x > bounds[k]}
    if bad:
        ref.fail("self-checks failed: " + ", ".join(f"{k} {x:.1e}" for k, x in bad.items()))
    checks.update(worst)
    if not out["grad-attention"]:
        del out["grad-attention"]
    return out


def run(case):
    folder = os.path.join(REPO, "models", case["model"])
    ck = vis.Checkpoint(folder)
    pixels = np.load(os.path.join(REPO, case["pixels"]))
    if pixels.dtype != np.float32 or pixels.ndim != 3 or pixels.shape[0] != 3:
        ref.fail(f"{case['pixels']}: {pixels.dtype} {pixels.shape} is not 3×H×W float32")
    rows, cols = pixels.shape[1] // ck.patch, pixels.shape[2] // ck.patch
    tokens = ck.specials + [f"patch r{r} c{c}" for r in range(rows) for c in range(cols)]
    t = case["target"]
    if not 0 <= t < len(tokens):
        ref.fail(f"target {t} out of range")
    cfg = ck.model.config
    if cfg.hidden_act != "gelu" or getattr(cfg, "use_swiglu_ffn", False):
        ref.fail(f"{case['model']}: the spelled-out path knows only the GELU MLP")
    got, layers, checks = capture(ck.model, pixels, ck.task == "image-classification")
    if got[0]["X"].shape[0] != len(tokens):
        ref.fail(f"{got[0]['X'].shape[0]} positions but {len(tokens)} tokens")
    Ms = matrices(got, layers, cfg.num_attention_heads, F.gelu, checks)
    methods = {}
    for mixing, M in Ms.items():
        P = propagation_matrices(mixing, M)
        methods[mixing] = {"layer": layer_rows(mixing, M, t), "rollout": rollout(mixing, M, P, t), "flow": flow(P, t)}
    cross_check(case, methods, checks)
    if "label" in checks:
        checks["label"] = ck.label_names(ck.model.config.num_labels)[checks["label"]]
    doc = {"name": case["name"], "model": case["model"], "pixels": case["pixels"], "tokens": tokens,
           "target": t, "methods": methods}
    return doc, checks


def cross_check(case, methods, checks):
    """Against the other fixtures made from the same pixels: attention's maps against the vision
    fixture's relevance (raw, rollout, flow) for the same case and target; grad-attention's layer
    and rollout against Chefer's rule on vit-explain's float32 attention and ∂s/∂A, where it has
    the case (relative to the largest value, since the float32 gradient is the less exact)."""
    path = os.path.join(REPO, "tests", "fixtures", "vision", case["name"] + ".json")
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
        if report["target"]["index"] != case["target"]:
            ref.fail(f"{path}: target {report['target']['index']}, not {case['target']}")
        checks["vs_vision_fixture"] = max(
            float(np.abs(np.asarray(methods["attention"][mine]) - np.array(report["relevance"][theirs])).max())
            for mine, theirs in (("layer", "raw"), ("rollout", "rollout"), ("flow", "flow")))
        if checks["vs_vision_fixture"] > 1e-6:
            ref.fail(f"attention maps differ from {path} by {checks['vs_vision_fixture']:.1e}")
    stem = os.path.join(REPO, "tests", "fixtures", "vision", "vit-explain", case["name"])
    if "grad-attention" in methods and os.path.exists(stem + ".gradient.npy"):
        import vit_explain_reference as vx

        layer, roll = vx.chefer(np.load(stem + ".attention.npy").astype(np.float64),
                                np.load(stem + ".gradient.npy").astype(np.float64), case["target"])
        mine = methods["grad-attention"]
        checks["vs_vit_explain_layer"] = float(np.abs(np.asarray(mine["layer"]) - layer).max() / np.abs(layer).max())
        checks["vs_vit_explain_rollout"] = float(np.abs(np.asarray(mine["rollout"]) - roll).max())
        if checks["vs_vit_explain_layer"] > 1e-4 or checks["vs_vit_explain_rollout"] > 1e-5:
            ref.fail("grad-attention differs from Chefer's rule on vit-explain's float32 gradient")


def short(x):
    return float(f"{float(x):.{DIGITS}g}")


def dump(doc):
    """JSON with one map row a line."""
    lines = ["{"]
    for key in ("name", "model", "pixels", "tokens", "target"):
        lines.append(f" {json.dumps(key)}: {json.dumps(doc[key], ensure_ascii=False)},")
    lines.append(' "methods": {')
    mixings = list(doc["methods"])
    for a, mixing in enumerate(mixings):
        lines.append(f"  {json.dumps(mixing)}: {{")
        maps = doc["methods"][mixing]
        for b, key in enumerate(("layer", "rollout", "flow")):
            rows = [json.dumps([short(x) for x in row]) for row in np.asarray(maps[key])]
            lines.append(f"   {json.dumps(key)}: [\n    " + ",\n    ".join(rows) + "\n   ]" + ("," if b < 2 else ""))
        lines.append("  }" + ("," if a < len(mixings) - 1 else ""))
    lines += [" }", "}"]
    text = "\n".join(lines) + "\n"
    back = json.loads(text)
    for mixing in mixings:
        for key in ("layer", "rollout", "flow"):
            if np.abs(np.array(back["methods"][mixing][key]) - np.asarray(doc["methods"][mixing][key])).max() > 1e-11:
                ref.fail("the rounded JSON moved a value")
    return text


def main():
    names = sys.argv[1:]
    cases = [{**c, "pixels": PIXELS.format(c["name"])} for c in CASES]
    unknown = set(names) - {c["name"] for c in cases}
    if unknown:
        ref.fail(f"unknown case(s) {sorted(unknown)}")
    torch.set_grad_enabled(False)
    os.makedirs(OUT, exist_ok=True)
    for case in cases:
        if names and case["name"] not in names:
            continue
        start = time.time()
        doc, checks = run(case)
        with open(os.path.join(OUT, case["name"] + ".json"), "w") as f:
            f.write(dump(doc))
        info = ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}" for k, v in checks.items())
        print(f"vision_methods_reference: {case['name']} ({len(doc['tokens'])} tokens, "
              f"{', '.join(doc['methods'])}; {time.time() - start:.1f} s): {info}", file=sys.stderr, flush=True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        f.write("[\n" + ",\n".join(" " + json.dumps({k: c[k] for k in ("name", "model", "pixels", "target")})
                                   for c in cases) + "\n]\n")


if __name__ == "__main__":
    try:
        main()
    except ref.ReferenceError as e:
        print(f"vision_methods_reference: error: {e}", file=sys.stderr)
        sys.exit(1)
