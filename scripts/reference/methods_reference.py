#!/usr/bin/env python3
"""Independent Python reference for SPEC.md §8: mixing matrices × aggregations, and ERASER.

Written from the SPEC alone; never calls or reads the Rust code. Loads a local encoder checkpoint
(float32, eval mode, eager attention), encodes exactly the given text (no padding, no truncation)
and, for every layer l (1..L), builds the mixing matrix M_l (n × n, row i = the layer's output at
position i, column j = its input at position j) from transformers internals:

  X      the layer's input hidden states (a forward pre-hook on the layer module), float32
  A^h    head h's attention probabilities (output_attentions), float32
  f^h    f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h from the module weights (W_V^h: head h's columns of
         the value projection, W_O^h: head h's rows of the attention output projection)
  b_O    the attention output projection's bias
  LN1    the layer norm after the attention block (weight γ, bias β, eps)

Everything below is float64 (from the float32 X, A and weights):

  attention       M[i][j] = mean_h A^h_ij                                   (rows as they are)
  norm            M[i][j] = ‖Σ_h A^h_ij f^h(x_j)‖₂
  alti            as the authors' code (mt-upc/transformer-contributions) computes it:
                  z_ij = Σ_h A^h_ij f^h(x_j) + [i=j] x_j;  z_i = Σ_j z_ij + b_O (LN1's input)
                  σ_i = sqrt(var(z_i) + eps) (population variance over the hidden dimension)
                  t_ij = γ ⊙ (z_ij − mean(z_ij)) / σ_i  (b_O and β in no t_ij)
                  y_i = Σ_j t_ij + γ ⊙ (b_O − mean(b_O)) / σ_i + β  (LN1's output)
                  M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − t_ij‖₁)  (no epsilon in the distance)
  value-zeroing   the layer module itself re-run in float64 (a float64 copy of it, called on X),
                  once unchanged and once per j with a forward hook on the value projection that
                  sets row j of its output (x_j W_V + b_V, every head) to zero; attention
                  probabilities and the residual are untouched by construction.
                  M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i), cosine in float64
  grad-attention  s = the explained score: masked LM the logit of the explained word at the
                  target (default: the top prediction), classifier the logit of the label
                  (default: the top label) at the first token. ∂s/∂A^h_ij by autograd on the
                  float32 model (retain_grad on the output_attentions tensors, i.e. the total
                  derivative through every later layer).
                  M[i][j] = mean_h max(0, ∂s/∂A^h_ij · A^h_ij)

Row normalisation N(M): each row divided by its sum, a zero row stays zero. Not applied to
`attention` (softmax rows as they are) nor to `grad-attention`.

Aggregations for target t (α = 0.5), one row per layer:

  layer     N(M_l)[t]  (attention: Ā_l[t] = §1's raw; grad-attention: M_l[t] unnormalised)
  P_l       the matrices that rollout and flow run on:
              attention, norm:         P_l = rownorm((1 − α)·N(M_l) + α·I)
                                       (= (Ā + I)/rowsum as reference.py for attention; for norm
                                       the rownorm is a no-op since N(M_l) rows sum to 1)
              alti, value-zeroing:     P_l = N(M_l)                  (residual already inside)
              grad-attention (flow):   P_l = rownorm(I + M_l)
  rollout   R_1 = P_1, R_l = P_l · R_{l−1}; rollout[l] = R_l[t]
            grad-attention (Chefer et al. 2021): R_0 = I, R_l = R_{l−1} + M_l · R_{l−1};
            rollout[l] = R_l[t] / Σ_j R_l[t][j]
  flow      networkx DiGraph, nodes (l, i) for l = 0..L, edges (l, i) → (l−1, j) with capacity
            P_l[i][j]; F[l][j] = maximum_flow_value((l, t), (0, j)) with Edmonds-Karp;
            flow[l] = F[l] / Σ_k F[l][k] (a zero total stays zero)

ERASER (only with a head): for each mixing and each of its last-layer rollout and flow maps,
the non-special tokens (special: [CLS] [SEP] [MASK] [PAD] <s> </s> <mask> <pad>) ranked by
relevance rounded to 10 decimals (Python round(r, 10): flow values that saturate at the same
bottleneck are equal only up to float noise), highest first, ties by the lower position;
m = their count; for p in
{1, 5, 10, 20, 50} k = ceil(p·m/100) computed in integers ((p·m + 99) // 100);
comprehensiveness_k = p(y|x) − p(y|x with the top k replaced by [UNK]/<unk>),
sufficiency_k = p(y|x) − p(y|x with the other m − k non-special tokens replaced);
p = softmax probability (float32 model) of the explained word at t / of the label.
AOPC = mean over the five k; reported as "comprehensiveness" and "sufficiency".

Usage: methods_reference.py --model DIR --text TEXT [--pair TEXT] [--pretokenized] [--target I]
                            [--word W | --label NAME|ID] [--mixings a,b,..] [--no-eraser] [--out FILE]
"""

import argparse
import copy
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402

MIXINGS = ("attention", "norm", "alti", "value-zeroing", "grad-attention")
NEEDS_SCORE = ("grad-attention",)
RESIDUAL_INSIDE = ("alti", "value-zeroing")
ALPHA = 0.5
SPECIAL = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "<s>", "</s>", "<mask>", "<pad>")
UNKNOWN = ("[UNK]", "<unk>")
ERASER_PERCENTS = (1, 5, 10, 20, 50)
TIE_DECIMALS = 10


def log(msg):
    print(f"methods: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Loading and locating the layer internals


def task_of(architecture):
    if architecture.endswith("ForMaskedLM"):
        return "masked-lm"
    if architecture.endswith("ForSequenceClassification"):
        return "sequence-classification"
    if architecture == "ElectraForPreTraining":
        return "replaced-token-detection"
    return "encoder"


class PieceVocab:
    """vocab.txt as bert-explain's --pretokenized reads it: every whitespace-separated piece
    looked up whole (no lowercasing, no splitting), [CLS] first, [SEP] last (real_reference.py's
    encode_pretokenized). Offers the few tokenizer methods this module calls."""

    def __init__(self, folder):
        import real_reference

        self.tokens, self.vocab = real_reference.read_vocab(folder)
        self._encode = real_reference.encode_pretokenized
        self.mask_token_id = self.vocab.get("[MASK]")

    def encode(self, text):
        return self._encode(self.vocab, text)

    def get_vocab(self):
        return dict(self.vocab)

    def convert_tokens_to_ids(self, token):
        return self.vocab[token]

    def convert_ids_to_tokens(self, ids):
        return [self.tokens[i] for i in ids]

    def tokenize(self, word):
        if word not in self.vocab:
            ref.fail(f"{word!r} is not a vocabulary entry")
        return [word]


class Checkpoint:
    def __init__(self, folder, pretokenized=False):
        import torch
        import transformers

        self.folder = os.path.abspath(folder)
        self.pretokenized = pretokenized
        with open(os.path.join(self.folder, "config.json")) as f:
            config = json.load(f)
        self.family = config.get("model_type", "bert")
        architecture = (config.get("architectures") or ["BertForMaskedLM"])[0]
        self.tok = PieceVocab(self.folder) if pretokenized else ref.load_tokenizer(self.folder)
        if self.family == "bert" and task_of(architecture) != "sequence-classification":
            # reference.py's loader: BertForMaskedLM when the head is there, else BertModel.
            self.model, has_head = ref.load_model(self.folder)
            self.task = "masked-lm" if has_head else "encoder"
        else:
            cls = getattr(transformers, architecture)
            self.model, info = cls.from_pretrained(self.folder, attn_implementation="eager",
                                                   dtype=torch.float32, output_loading_info=True)
            if info.get("missing_keys") or info.get("mismatched_keys"):
                ref.fail(f"{folder}: loading problems: {info}")
            self.model = self.model.float().eval()
            self.task = task_of(architecture)
        self.config = self.model.config


class LayerParts:
    """One layer call: the module and the pieces of it that the mixings need."""

    def __init__(self, module, query, key, value, out, ln1, heads, arguments=None):
        self.module, self.query, self.key, self.value, self.out, self.ln1 = (
            module, query, key, value, out, ln1)
        self.heads = heads
        # (batch, n) → the keyword arguments the layer module needs besides its input, in
        # float64 (DeBERTa's mask, relative positions and table); none for BERT's.
        self.arguments = arguments or (lambda batch, n: {})


def layer_calls(model):
    """LayerParts for layers 1..L in call order (ALBERT's shared layer repeated)."""
    base = model.base_model
    cfg = model.config
    family = cfg.model_type
    if family in ("bert", "roberta", "xlm-roberta", "electra"):
        out = []
        for layer in base.encoder.layer:
            att = layer.attention
            out.append(LayerParts(layer, att.self.query, att.self.key, att.self.value,
                                  att.output.dense, att.output.LayerNorm, cfg.num_attention_heads))
        return out
    if family == "deberta-v2":  # BERT's block; its logits' position terms change A, not the value path
        import torch

        encoder = base.encoder

        def arguments(batch, n):
            table = encoder.get_rel_embedding()
            return {"attention_mask": torch.ones(batch, 1, n, n),
                    "relative_pos": encoder.get_rel_pos(torch.zeros(1, n, 1)),
                    "rel_embeddings": None if table is None else table.detach().double()}

        out = []
        for layer in encoder.layer:
            att = layer.attention
            out.append(LayerParts(layer, att.self.query_proj, att.self.key_proj, att.self.value_proj,
                                  att.output.dense, att.output.LayerNorm, cfg.num_attention_heads,
                                  arguments))
        return out
    if family == "distilbert":
        out = []
        for layer in base.transformer.layer:
            att = layer.attention
            out.append(LayerParts(layer, att.q_lin, att.k_lin, att.v_lin, att.out_lin,
                                  layer.sa_layer_norm, cfg.n_heads))
        return out
    if family == "albert":
        groups = base.encoder.albert_layer_groups
        if len(groups) != 1 or len(groups[0].albert_layers) != 1:
            ref.fail("only ALBERT with one shared layer (one group, one inner layer) is supported")
        layer = groups[0].albert_layers[0]
        att = layer.attention
        parts = LayerParts(layer, att.query, att.key, att.value, att.dense, att.LayerNorm,
                           cfg.num_attention_heads)
        return [parts] * cfg.num_hidden_layers
    ref.fail(f"model_type {family!r} is not supported by the methods reference")


# --------------------------------------------------------------------------------------------
# The forward pass with everything the mixings need


def explained_of(ck, t, logits_t, word=None, label=None):
    """(kind, id) of the explained word / label; None for an encoder."""
    import torch

    if ck.task == "masked-lm":
        if word is None:
            return "word", int(torch.argmax(logits_t))
        pieces = ck.tok.tokenize(word)
        if len(pieces) != 1:
            ref.fail(f"{word!r} is not a single wordpiece: {pieces}")
        return "word", int(ck.tok.convert_tokens_to_ids(pieces[0]))
    if ck.task == "sequence-classification":
        if label is None:
            return "label", int(torch.argmax(logits_t))
        names = {str(v): int(k) for k, v in (ck.config.id2label or {}).items()}
        if str(label) in names:
            return "label", names[str(label)]
        if str(label).isdigit() and int(label) < ck.config.num_labels:
            return "label", int(label)
        ref.fail(f"unknown label {label!r}: {sorted(names)}")
    if ck.task == "replaced-token-detection":
        names = {"original": 0, "replaced": 1}
        if label is None:
            return "label", int(torch.argmax(logits_t))
        if str(label) in names:
            return "label", names[str(label)]
        if str(label) in ("0", "1"):
            return "label", int(label)
        ref.fail(f"unknown label {label!r}: original, replaced")
    return None, None


def score_logits(ck, out, t):
    """The logits vector that the explained score is read from."""
    import torch

    if ck.task == "masked-lm":
        return out.logits[0, t]
    if ck.task == "sequence-classification":
        return out.logits[0]
    if ck.task == "replaced-token-detection":
        # ELECTRA's discriminator logit d at t, as the 2-class view [0, d] (softmax =
        # (p(original), p(replaced)) = (1 − sigmoid(d), sigmoid(d))).
        d = out.logits[0, t]
        return torch.stack([torch.zeros_like(d), d])
    return None


def forward(ck, enc, t, word=None, label=None):
    """Runs the float32 model once with grad; returns X, A, LN1 in/out, layer outputs, grads."""
    import torch

    calls = layer_calls(ck.model)
    xs, ln1_in, ln1_out, layer_out = [], [], [], []
    handles = []
    seen = set()
    for parts in calls:
        if id(parts.module) in seen:
            continue
        seen.add(id(parts.module))

        def pre(module, args, kwargs):
            h = args[0] if args else kwargs["hidden_states"]
            xs.append(h.detach()[0].clone())

        def post(module, args, kwargs, output):
            o = output[0] if isinstance(output, tuple) else output
            layer_out.append(o.detach()[0].clone())

        def ln_pre(module, args):
            ln1_in.append(args[0].detach()[0].clone())

        def ln_post(module, args, output):
            ln1_out.append(output.detach()[0].clone())

        handles.append(parts.module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(parts.module.register_forward_hook(post, with_kwargs=True))
        handles.append(parts.ln1.register_forward_pre_hook(ln_pre))
        handles.append(parts.ln1.register_forward_hook(ln_post))
    try:
        with torch.enable_grad():
            out = ck.model(**enc, output_attentions=True)
            atts = list(out.attentions)
            for a in atts:
                a.retain_grad()
            logits = score_logits(ck, out, t)
            kind, eid = (None, None)
            if logits is not None:
                kind, eid = explained_of(ck, t, logits.detach(), word, label)
                logits[eid].backward()
    finally:
        for h in handles:
            h.remove()
    L = len(calls)
    if not (len(xs) == len(atts) == len(ln1_in) == len(layer_out) == L):
        ref.fail(f"hooks saw {len(xs)} layer inputs, {len(atts)} attentions, {len(ln1_in)} LN1 inputs for {L} layers")
    res = {
        "calls": calls,
        "X": xs,
        "A": [a.detach()[0] for a in atts],
        "grad": [a.grad[0].detach() if a.grad is not None else None for a in atts],
        "ln1_in": ln1_in,
        "ln1_out": ln1_out,
        "layer_out": layer_out,
        "explained": None,
    }
    if logits is not None:
        probs = torch.softmax(logits.detach().float(), dim=-1)
        res["explained"] = {"kind": kind, "id": eid, "logit": float(logits[eid].detach()),
                            "probability": float(probs[eid])}
        if any(g is None for g in res["grad"]):
            ref.fail("no gradient reached an attention tensor")
    return res


# --------------------------------------------------------------------------------------------
# Mixing matrices (float64 numpy)


def head_values(parts, X):
    """f^h(x_j) for every head and position: H × n × d (float64), and b_O."""
    import numpy as np

    Wv = parts.value.weight.detach().double().numpy().T  # d × (H·dh)
    bv = parts.value.bias.detach().double().numpy()
    Wo = parts.out.weight.detach().double().numpy().T  # (H·dh) × d
    bo = parts.out.bias.detach().double().numpy()
    H = parts.heads
    dh = Wv.shape[1] // H
    V = X @ Wv + bv  # n × (H·dh)
    f = np.stack([V[:, h * dh:(h + 1) * dh] @ Wo[h * dh:(h + 1) * dh, :] for h in range(H)])
    return f, bo


def mixing_attention(A):
    return A.mean(axis=0)


def mixing_norm(A, f):
    import numpy as np

    zatt = np.einsum("hij,hjd->ijd", A, f)
    return np.linalg.norm(zatt, axis=-1)


def alti_terms(A, f, X):
    """z_ij (n × n × d) as SPEC §8 defines it: each head's part and the residual x_j on the
    diagonal, the output bias in none."""
    import numpy as np

    z = np.einsum("hij,hjd->ijd", A, f)
    n = X.shape[0]
    for i in range(n):
        z[i, i] += X[i]
    return z


def mixing_alti(z, gamma, beta, bo, eps):
    """M and y_i, LN1's output rebuilt from its parts (the authors' `resultant`)."""
    import numpy as np

    zi = z.sum(axis=1) + bo  # n × d, LN1's input
    sigma = np.sqrt(zi.var(axis=-1) + eps)  # population variance
    t = gamma * (z - z.mean(axis=-1, keepdims=True)) / sigma[:, None, None]
    y = t.sum(axis=1) + gamma * (bo - bo.mean()) / sigma[:, None] + beta  # n × d
    m = np.abs(y).sum(-1)[:, None] - np.abs(y[:, None, :] - t).sum(-1)
    return np.maximum(0.0, m), y


def mixing_value_zeroing(parts, X32):
    """1 − cos(x̃_i^{¬j}, x̃_i) with a float64 copy of the layer module."""
    import numpy as np
    import torch

    layer = copy.deepcopy(parts.module).double().eval()
    value = dict(layer.named_modules())[
        next(name for name, m in parts.module.named_modules() if m is parts.value)]
    n = X32.shape[0]
    X = X32.double()
    with torch.no_grad():
        base = layer(X[None], **parts.arguments(1, n))
        base = (base[0] if isinstance(base, tuple) else base)[0]

        def zero(module, args, output):
            out = output.clone()
            for j in range(n):
                out[j, j, :] = 0.0
            return out

        handle = value.register_forward_hook(zero)
        try:
            pert = layer(X[None].expand(n, -1, -1).contiguous(), **parts.arguments(n, n))
            pert = pert[0] if isinstance(pert, tuple) and pert[0].dim() == 3 else pert
        finally:
            handle.remove()
    base = base.numpy()
    pert = pert.numpy()  # pert[j, i] = output at i with token j's values zeroed
    M = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            a, b = pert[j, i], base[i]
            M[i, j] = 1.0 - float(a @ b) / (math.sqrt(float(a @ a)) * math.sqrt(float(b @ b)))
    return M, base


def mixing_grad(A, G):
    import numpy as np

    return np.maximum(0.0, G * A).mean(axis=0)


# --------------------------------------------------------------------------------------------
# Aggregations


def row_normalise(M):
    import numpy as np

    s = M.sum(axis=-1, keepdims=True)
    return np.where(s != 0, M / np.where(s != 0, s, 1.0), 0.0)


def propagation_matrices(mixing, Ms, alpha=ALPHA):
    """P_l that rollout (except grad-attention's) and flow run on."""
    import numpy as np

    n = Ms[0].shape[0]
    eye = np.eye(n)
    if mixing == "grad-attention":
        return [row_normalise(eye + M) for M in Ms]
    if mixing in RESIDUAL_INSIDE:
        return [row_normalise(M) for M in Ms]
    normed = Ms if mixing == "attention" else [row_normalise(M) for M in Ms]
    return [row_normalise((1 - alpha) * M + alpha * eye) for M in normed]


def layer_rows(mixing, Ms, t):
    import numpy as np

    if mixing in ("attention", "grad-attention"):
        return np.stack([M[t] for M in Ms])
    return np.stack([row_normalise(M)[t] for M in Ms])


def rollout(mixing, Ms, P, t):
    import numpy as np

    rows = []
    if mixing == "grad-attention":
        R = np.eye(Ms[0].shape[0])
        for M in Ms:
            R = R + M @ R
            rows.append(R[t] / R[t].sum())
        return np.stack(rows)
    R = None
    for Pl in P:
        R = Pl.copy() if R is None else Pl @ R
        rows.append(R[t].copy())
    return np.stack(rows)


def flow(P, t):
    import networkx as nx
    import numpy as np
    from networkx.algorithms.flow import edmonds_karp

    L = len(P)
    n = P[0].shape[0]
    G = nx.DiGraph()
    for l in range(L + 1):
        for i in range(n):
            G.add_node((l, i))
    for l in range(1, L + 1):
        for i in range(n):
            for j in range(n):
                G.add_edge((l, i), (l - 1, j), capacity=float(P[l - 1][i][j]))
    F = np.zeros((L, n))
    for l in range(1, L + 1):
        for j in range(n):
            F[l - 1][j] = nx.maximum_flow_value(G, (l, t), (0, j), capacity="capacity",
                                                flow_func=edmonds_karp)
    return row_normalise(F)


# --------------------------------------------------------------------------------------------
# ERASER


def eraser(ck, enc, t, explained, tokens, relevance):
    """AOPC comprehensiveness and sufficiency of one relevance vector. Never blanked: the
    special tokens and the explained position t (a [MASK] or the first token for every masked
    LM / classifier case; ELECTRA's discriminator explains an ordinary token)."""
    import torch

    ids = enc["input_ids"]
    unk = next((ck.tok.convert_tokens_to_ids(u) for u in UNKNOWN if u in ck.tok.get_vocab()), None)
    if unk is None:
        ref.fail("the vocabulary has neither [UNK] nor <unk>")
    cand = [j for j, tk in enumerate(tokens) if tk not in SPECIAL and j != t]
    # Relevances rounded to 10 decimals first, so that values equal up to float noise (flow often
    # saturates: several tokens get the same bottleneck value) rank as ties, broken by position.
    ranked = sorted(cand, key=lambda j: (-round(float(relevance[j]), TIE_DECIMALS), j))
    m = len(ranked)
    ks = [(p * m + 99) // 100 for p in ERASER_PERCENTS]
    variants = []
    for k in ks:
        comp = ids.clone()
        for j in ranked[:k]:
            comp[0, j] = unk
        suff = ids.clone()
        for j in ranked[k:]:
            suff[0, j] = unk
        variants += [comp, suff]
    batch = torch.cat(variants, dim=0)
    extra = {k: v.expand(batch.shape[0], -1) for k, v in enc.items() if k != "input_ids"}
    with torch.no_grad():
        logits = ck.model(input_ids=batch, **extra).logits
    if ck.task == "masked-lm":
        probs = torch.softmax(logits[:, t].float(), dim=-1)[:, explained["id"]]
    elif ck.task == "replaced-token-detection":
        d = logits[:, t].float()
        probs = torch.softmax(torch.stack([torch.zeros_like(d), d], dim=-1), dim=-1)[:, explained["id"]]
    else:
        probs = torch.softmax(logits.float(), dim=-1)[:, explained["id"]]
    p = explained["probability"]
    comp = [p - float(probs[2 * i]) for i in range(len(ks))]
    suff = [p - float(probs[2 * i + 1]) for i in range(len(ks))]
    return {"comprehensiveness": sum(comp) / len(ks), "sufficiency": sum(suff) / len(ks),
            "k": ks, "comprehensiveness_k": comp, "sufficiency_k": suff}


# --------------------------------------------------------------------------------------------


def encode(ck, text, pair=None):
    """The model inputs: exactly the text (and pair). Token types: tokenizer.json's (1 for a
    BERT/ALBERT/ELECTRA pair's second text), all zeros where the config's type_vocab_size ≤ 1
    (RoBERTa, XLM-R), none for DistilBERT; pretokenized: [CLS] pieces [SEP], types 0."""
    import torch

    if ck.pretokenized:
        if pair is not None:
            ref.fail("--pretokenized with a pair is not supported")
        ids = torch.tensor([ck.tok.encode(text)])
        enc = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
               "attention_mask": torch.ones_like(ids)}
    elif pair is None:
        enc = ref.encode(ck.tok, text)
    else:
        enc = dict(ck.tok(text, pair, add_special_tokens=True, padding=False, truncation=False,
                          return_token_type_ids=True, return_tensors="pt"))
        if not bool((enc["attention_mask"] == 1).all()):
            ref.fail("the tokenizer padded the input")
    if "token_type_ids" in enc and getattr(ck.config, "type_vocab_size", 2) <= 1:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    if ck.family in ("distilbert",) and "token_type_ids" in enc:
        del enc["token_type_ids"]
    return enc


def run(model_dir, text, target=None, word=None, label=None, mixings=MIXINGS, with_eraser=True,
        checks=True, pair=None, pretokenized=False):
    import numpy as np
    import torch

    t0 = time.time()
    ck = Checkpoint(model_dir, pretokenized)
    enc = encode(ck, text, pair)
    ids = enc["input_ids"][0].tolist()
    tokens = ck.tok.convert_ids_to_tokens(ids)
    n = len(ids)
    if target is None:
        if ck.task == "sequence-classification":
            t = 0
        else:
            masks = [i for i, x in enumerate(ids) if x == ck.tok.mask_token_id]
            if len(masks) != 1:
                ref.fail(f"the text has {len(masks)} mask tokens; give exactly one or a target")
            t = masks[0]
    else:
        t = int(target)
        if not 0 <= t < n:
            ref.fail(f"target {t} out of range 0..{n - 1}")
    fw = forward(ck, enc, t, word, label)
    explained = fw["explained"]
    if explained is None:
        mixings = [m for m in mixings if m not in NEEDS_SCORE]
    calls = fw["calls"]
    L = len(calls)
    log(f"{os.path.basename(ck.folder)}: {n} tokens, target {t} ({tokens[t]}), {L} layers, "
        f"explained {explained}")

    Ms = {m: [] for m in mixings}
    for l, parts in enumerate(calls):
        X = fw["X"][l].double().numpy()
        A = fw["A"][l].double().numpy()
        f, bo = head_values(parts, X)
        if "attention" in Ms:
            Ms["attention"].append(mixing_attention(A))
        if "norm" in Ms:
            Ms["norm"].append(mixing_norm(A, f))
        if "alti" in Ms or checks:
            z = alti_terms(A, f, X)
            gamma = parts.ln1.weight.detach().double().numpy()
            beta = parts.ln1.bias.detach().double().numpy()
            M, y = mixing_alti(z, gamma, beta, bo, float(parts.ln1.eps))
            if "alti" in Ms:
                Ms["alti"].append(M)
            if checks:
                zi = z.sum(axis=1) + bo
                e1 = np.abs(zi - fw["ln1_in"][l].double().numpy()).max()
                e2 = np.abs(y - fw["ln1_out"][l].double().numpy()).max()
                scale = max(1.0, np.abs(zi).max())
                if e1 > 1e-4 * scale or e2 > 1e-4:
                    ref.fail(f"layer {l + 1}: z_i / y_i do not rebuild LN1's input/output ({e1:.2e}, {e2:.2e})")
        if "value-zeroing" in Ms:
            M, base = mixing_value_zeroing(parts, fw["X"][l])
            Ms["value-zeroing"].append(M)
            if checks:
                e = np.abs(base - fw["layer_out"][l].double().numpy()).max()
                if e > 1e-4:
                    ref.fail(f"layer {l + 1}: the float64 re-run differs from the model's output by {e:.2e}")
        if "grad-attention" in Ms:
            G = fw["grad"][l].double().numpy()
            Ms["grad-attention"].append(mixing_grad(A, G))

    methods = {}
    for m in mixings:
        P = propagation_matrices(m, Ms[m])
        methods[m] = {
            "matrices": np.stack(Ms[m]),
            "layer": layer_rows(m, Ms[m], t),
            "rollout": rollout(m, Ms[m], P, t),
            "flow": flow(P, t),
            "_P": P,
        }
        log(f"{m}: done ({time.time() - t0:.1f} s)")

    if checks:
        check(methods, fw, t, n, L)

    ev = None
    if explained is not None and with_eraser:
        ev = {}
        for m in mixings:
            ev[m] = {agg: eraser(ck, enc, t, explained, tokens, methods[m][agg][-1])
                     for agg in ("rollout", "flow")}
    log(f"done in {time.time() - t0:.1f} s")
    for m in methods.values():
        del m["_P"]
    return {
        "model": os.path.basename(ck.folder.rstrip("/")),
        "family": ck.family,
        "task": ck.task,
        "tokens": tokens,
        "target": t,
        "explained": explained or {"kind": None, "id": None, "logit": None, "probability": None},
        "methods": {m: {k: v.tolist() for k, v in d.items()} for m, d in methods.items()},
        "eraser": ev,
    }


def check(methods, fw, t, n, L):
    """Self-checks: finite values, row sums, and attention against reference.py."""
    import numpy as np

    for m, d in methods.items():
        for k in ("matrices", "layer", "rollout", "flow"):
            if not np.all(np.isfinite(d[k])):
                ref.fail(f"{m}/{k} has a non-finite value")
        for P in d["_P"]:
            if np.abs(P.sum(-1) - 1).max() > 1e-12:
                ref.fail(f"{m}: a propagation matrix row does not sum to 1")
        if m not in ("attention", "grad-attention"):
            for M in d["matrices"]:
                s = row_normalise(M).sum(-1)
                if np.abs(s - 1).max() > 1e-12:
                    ref.fail(f"{m}: a normalised row does not sum to 1 ({s})")
        for k in ("rollout", "flow"):
            if np.abs(d[k].sum(-1) - 1).max() > 1e-9:
                ref.fail(f"{m}/{k}: rows do not sum to 1")
        if (d["matrices"] < 0).any() and m != "value-zeroing":
            ref.fail(f"{m}: negative entries")
        if m == "value-zeroing" and d["matrices"].min() < -1e-12:
            ref.fail("value-zeroing: 1 − cos below −1e-12")
    if "attention" in methods:
        att = np.stack([a.double().numpy() for a in fw["A"]])
        mean, aug = ref.fuse_and_augment(att)
        want = {"layer": mean[:, t, :], "rollout": ref.rollout_rows(aug, t), "flow": ref.flow_rows(aug, t)}
        for k, v in want.items():
            e = np.abs(methods["attention"][k] - v).max()
            if e > 1e-9:
                ref.fail(f"attention/{k} differs from reference.py by {e:.2e}")
        log(f"attention: reference.py agreement ok; softmax row-sum error {np.abs(att.sum(-1) - 1).max():.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--pair", default=None)
    ap.add_argument("--pretokenized", action="store_true",
                    help="pieces looked up whole in vocab.txt, as bert-explain --pretokenized")
    ap.add_argument("--target", type=int, default=None)
    ap.add_argument("--word", default=None)
    ap.add_argument("--label", default=None)
    ap.add_argument("--mixings", default=",".join(MIXINGS))
    ap.add_argument("--no-eraser", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    mixings = [m.strip() for m in args.mixings.split(",") if m.strip()]
    bad = [m for m in mixings if m not in MIXINGS]
    if bad:
        print(f"methods: error: unknown mixing {bad}; choose from {MIXINGS}", file=sys.stderr)
        sys.exit(2)
    try:
        report = run(args.model, args.text, args.target, args.word, args.label, mixings,
                     not args.no_eraser, pair=args.pair, pretokenized=args.pretokenized)
    except ref.ReferenceError as e:
        print(f"methods: error: {e}", file=sys.stderr)
        sys.exit(1)
    text = json.dumps(report, indent=1) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
