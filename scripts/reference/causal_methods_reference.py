#!/usr/bin/env python3
"""Independent Python reference for SPEC §8 (mixing matrices × aggregations) on causal decoders.

Pre-norm decoders only: GPT-2 (ln_1 / c_attn / c_proj), Llama, Qwen2, Mistral, Qwen3, Gemma 2 and 3
(input_layernorm / v_proj / o_proj), Phi-3 (the value part of qkv_proj). Never calls or reads the Rust code. Generation and tokenisation are those of
causal_llm_reference.py (greedy, float32, eager attention, stopping at EOS; tokenizer.json alone,
IgLM's prompt from its vocab.txt), whose `load`, `generate` and `iglm_ids` it imports.

m = prompt length, g = tokens generated, the fed sequence is prompt + generated[:g-1]
(N = m + g - 1 positions); generated token k (0-based) is predicted at position t_k = m - 1 + k.

Per layer l = 1..L, from one float32 forward pass over the N fed positions (eager attention,
output_attentions), with hooks:

  X      the decoder layer's input hidden states (the residual stream before its first norm),
         float32 N × d (a forward pre-hook on the decoder layer)
  x̂      the layer's first norm (GPT-2 ln_1, else input_layernorm) applied to X, taken from the
         model (a forward hook on the norm), float32
  A^h    head h's attention probabilities N × N for the query heads (grouped-query models: head h
         reads kv head h // (H / KV)); sliding windows masked as transformers does
  f^h    v_j = x̂_j W_V + b_V (every kv head; b_V only where the model has one: GPT-2 c_attn,
         Qwen2 v_proj); f^h(x̂_j) = v_j^{(kv head of h)} · W_O^h, W_O^h = head h's slice of the
         attention output projection (its input dims h·d_head .. (h+1)·d_head)
  b_O    the output projection's bias (GPT-2 c_proj; Llama/Qwen2/Mistral o_proj have none → 0)
  ρ_i    Gemma 2 and 3 only (a norm after the attention block, before the residual):
         γ ⊙ / sqrt(mean(o_i²) + eps), with o_i the output projection's output at i (hooked) and
         γ = 1 + that norm's weight; every part of row i's attention output is multiplied by it
         (elementwise γ, then the scalar): f^h is taken as γ ⊙ f^h and A^h_ij as A^h_ij / rms_i.
         Elsewhere ρ_i = 1.

Everything below is float64 (from the float32 tensors and weights):

  attention       M[i][j] = mean_h A^h_ij                                   (rows as they are)
  norm            M[i][j] = ‖ρ_i(Σ_h A^h_ij f^h(x̂_j))‖₂
  alti            z_ij = ρ_i(Σ_h A^h_ij f^h(x̂_j)) + [i=j](X_j + b_O)   (X un-normalised;
                  b_O = 0 wherever ρ is not 1);
                  y_i = Σ_j z_ij;  M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − z_ij‖₁)
                  (no norm after the attention block in a pre-norm decoder: no γ/σ step)
  value-zeroing   the decoder layer re-run in float64: a float64 deep copy of the layer module,
                  called on X cast to float64 with the causal (sliding-window) mask and rotary
                  positions 0..N-1, once unchanged and once per j with a forward hook that sets
                  row j of the value projection's output to zero (every kv head; GPT-2: the value
                  third of c_attn's output, columns 2E..3E). x̃_i = the layer's output hidden
                  state (after the MLP and its residual). M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i).
                  M[i][j] = 0 exactly where i cannot attend to j (j > i, or i − j ≥ the sliding
                  window): zeroing v_j cannot change x̃_i there (checked: bit-identical).
                  Truly float64: the copy's RMSNorms are replaced by a float64 RMSNorm (transformers'
                  casts to float32), its attention runs through a registered eager attention with
                  a float64 softmax (Llama/Qwen2/Mistral's eager softmax is float32), and cos/sin
                  of the rotary embedding are computed in float64 from the model's inv_freq buffer
                  (those frequencies are float32 values, as the model has them) and its
                  attention_scaling. The mask is additive 0 / −inf.
  grad-attention  per generated token k: s = the logit of generated_ids[k] at position t_k (the
                  lm_head output, pre-softmax) in a float64 forward over the N fed positions
                  (a float64 copy of the whole model, with float64 norms, softmax and rotary
                  tables as for value-zeroing: float32 gradients from two implementations
                  differ by ~2e-5 relative on tiny-qwen2); ∂s/∂A^h_ij by autograd on the output_attentions tensors (the total derivative
                  through every later layer). M_k,l[i][j] = mean_h max(0, ∂s/∂A^h_ij · A^h_ij)

Row normalisation N(M): each row divided by its sum, a zero row stays zero. Not applied to
`attention`, nor to `grad-attention`.

Aggregations per generated token k with t = t_k, over all N positions (α = 0.5):

  layer     layer[l] = N(M_l)[t]  (attention: M_l[t]; grad-attention: M_k,l[t] unnormalised)
  P_l       attention: rownorm(0.5·M_l + 0.5·I)  (= (Ā + I)/rowsum, causal_reference's augment;
                       the rownorm only absorbs the float32 softmax rows' ~1e-7 departure from 1)
            norm: rownorm(0.5·N(M_l) + 0.5·I)  (the rownorm is a no-op to ~1e-16)
            alti, value-zeroing: N(M_l)
            grad-attention (flow): rownorm(I + M_k,l)
  rollout   R_1 = P_1, R_l = P_l · R_{l−1}; rollout[l] = R_l[t]
            grad-attention: R_0 = I, R_l = R_{l−1} + M_k,l · R_{l−1}; rollout[l] = R_l[t] / Σ_j R_l[t][j]
  flow      networkx DiGraph, nodes (l, i) for l = 0..L, i < N, edges (l, i) → (l−1, j) of
            capacity P_l[i][j] (capacity-0 edges skipped); F[l][j] = maximum_flow_value((l, t),
            (0, j)) with Edmonds-Karp; flow[l] = F[l] / Σ_j F[l][j] over all N (zero stays zero)

Then only the prompt columns j < m are kept (no renormalisation); each map is [g][m][L]:
index [k][j][l-1].

Fixture: {"prompt_ids", "generated_ids", "generated_tokens", "layers", "heads", "methods":
{"attention": {"layer", "rollout", "flow"}, "norm", "alti", "value-zeroing", "grad-attention"}}.

Self-checks (assertions): attention layer/rollout/flow equal causal_llm_reference.py's raw/rollout/
flow for the same case to 1e-12; the hooked X/A equal causal_llm_reference's attention; norm:
Σ_j Σ_h A^h_ij f^h(x̂_j) + b_O equals the output projection's output at i to 1e-4 (with ρ: the
norm after attention's output); alti: y_i equals
the residual stream after the attention block (the input of the second norm) to 1e-4;
value-zeroing: the unchanged float64 layer reproduces the float32 layer output (1e-4) and the
float32 attention probabilities (1e-5), and for every layer and j, zeroing v_j changes the output
exactly at the positions that attend to j (j ≤ i < j + window) and leaves every other position
bit-identical; grad-attention: rows i > t_k of every ∂s/∂A are exactly zero.

Usage:
  causal_methods_reference.py --fixtures     regenerate tests/fixtures/causal/methods/ from its cases.json
  causal_methods_reference.py --real DIR     regenerate tests/fixtures/causal/methods-real/ (IgLM at DIR)
  [--only NAME]                              just that case
"""

import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import causal_llm_reference as cllm  # noqa: E402
# The aggregations are SPEC §8's, the same as for encoders.
from methods_reference import layer_rows, row_normalise  # noqa: E402
from methods_reference import propagation_matrices as propagation  # noqa: E402
from methods_reference import rollout as rollout_rows  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "causal")
MIXINGS = ("attention", "norm", "alti", "value-zeroing", "grad-attention")
F64_ATTENTION = "bert_explain_reference_eager_f64"


def log(msg):
    print(f"causal_methods_reference: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Model anatomy


class Parts:
    """One decoder layer's modules."""

    def __init__(self, model, l):
        cfg = model.config
        self.gpt2 = cfg.model_type == "gpt2"
        if self.gpt2:
            self.layer = model.transformer.h[l]
            self.norm1, self.norm2 = self.layer.ln_1, self.layer.ln_2
            self.attn = self.layer.attn
            self.value, self.out = self.attn.c_attn, self.attn.c_proj
            self.heads = cfg.n_head
            self.kv_heads = cfg.n_head
            self.head_dim = cfg.n_embd // cfg.n_head
            self.window = None
            self.after = None
            self.cols = slice(2 * cfg.n_embd, 3 * cfg.n_embd)
            self.layer_type = None
        else:
            self.layer = model.model.layers[l]
            self.norm1 = self.layer.input_layernorm
            # Gemma 2 and 3: a norm after attention, and the MLP's own before it.
            sandwich = hasattr(self.layer, "pre_feedforward_layernorm")
            self.after = self.layer.post_attention_layernorm if sandwich else None
            self.norm2 = (self.layer.pre_feedforward_layernorm if sandwich
                          else self.layer.post_attention_layernorm)
            self.attn = self.layer.self_attn
            self.heads = cfg.num_attention_heads
            self.kv_heads = cfg.num_key_value_heads
            self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
            fused = hasattr(self.attn, "qkv_proj")  # Phi-3: q, k, v in one projection
            self.value, self.out = (self.attn.qkv_proj if fused else self.attn.v_proj,
                                    self.attn.o_proj)
            q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
            self.cols = slice(q + kv, q + 2 * kv) if fused else slice(None)
            self.window = window_of(cfg, l)
            # Gemma 3: the layer's rotary table is its layer type's.
            rot = model.model.rotary_emb
            self.layer_type = cfg.layer_types[l] if hasattr(rot, "layer_types") else None

    def weights(self):
        """W_V (d × KV·dh), b_V, W_O (H·dh × d), b_O in float64."""
        if self.gpt2:
            E = self.heads * self.head_dim
            W = self.value.weight.detach().double().numpy()  # Conv1D: d × 3E, y = x W + b
            b = self.value.bias.detach().double().numpy()
            Wv, bv = W[:, 2 * E:3 * E], b[2 * E:3 * E]
            Wo = self.out.weight.detach().double().numpy()  # E × d
            bo = self.out.bias.detach().double().numpy()
        else:
            Wv = self.value.weight.detach().double().numpy()[self.cols].T  # nn.Linear: out × in
            bv = (self.value.bias.detach().double().numpy()[self.cols]
                  if self.value.bias is not None else np.zeros(Wv.shape[1]))
            Wo = self.out.weight.detach().double().numpy().T
            bo = (self.out.bias.detach().double().numpy() if self.out.bias is not None
                  else np.zeros(Wo.shape[1]))
        return Wv, bv, Wo, bo


def window_of(cfg, l):
    w = getattr(cfg, "sliding_window", None)
    if w is None:
        return None
    types = getattr(cfg, "layer_types", None)
    if cfg.model_type == "mistral" or types is None:
        return w
    return w if types[l] == "sliding_attention" else None


def allowed(N, window):
    i = np.arange(N)[:, None]
    j = np.arange(N)[None, :]
    ok = j <= i
    if window is not None:
        ok &= (i - j) < window
    return ok


# --------------------------------------------------------------------------------------------
# The float32 forward with hooks


def capture(model, ids):
    """X, x̂, the attention block's output, the residual after it and the layer output per layer
    (float32, N × d), and the attention probabilities (L × H × N × N)."""
    L = model.config.num_hidden_layers
    parts = [Parts(model, l) for l in range(L)]
    got = [dict() for _ in range(L)]
    handles = []

    def first(x):
        return x[0] if isinstance(x, tuple) else x

    for l, p in enumerate(parts):
        def pre_layer(module, args, kwargs, l=l):
            h = args[0] if args else kwargs["hidden_states"]
            got[l]["X"] = h[0].detach().clone()

        def post_layer(module, args, kwargs, output, l=l):
            got[l]["out"] = first(output)[0].detach().clone()

        def post_norm1(module, args, output, l=l):
            got[l]["xhat"] = output[0].detach().clone()

        def post_out(module, args, output, l=l):
            got[l]["attn_out"] = output[0].detach().clone()

        def pre_norm2(module, args, l=l):
            got[l]["mid"] = args[0][0].detach().clone()

        def post_after(module, args, output, l=l):
            got[l]["after"] = output[0].detach().clone()

        handles += [p.layer.register_forward_pre_hook(pre_layer, with_kwargs=True),
                    p.layer.register_forward_hook(post_layer, with_kwargs=True),
                    p.norm1.register_forward_hook(post_norm1),
                    p.out.register_forward_hook(post_out),
                    p.norm2.register_forward_pre_hook(pre_norm2)]
        if p.after is not None:
            handles.append(p.after.register_forward_hook(post_after))
    try:
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    A = torch.stack(res.attentions)[:, 0]  # L × H × N × N, float32
    return parts, got, A


# --------------------------------------------------------------------------------------------
# Mixing matrices


def head_values(p, xhat):
    """f^h(x̂_j) for every query head: H × N × d (float64), and b_O."""
    Wv, bv, Wo, bo = p.weights()
    V = xhat @ Wv + bv  # N × KV·dh
    dh, H, KV = p.head_dim, p.heads, p.kv_heads
    group = H // KV
    f = np.stack([V[:, (h // group) * dh:(h // group + 1) * dh] @ Wo[h * dh:(h + 1) * dh, :]
                  for h in range(H)])
    return f, bo


def contributions(A, f, p, o):
    """ρ_i(Σ_h A^h_ij f^h(x̂_j)): N × N × d, with ρ from the norm after attention (Gemma) and
    the output projection's output o (N × d); the identity without one."""
    z = np.einsum("hij,hjd->ijd", A, f)
    if p.after is None:
        return z
    gamma = 1.0 + p.after.weight.detach().double().numpy()
    rms = np.sqrt((o ** 2).mean(axis=-1) + p.after.eps)
    return z * gamma[None, None, :] / rms[:, None, None]


def mixing_attention(A):
    return A.mean(axis=0)


def mixing_norm(zatt):
    return np.linalg.norm(zatt, axis=-1)


def mixing_alti(zatt, X, bo):
    z = zatt.copy()
    N = X.shape[0]
    for i in range(N):
        z[i, i] += X[i] + bo
    y = z.sum(axis=1)  # N × d
    M = np.abs(y).sum(-1)[:, None] - np.abs(y[:, None, :] - z).sum(-1)
    return np.maximum(0.0, M), y


class RMSNorm64(torch.nn.Module):
    """weight · x / sqrt(mean(x²) + eps) ((1 + weight) for Gemma's), entirely in the input's
    dtype (float64 here)."""

    def __init__(self, norm):
        super().__init__()
        self.weight = torch.nn.Parameter(norm.weight.detach().clone().double())
        self.eps = getattr(norm, "variance_epsilon", None) or norm.eps
        self.plus_one = type(norm).__name__.startswith("Gemma")

    def forward(self, x):
        scale = 1.0 + self.weight if self.plus_one else self.weight
        return scale * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def norms_f64(module):
    """Every RMSNorm inside `module` (q/k norms and Gemma's four included) → RMSNorm64."""
    for name, child in list(module.named_modules()):
        if name and type(child).__name__.endswith("RMSNorm"):
            parent, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(parent) if parent else module, leaf, RMSNorm64(child))


PROBS64 = []


def eager_f64(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the softmax in the tensors' own dtype (float64 here)."""
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)  # query head h reads kv head h // group
    value = value.repeat_interleave(group, dim=1)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    softcap = kwargs.get("softcap")
    if softcap is not None:  # Gemma 2: before the mask
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1)
    PROBS64.append(probs.detach())
    out = torch.matmul(probs, value).transpose(1, 2).contiguous()
    return out, probs


def register_f64_attention():
    """eager_f64 as an attention implementation, with eager attention's additive masks (causal,
    sliding window): without a mask function of its own, transformers would hand it none."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    AttentionInterface.register(F64_ATTENTION, eager_f64)
    AttentionMaskInterface.register(F64_ATTENTION, eager_mask)


def rotary64(model, N, layer_type=None):
    """cos, sin (1 × N × rotated) in float64 from the model's inv_freq and attention_scaling
    (Gemma 3: its layer type's), read after the model's own (float32) rotary embedding has run
    on N positions (LongRoPE picks its factors then), and checked against it."""
    rot = model.model.rotary_emb
    extra = (layer_type,) if layer_type else ()
    with torch.no_grad():
        c32, s32 = rot(torch.zeros(1, N, 1), torch.arange(N)[None], *extra)
    prefix = f"{layer_type}_" if layer_type else ""
    inv = getattr(rot, f"{prefix}inv_freq").detach().double()
    scaling = getattr(rot, f"{prefix}attention_scaling")
    pos = torch.arange(N, dtype=torch.float64)
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    cos, sin = emb.cos() * scaling, emb.sin() * scaling
    assert (cos - c32.double()).abs().max() < 1e-5 and (sin - s32.double()).abs().max() < 1e-5
    return cos, sin


def mixing_value_zeroing(model, p, got, A32, l):
    """1 − cos(x̃_i^{¬j}, x̃_i) with a float64 copy of decoder layer l."""
    X = got["X"].double()
    N = X.shape[0]
    layer = copy.deepcopy(p.layer).double().eval()
    cols = p.cols
    if p.gpt2:
        attn, value = layer.attn, layer.attn.c_attn
    else:
        norms_f64(layer)
        attn = layer.self_attn
        value = attn.qkv_proj if hasattr(attn, "qkv_proj") else attn.v_proj
    attn.config._attn_implementation = F64_ATTENTION
    assert model.config._attn_implementation == "eager"  # the copy's config is its own
    ok = allowed(N, p.window)
    mask = torch.where(torch.from_numpy(ok), 0.0, -math.inf).double()[None, None]
    kwargs = {"attention_mask": mask}
    if not p.gpt2:
        kwargs["position_embeddings"] = rotary64(model, N, p.layer_type)
        kwargs["position_ids"] = torch.arange(N)[None]

    def run():
        with torch.no_grad():
            out = layer(X[None], **kwargs)
        return (out[0] if isinstance(out, tuple) else out)[0]

    PROBS64.clear()
    base = run()
    assert len(PROBS64) == 1
    dA = (PROBS64[0][0] - A32.double()).abs().max().item()
    dout = (base - got["out"].double()).abs().max().item()
    assert dA < 1e-5, ("value-zeroing: float64 attention vs float32", l, dA)
    assert dout < 1e-4, ("value-zeroing: float64 layer output vs float32", l, dout)
    pert = []
    for j in range(N):
        def zero(module, args, output, j=j):
            out = output.clone()
            out[0, j, cols] = 0.0
            return out

        h = value.register_forward_hook(zero)
        try:
            pert.append(run())
        finally:
            h.remove()
    base_np = base.numpy()
    M = np.zeros((N, N))
    min_changed = math.inf
    for j in range(N):
        diff = np.abs(pert[j].numpy() - base_np).max(axis=1)  # per position i
        # Zeroing v_j changes exactly the positions that attend to j, and nothing else.
        assert np.all(diff[~ok[:, j]] == 0.0), ("value-zeroing leaked", l, j)
        assert np.all(diff[ok[:, j]] > 0.0), ("value-zeroing did not change", l, j)
        min_changed = min(min_changed, diff[ok[:, j]].min())
        for i in range(N):
            if not ok[i, j]:
                continue
            a, b = pert[j][i].numpy(), base_np[i]
            M[i, j] = 1.0 - float(a @ b) / (math.sqrt(float(a @ a)) * math.sqrt(float(b @ b)))
    return M, {"attention": dA, "output": dout, "min_changed": float(min_changed)}


def model_f64(model, N):
    """A float64 copy of the whole model whose arithmetic stays float64: RMSNorms, the
    attention softmax (eager_f64) and the rotary tables (rotary64) replaced, since
    transformers computes those in float32 even in a float64 model."""
    m64 = copy.deepcopy(model).double().eval()
    m64.config._attn_implementation = F64_ATTENTION
    if m64.config.model_type != "gpt2":
        norms_f64(m64)
        rot = model.model.rotary_emb
        types = sorted(set(rot.layer_types)) if hasattr(rot, "layer_types") else [None]
        tables = {t: rotary64(model, N, t) for t in types}
        m64.model.rotary_emb.forward = lambda x, position_ids, layer_type=None, **kw: \
            tables[layer_type]
    return m64


def grad_attention(model, ids, m, gen):
    """M_k,l for every generated token k (g × L × N × N), from a float64 copy of the model
    (float32 gradients from two implementations differ by ~2e-5 relative on tiny-qwen2,
    more than the 1e-5 the maps are checked at; each is within ~1.5e-5 of float64's), and
    the float64 attention."""
    N = len(ids)
    Ms = []
    m64 = model_f64(model, N)
    with torch.enable_grad():
        out = m64(torch.tensor([ids]), output_attentions=True)
        atts = out.attentions
        logits = out.logits[0]
        Aall = torch.stack([a.detach()[0] for a in atts]).numpy()
        for k in range(len(gen)):
            t = m - 1 + k
            s = logits[t, gen[k]]
            grads = torch.autograd.grad(s, atts, retain_graph=True)
            G = torch.stack([g_[0] for g_ in grads]).numpy()  # L × H × N × N
            assert np.all(G[:, :, t + 1:, :] == 0.0), ("grad-attention: rows after t", k)
            Ms.append(np.maximum(0.0, G * Aall).mean(axis=1))  # L × N × N
    assert out.logits.dtype == torch.float64 and atts[0].dtype == torch.float64
    assert np.all(np.triu(Aall, 1) == 0.0), "grad-attention: the float64 pass is not causal"
    return np.stack(Ms), Aall


# --------------------------------------------------------------------------------------------
# Aggregations


def flow_graph(P):
    import networkx as nx

    L, N = len(P), P[0].shape[0]
    G = nx.DiGraph()
    for l in range(L + 1):
        for i in range(N):
            G.add_node((l, i))
    for l in range(1, L + 1):
        for i in range(N):
            for j in range(N):
                c = float(P[l - 1][i][j])
                if c != 0.0:
                    G.add_edge((l, i), (l - 1, j), capacity=c)
    return G


def flow_rows(G, L, N, t):
    import networkx as nx
    from networkx.algorithms.flow import edmonds_karp

    F = np.zeros((L, N))
    for l in range(1, L + 1):
        for j in range(N):
            F[l - 1][j] = nx.maximum_flow_value(G, (l, t), (0, j), capacity="capacity",
                                                flow_func=edmonds_karp)
    return row_normalise(F)


def aggregate(method, Ms_of_k, m, g):
    """Ms_of_k(k) -> the L mixing matrices for token k. Returns {layer, rollout, flow} [g][m][L]."""
    out = {"layer": [], "rollout": [], "flow": []}
    G = None
    for k in range(g):
        t = m - 1 + k
        Ms = Ms_of_k(k)
        L, N = len(Ms), Ms[0].shape[0]
        P = propagation(method, Ms)
        if G is None or method == "grad-attention":
            G = flow_graph(P)
        out["layer"].append(layer_rows(method, Ms, t)[:, :m].T)
        out["rollout"].append(rollout_rows(method, Ms, P, t)[:, :m].T)
        out["flow"].append(flow_rows(G, L, N, t)[:, :m].T)
    return {key: np.array(v) for key, v in out.items()}


# --------------------------------------------------------------------------------------------
# One case


def explain(folder, prompt, n, iglm=None):
    t0 = time.time()
    tok, model = cllm.load(folder)
    ids0 = cllm.iglm_ids(folder, iglm) if iglm else tok(prompt)["input_ids"]
    ids, m, att_ref = cllm.generate(tok, model, ids0, n)
    g = len(ids) - m
    N = m + g - 1
    gen = ids[m:]
    fed = ids[:N]
    L = model.config.num_hidden_layers
    parts, got, A32 = capture(model, fed)
    A = A32.double().numpy()
    H = A.shape[1]
    assert np.array_equal(A, att_ref), "hooked forward differs from causal_llm_reference's"
    checks = {"norm": 0.0, "alti": 0.0, "value-zeroing": [], "grad-attention rows > t": "exactly 0"}

    mixes = {name: [] for name in MIXINGS if name != "grad-attention"}
    for l, p in enumerate(parts):
        X = got[l]["X"].double().numpy()
        xhat = got[l]["xhat"].double().numpy()
        f, bo = head_values(p, xhat)
        o = got[l]["attn_out"].double().numpy()
        zatt = contributions(A[l], f, p, o)
        # norm: the contribution vectors sum (with b_O) to the attention block's output (with a
        # norm after it, to that norm's output, b_O being 0 there)
        if p.after is not None:
            assert not bo.any(), "a norm after attention with an output bias"
        block = o if p.after is None else got[l]["after"].double().numpy()
        d = np.abs(zatt.sum(axis=1) + bo - block).max()
        assert d < 1e-4, ("norm: Σ_j contributions vs attention output", l, d)
        checks["norm"] = max(checks["norm"], float(d))
        mixes["attention"].append(mixing_attention(A[l]))
        mixes["norm"].append(mixing_norm(zatt))
        Malti, y = mixing_alti(zatt, X, bo)
        d = np.abs(y - got[l]["mid"].double().numpy()).max()
        assert d < 1e-4, ("alti: y_i vs residual after attention", l, d)
        checks["alti"] = max(checks["alti"], float(d))
        mixes["alti"].append(Malti)
        Mvz, vz = mixing_value_zeroing(model, p, got[l], A32[l], l)
        mixes["value-zeroing"].append(Mvz)
        checks["value-zeroing"].append(vz)

    Mgrad, A64 = grad_attention(model, fed, m, gen)
    dA = np.abs(A64 - A).max()
    assert dA < 1e-5, ("grad-attention: float64 attention vs float32", dA)
    checks["grad-attention attention f64 vs f32"] = float(dA)

    methods = {}
    for name in MIXINGS:
        if name == "grad-attention":
            agg = aggregate(name, lambda k: list(Mgrad[k]), m, g)
        else:
            agg = aggregate(name, lambda k, name=name: mixes[name], m, g)
        methods[name] = agg

    # attention must be exactly causal_llm_reference's raw / rollout / flow
    ref = cllm.explain(folder, prompt, n, iglm)
    assert ref["generated_ids"] == gen and ref["prompt_ids"] == ids[:m]
    worst = 0.0
    for mine, theirs in (("layer", "raw"), ("rollout", "rollout"), ("flow", "flow")):
        d = np.abs(methods["attention"][mine] - np.array(ref["relevance"][theirs])).max()
        assert d < 1e-12, ("attention vs causal_llm_reference", mine, d)
        worst = max(worst, float(d))
    checks["attention vs causal_llm_reference"] = worst

    report = {
        "prompt_ids": ids[:m],
        "generated_ids": gen,
        "generated_tokens": [tok.decode([i]) for i in gen],
        "layers": L,
        "heads": H,
        "methods": {name: {key: v.tolist() for key, v in agg.items()}
                    for name, agg in methods.items()},
    }
    vz = checks["value-zeroing"]
    log(f"{os.path.basename(folder)} {prompt!r}: m={m} g={g} N={N} L={L} H={H} "
        f"generated {gen} {report['generated_tokens']} ({time.time() - t0:.1f} s)")
    log(f"  checks: attention vs causal_llm_reference {worst:.2e}; norm Σ vs attn out "
        f"{checks['norm']:.2e}; alti y vs residual {checks['alti']:.2e}; value-zeroing f64 vs f32 "
        f"attention {max(c['attention'] for c in vz):.2e}, output {max(c['output'] for c in vz):.2e}, "
        f"smallest change at an attending position {min(c['min_changed'] for c in vz):.2e}, "
        f"none elsewhere; grad-attention rows > t exactly 0, its float64 attention vs float32 "
        f"{checks['grad-attention attention f64 vs f32']:.2e}")
    return report


def dumps(report):
    """indent=1 JSON with each innermost list (the L layer values) on one line."""
    text = json.dumps(report, indent=1)
    import re
    return re.sub(r"\[\n\s*([-0-9.eE+, \n]+?)\n\s*\]",
                  lambda mt: "[" + ", ".join(x.strip() for x in mt.group(1).split(",")) + "]",
                  text) + "\n"


def fixtures(subdir, models_dir, only=None):
    register_f64_attention()
    out = os.path.join(FIXTURES, subdir)
    with open(os.path.join(out, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        if only and case["name"] not in only:
            continue
        folder = os.path.join(models_dir, case["model"])
        report = explain(folder, case["prompt"], case["generate"], case.get("iglm"))
        text = dumps(report)
        assert json.loads(text) == report
        path = os.path.join(out, f"{case['name']}.json")
        with open(path, "w") as f:
            f.write(text)
        log(f"  wrote {os.path.relpath(path, REPO)} ({len(text)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", action="store_true")
    ap.add_argument("--real", metavar="DIR", help="folder holding the fetched real models")
    ap.add_argument("--only", action="append", help="only this case (repeatable)")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.fixtures:
        fixtures("methods", os.path.join(REPO, "models"), args.only)
    elif args.real:
        fixtures("methods-real", args.real, args.only)
    else:
        ap.error("--fixtures or --real DIR")


if __name__ == "__main__":
    main()
