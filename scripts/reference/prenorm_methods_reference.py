#!/usr/bin/env python3
"""Independent reference for SPEC §8's mixing methods on a pre-norm encoder
(ModernBERT), read as docs/methods.md says: as the pre-norm decoders are read
(causal_methods_reference.py), without the causal mask. Never calls or reads the Rust code.

Per layer l, from one float32 forward pass of transformers' ModernBERT (eager attention), with
hooks:

  X      the layer's input (the residual stream), n × d
  A^h    head h's attention probabilities (the attention module's second output)
  f^h    v_j = the value third of Wqkv's output at j (Wqkv reads the attention norm's output,
         the embedding norm's at layer 1, which has none); f^h(x̂_j) = v_j^h · W_O^h with W_O^h
         head h's columns of Wo
  b_O    Wo's bias (0 where attention_bias is false)

In float64:

  attention       M[i][j] = mean_h A^h_ij
  norm            M[i][j] = ‖Σ_h A^h_ij f^h(x̂_j)‖₂
  alti            z_ij = Σ_h A^h_ij f^h(x̂_j) + [i=j](X_j + b_O); y_i = Σ_j z_ij;
                  M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − z_ij‖₁)
  value-zeroing   a float64 copy of the layer, called with the arguments the model called it
                  with (its mask and rotary table, cast to float64), once unchanged and once per
                  j with row j of Wqkv's value third set to zero; x̃_i its output (the residual
                  stream after the MLP); M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i). transformers' eager
                  softmax runs in float32 even there, so this one is float64 but for that step.
  grad-attention  s = the explained logit (the top word at the mask, the top label), ∂s/∂A^h_ij
                  by autograd on the output_attentions of a float64 copy of the model (whose
                  softmax is float32 too);
                  M[i][j] = mean_h max(0, ∂s/∂A^h_ij · A^h_ij)

and the aggregations of methods_reference.py (layer rows, rollout, networkx flow). Self-checks:
Σ_j Σ_h A^h_ij f^h(x̂_j) + b_O equals the attention block's output at i, and y_i the residual
stream after it (the MLP norm's input), to 1e-4.

Writes tests/fixtures/methods/prenorm/<name>.json: {"name", "model", "text", "tokens",
"target", "methods": {mixing: {"layer", "rollout", "flow"}}}.

Usage: .venv-reference/bin/python scripts/reference/prenorm_methods_reference.py
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import family_reference as fam  # noqa: E402
import reference as ref  # noqa: E402
from methods_reference import flow, layer_rows, propagation_matrices, rollout  # noqa: E402

OUT = os.path.join(REPO, "tests", "fixtures", "methods", "prenorm")
MIXINGS = ("attention", "norm", "alti", "value-zeroing", "grad-attention")
CASES = [
    {"name": "modernbert-mlm-author", "model": "tiny-modernbert-mlm",
     "text": "The author talked to Sara about [MASK] book"},
    {"name": "modernbert-cls-film", "model": "tiny-modernbert-cls",
     "text": "This film was great and the story was good."},
    {"name": "modernbert-mean-food", "model": "tiny-modernbert-mean", "text": "The food is not good."},
]


def capture(model, enc, task):
    """Per layer: X, qkv, A, the attention output, the residual stream after it (float64),
    the arguments the layer was called with, and ∂s/∂A (the explained logit s)."""
    layers = model.model.layers
    got = [{} for _ in layers]

    def keep(l, key, value):
        got[l][key] = value[0].detach().double()

    def called(l, args, kwargs):
        keep(l, "X", args[0] if args else kwargs["hidden_states"])
        got[l]["kwargs"] = {k: v for k, v in kwargs.items() if k != "hidden_states"}

    hooks = []
    for l, layer in enumerate(layers):
        hooks += [
            layer.register_forward_pre_hook(lambda m, a, kw, l=l: called(l, a, kw), with_kwargs=True),
            layer.attn.Wqkv.register_forward_hook(lambda m, a, o, l=l: keep(l, "qkv", o)),
            layer.attn.register_forward_hook(lambda m, a, o, l=l: keep(l, "out", o[0])),
            layer.attn.register_forward_hook(lambda m, a, o, l=l: keep(l, "A", o[1])),
            layer.mlp_norm.register_forward_pre_hook(lambda m, a, l=l: keep(l, "mid", a[0])),
            layer.register_forward_hook(lambda m, a, o, l=l: keep(l, "after", o)),
        ]
    try:
        with torch.no_grad():
            model(**enc)
    finally:
        for hook in hooks:
            hook.remove()
    # ∂s/∂A from a float64 copy of the model (float32 gradients of two implementations differ
    # by up to ~1e-5 here); its probabilities reproduce the float32 ones to 1e-5.
    import copy

    model64 = copy.deepcopy(model).double().eval()
    with torch.enable_grad():
        out = model64(**enc, output_attentions=True)
        for a in out.attentions:
            a.retain_grad()
        logits = out.logits[0, task["target"]] if task["masked"] else out.logits[0]
        logits[int(torch.argmax(logits))].backward()
    for parts, a in zip(got, out.attentions):
        if (a[0].detach() - parts["A"]).abs().max() > 1e-5:
            ref.fail("the float64 model's attention is not the float32 model's")
        parts["G"] = a.grad[0]
    return got, layers


def value_zeroing(layer, parts):
    """1 − cos(x̃_i^{¬j}, x̃_i) from a float64 copy of the layer."""
    import copy

    X = parts["X"]
    n, d = X.shape
    wide = lambda v: v.double() if torch.is_tensor(v) and v.is_floating_point() else v  # noqa: E731
    kwargs = {k: tuple(wide(t) for t in v) if isinstance(v, tuple) else wide(v) for k, v in parts["kwargs"].items()}
    layer64 = copy.deepcopy(layer).double().eval()
    with torch.no_grad():
        base = layer64(X[None], **kwargs)[0]

        def zero(module, args, output):
            out = output.clone()
            for j in range(n):
                out[j, j, 2 * d:] = 0.0
            return out

        hook = layer64.attn.Wqkv.register_forward_hook(zero)
        try:
            pert = layer64(X[None].expand(n, -1, -1).contiguous(), **kwargs)
        finally:
            hook.remove()
    base, pert = base.numpy(), pert.numpy()
    if np.abs(base - parts["after"].numpy()).max() > 1e-4:
        ref.fail("the float64 layer does not reproduce the model's layer output")
    cos = (pert * base[None]).sum(-1) / (np.linalg.norm(pert, axis=-1) * np.linalg.norm(base, axis=-1)[None])
    return (1.0 - cos).T  # [i][j]


def matrices(got, layers, heads):
    """{mixing: [M_l]} for every layer."""
    out = {m: [] for m in MIXINGS}
    for parts, layer in zip(got, layers):
        X, A = parts["X"].numpy(), parts["A"].numpy()
        n, d = X.shape
        dh = d // heads
        v = parts["qkv"].numpy()[:, 2 * d:].reshape(n, heads, dh)
        wo = layer.attn.Wo.weight.detach().double().numpy()
        bo = layer.attn.Wo.bias.detach().double().numpy() if layer.attn.Wo.bias is not None else np.zeros(d)
        f = np.stack([v[:, h, :] @ wo[:, h * dh:(h + 1) * dh].T for h in range(heads)])  # H × n × d
        zatt = np.einsum("hij,hjd->ijd", A, f)
        if np.abs(zatt.sum(1) + bo - parts["out"].numpy()).max() > 1e-4:
            ref.fail("the heads' parts do not add up to the attention output")
        z = zatt.copy()
        z[np.arange(n), np.arange(n)] += X + bo
        y = z.sum(1)
        if np.abs(y - parts["mid"].numpy()).max() > 1e-4:
            ref.fail("y_i is not the residual stream after attention")
        out["attention"].append(A.mean(0))
        out["norm"].append(np.linalg.norm(zatt, axis=-1))
        out["alti"].append(np.maximum(0.0, np.abs(y).sum(-1)[:, None] - np.abs(y[:, None, :] - z).sum(-1)))
        out["value-zeroing"].append(value_zeroing(layer, parts))
        out["grad-attention"].append(np.maximum(0.0, parts["G"].numpy() * A).mean(0))
    return out


def run(case):
    ck = fam.Checkpoint(os.path.join(REPO, "models", case["model"]))
    enc = ck.encode(case["text"])
    ids = enc["input_ids"][0].tolist()
    t = ck.target(ids, None)
    got, layers = capture(ck.model, enc, {"target": t, "masked": ck.task == "masked-lm"})
    methods = {}
    for mixing, Ms in matrices(got, layers, ck.model.config.num_attention_heads).items():
        P = propagation_matrices(mixing, Ms)
        methods[mixing] = {"layer": layer_rows(mixing, Ms, t).tolist(), "rollout": rollout(mixing, Ms, P, t).tolist(),
                           "flow": flow(P, t).tolist()}
    return {**case, "tokens": ck.tok.convert_ids_to_tokens(ids), "target": t, "methods": methods}


def main():
    os.makedirs(OUT, exist_ok=True)
    for case in CASES:
        with open(os.path.join(OUT, case["name"] + ".json"), "w") as f:
            f.write(json.dumps(run(case), indent=1) + "\n")
        print(f"prenorm_methods_reference: {case['name']}", file=sys.stderr)


if __name__ == "__main__":
    main()
