#!/usr/bin/env python3
"""Independent Python reference for bert-explain (SPEC.md sections 1, 2 and 4).

Loads a local BERT checkpoint folder with transformers (float32, eval mode, eager attention),
encodes exactly the given text (no padding, no truncation), and computes for the target
position t (default: the [MASK] token), from the float32 attention probabilities in float64:

  head fusion     Ā_l = mean_h A[l][h]
  raw             raw[l][j] = Ā_l[t][j]
  residual        Â_l = (Ā_l + I) / rowsum(Ā_l + I)          (α = 0.5, as the paper's code)
  rollout         R_1 = Â_1, R_l = Â_l · R_{l-1};  rollout[l][j] = R_l[t][j]
  flow            layered networkx DiGraph, nodes (l, i) for l = 0..L, edges (l, i) -> (l-1, j)
                  with capacity Â_l[i][j]; F[l][j] = max flow (Edmonds-Karp) from (l, t) to
                  (0, j); flow[l][j] = F[l][j] / Σ_k F[l][k]

and, if the checkpoint has a masked-LM head, p = softmax(logits[t]) over the vocabulary.
Writes the SPEC §4 JSON report. Never uses any Rust code.

Usage: reference.py --model DIR --text TEXT [--target I] [--candidates his,her] [--top-k 5]
                    [--out FILE] [--attention-out FILE]
"""

import argparse
import json
import os
import sys
import time


def log(msg):
    print(f"reference: {msg}", file=sys.stderr, flush=True)


class ReferenceError(Exception):
    """A problem with the input or the checkpoint, reported as one message."""


def fail(msg):
    raise ReferenceError(msg)


def load_tokenizer(folder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        # tokenizer.json may carry padding/truncation (MiniLM's pads and truncates at 128):
        # switch both off so that exactly the given text is encoded.
        backend.no_padding()
        backend.no_truncation()
    return tok


def encode(tok, text):
    import torch

    enc = tok(text, add_special_tokens=True, padding=False, truncation=False, return_tensors="pt")
    ids = enc["input_ids"]
    mask = enc.get("attention_mask")
    if mask is not None and not bool(torch.all(mask == 1)):
        fail("the tokenizer padded the input; the reference must not pad")
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(ids)
    if "attention_mask" not in enc:
        enc["attention_mask"] = torch.ones_like(ids)
    return enc


def load_model(folder):
    """BertForMaskedLM if the folder has an MLM head, else BertModel. Returns (model, has_head)."""
    import torch
    from transformers import BertForMaskedLM, BertModel

    def load(cls, **extra):
        kwargs = dict(attn_implementation="eager", **extra)
        try:
            return cls.from_pretrained(folder, dtype=torch.float32, **kwargs)
        except TypeError:  # transformers 4 spells it torch_dtype
            return cls.from_pretrained(folder, torch_dtype=torch.float32, **kwargs)

    model, info = load(BertForMaskedLM, output_loading_info=True)
    missing = list(info.get("missing_keys", []))
    mismatched = list(info.get("mismatched_keys", []))
    if mismatched:
        fail(f"{folder}: tensors with the wrong shape: {mismatched}")
    head_missing = [k for k in missing if k.startswith("cls.")]
    body_missing = [k for k in missing if not k.startswith("cls.")]
    if body_missing:
        fail(f"{folder}: missing encoder tensors: {body_missing}")
    if head_missing:
        log(f"no masked-LM head in {folder} (missing {len(head_missing)} cls.* tensors); loading BertModel")
        model, info = load(BertModel, output_loading_info=True)
        if info.get("missing_keys"):
            # The pooler is irrelevant for attention; anything else is not.
            rest = [k for k in info["missing_keys"] if not k.startswith("pooler.")]
            if rest:
                fail(f"{folder}: missing tensors: {rest}")
        has_head = False
    else:
        has_head = True
    model = model.float().eval()
    return model, has_head


def fuse_and_augment(att):
    """att: float64 array L×H×n×n -> (Ā, Â), each L×n×n."""
    import numpy as np

    mean = att.mean(axis=1)
    n = mean.shape[-1]
    aug = mean + np.eye(n)[None, :, :]
    aug = aug / aug.sum(axis=-1, keepdims=True)
    return mean, aug


def rollout_rows(aug, t):
    import numpy as np

    rows = []
    joint = None
    for l in range(aug.shape[0]):
        joint = aug[l].copy() if joint is None else aug[l] @ joint
        rows.append(np.array(joint[t]))
    return np.stack(rows)


def flow_rows(aug, t):
    """Attention flow with networkx, exactly as the layered graph of SPEC §1."""
    import networkx as nx
    import numpy as np
    from networkx.algorithms.flow import edmonds_karp

    L, n, _ = aug.shape
    G = nx.DiGraph()
    for l in range(L + 1):
        for i in range(n):
            G.add_node((l, i))
    for l in range(1, L + 1):
        for i in range(n):
            for j in range(n):
                G.add_edge((l, i), (l - 1, j), capacity=float(aug[l - 1][i][j]))
    out = np.zeros((L, n))
    start = time.time()
    for l in range(1, L + 1):
        for j in range(n):
            out[l - 1][j] = nx.maximum_flow_value(G, (l, t), (0, j), capacity="capacity", flow_func=edmonds_karp)
        log(f"flow: layer {l}/{L} done ({time.time() - start:.1f} s)")
    sums = out.sum(axis=1, keepdims=True)
    return out / sums


def prediction(model, tok, enc, t, candidates, top_k):
    import torch

    with torch.no_grad():
        logits = model(**enc).logits[0, t]
    probs = torch.softmax(logits.float(), dim=-1)
    cands = []
    for word in candidates:
        pieces = tok.tokenize(word)
        if len(pieces) != 1:
            fail(f"candidate {word!r} is not a single wordpiece: it tokenizes as {pieces}")
        piece = pieces[0]
        idx = tok.convert_tokens_to_ids(piece)
        if piece == tok.unk_token or idx == tok.unk_token_id:
            fail(f"candidate {word!r} is not in the vocabulary (it tokenizes as {pieces})")
        cands.append({"word": word, "id": int(idx), "probability": float(probs[idx])})
    k = min(top_k, probs.shape[0])
    values, indices = torch.topk(probs, k)
    top = [{"word": tok.convert_ids_to_tokens(int(i)), "id": int(i), "probability": float(v)}
           for v, i in zip(values, indices)]
    return {"candidates": cands, "top": top}


def run(model_dir, text, target=None, candidates=("his", "her"), top_k=5, attention_out=None):
    import numpy as np
    import torch

    folder = os.path.abspath(model_dir)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        fail(f"{folder} has no config.json; pass a local checkpoint folder")
    torch.set_grad_enabled(False)
    t0 = time.time()
    tok = load_tokenizer(folder)
    enc = encode(tok, text)
    ids = enc["input_ids"][0].tolist()
    tokens = tok.convert_ids_to_tokens(ids)
    n = len(ids)
    log(f"{n} tokens: {tokens}")

    model, has_head = load_model(folder)
    cfg = model.config
    if n > cfg.max_position_embeddings:
        fail(f"the text is {n} tokens long, more than the model's {cfg.max_position_embeddings} positions")

    if target is None:
        masks = [i for i, x in enumerate(ids) if x == tok.mask_token_id]
        if len(masks) != 1:
            fail(f"the text has {len(masks)} [MASK] tokens; give exactly one or pass --target")
        t = masks[0]
    else:
        t = int(target)
        if not 0 <= t < n:
            fail(f"--target {t} is out of range: the text has {n} tokens (0..{n - 1})")
    log(f"target {t} ({tokens[t]})")

    out = model(**enc, output_attentions=True)
    if out.attentions is None or len(out.attentions) == 0:
        fail("the model returned no attention probabilities (eager attention is needed)")
    att32 = torch.stack([a[0] for a in out.attentions])  # L×H×n×n, float32
    if att32.dtype != torch.float32:
        fail(f"attention is {att32.dtype}, expected float32")
    att = att32.double().numpy()
    L, H = att.shape[0], att.shape[1]
    assert att.shape == (L, H, n, n)
    log(f"{L} layers, {H} heads, max row-sum error {np.abs(att.sum(-1) - 1).max():.1e}")

    mean, aug = fuse_and_augment(att)
    raw = mean[:, t, :]
    roll = rollout_rows(aug, t)
    log(f"computing attention flow for {L}×{n} sinks with networkx (Edmonds-Karp)")
    flow = flow_rows(aug, t)

    pred = prediction(model, tok, enc, t, list(candidates), top_k) if has_head else None
    if pred is None:
        log("prediction unavailable: the checkpoint has no masked-LM head")

    report = {
        "model": os.path.basename(folder.rstrip("/")),
        "device": "cpu",
        "tokens": tokens,
        "target": {"index": t, "token": tokens[t]},
        "prediction": pred,
        "layers": L,
        "heads": H,
        "relevance": {
            "raw": raw.tolist(),
            "rollout": roll.tolist(),
            "flow": flow.tolist(),
        },
    }
    if attention_out:
        with open(attention_out, "w") as f:
            json.dump({"model": report["model"], "tokens": tokens, "target": t,
                       "attention": att32.tolist()}, f)
            f.write("\n")
    log(f"done in {time.time() - t0:.1f} s")
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="local checkpoint folder")
    ap.add_argument("--text", required=True)
    ap.add_argument("--target", type=int, default=None, help="position to explain (default: the [MASK])")
    ap.add_argument("--candidates", default="his,her", help="comma-separated words (default his,her)")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the JSON here (default: stdout)")
    ap.add_argument("--attention-out", default=None,
                    help="also write the float32 attention probabilities (L×H×n×n) to this JSON file")
    args = ap.parse_args()
    cands = [c.strip() for c in args.candidates.split(",") if c.strip()]
    try:
        report = run(args.model, args.text, args.target, cands, args.top_k, args.attention_out)
    except ReferenceError as e:
        print(f"reference: error: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    text = json.dumps(report, indent=1) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        log(f"wrote {args.out}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
