#!/usr/bin/env python3
"""Independent reference for bert-explain's importance scores and --evaluate (issue 5).

For a local masked-LM checkpoint, a text and a target position t, with w the top predicted
word at t (or --word), computes in float32 with PyTorch:

  gradient_norm[j]     ‖∂p(w)/∂e_j‖₂, e_j the word embedding of input token j
                       (the inputs_embeds that BertEmbeddings adds positions to)
  gradient_x_input[j]  Σ_d (∂p(w)/∂e_j)_d · (e_j)_d
  blank_out[j]         p(w) − p(w | token j replaced by [UNK], or [MASK] with --blank mask)

and the paper's scores as its code (samiraabnar/attention_flow, run_bert_sv.py) takes them:

  gradient_sum_abs[j]      |Σ_d (∂p(w)/∂e_j)_d|
  gradient_x_input_abs[j]  |Σ_d (∂p(w)/∂e_j)_d · (e_j)_d|
  blank_out_abs[j]         |p(w) − p(w | token j blanked)|

and its "grad" and "inputgrad" where its code takes them, at the embedding block's output h_j
(`model.distilbert.embeddings(ids)` there: word, position and token-type embeddings after their
LayerNorm, and for ALBERT and ELECTRA the projection to the hidden size; here the input of the
first layer, caught with a forward pre-hook):

  embedding_gradient_sum_abs[j]      |Σ_d (∂p(w)/∂h_j)_d|
  embedding_gradient_x_input_abs[j]  |Σ_d (∂p(w)/∂h_j)_d · (h_j)_d|

and integrated gradients (captum's IntegratedGradients, its default Gauss–Legendre rule,
STEPS points) from the baseline that puts the blank token's word embedding at every position:

  integrated_gradients[j]  Σ_d (IG attribution of e_j)_d; they sum to p(w) − p(w | baseline)

and, given the reference report for the same case (reference.py), the Spearman correlation
(scipy.stats.spearmanr) of each method's relevance per layer with each score (None where a
side is constant), over every token or, with `leave_out`, over the others. Never uses any
Rust code.

Usage: importance.py --model DIR --text TEXT [--target I] [--word W] [--blank unk|mask]
                     [--report REPORT.json] [--out FILE]
"""

import argparse
import json
import sys

import reference as ref


def importance(model_dir, text, target=None, word=None, blank="unk"):
    import torch

    tok = ref.load_tokenizer(model_dir)
    enc = ref.encode(tok, text)
    ids = enc["input_ids"]
    n = ids.shape[1]
    model, has_head = ref.load_model(model_dir)
    if not has_head:
        ref.fail(f"{model_dir} has no masked-LM head; importance scores need one")
    if target is None:
        masks = [i for i, x in enumerate(ids[0].tolist()) if x == tok.mask_token_id]
        if len(masks) != 1:
            ref.fail("give exactly one [MASK] or --target")
        target = masks[0]

    embeddings = model.get_input_embeddings()
    words = embeddings(ids).detach().clone().requires_grad_(True)
    extra = {"token_type_ids": enc["token_type_ids"], "attention_mask": enc["attention_mask"]}
    with FirstLayerInput(model) as block:
        probs = torch.softmax(model(inputs_embeds=words, **extra).logits[0, target], dim=-1)
    if word is None:
        wid = int(torch.argmax(probs))
    else:
        pieces = tok.tokenize(word)
        if len(pieces) != 1:
            ref.fail(f"{word!r} is not one wordpiece: {pieces}")
        wid = int(tok.convert_tokens_to_ids(pieces[0]))
    p = probs[wid]
    p.backward()
    grad = words.grad[0]
    gradient_norm = grad.norm(dim=-1)

    blank_id = tok.unk_token_id if blank == "unk" else tok.mask_token_id

    def probability(batch):
        wide = {k: v.expand(batch.shape[0], -1) for k, v in extra.items()}
        return torch.softmax(model(inputs_embeds=batch, **wide).logits[:, target], dim=-1)[:, wid]

    gradient_x_input, sums = directional(probability, words.detach(), grad)

    baseline = embeddings(torch.full_like(ids, blank_id)).detach()
    ig, completeness = integrated_gradients(probability, words.detach(), baseline)
    drops = []
    with torch.no_grad():
        for j in range(n):
            blanked = ids.clone()
            blanked[0, j] = blank_id
            q = torch.softmax(model(input_ids=blanked, **extra).logits[0, target], dim=-1)[wid]
            drops.append(float(p.detach()) - float(q))
    return {
        "word": tok.convert_ids_to_tokens(wid),
        "id": wid,
        "probability": float(p.detach()),
        "blank_token": tok.convert_ids_to_tokens(blank_id),
        "gradient_norm": [float(v) for v in gradient_norm],
        "gradient_x_input": [float(v) for v in gradient_x_input],
        "blank_out": drops,
        **paper_scores(gradient_x_input, sums, drops),
        "integrated_gradients": ig,
        "integrated_gradients_check": completeness,
        **block.scores(),
    }


def first_layer(model):
    """The model's first transformer layer (ALBERT's shared layer, first called)."""
    base = model.base_model
    if hasattr(base, "layers"):  # a decoder (Llama, Qwen, Gemma, Phi-3) read as a classifier
        return base.layers[0]
    if hasattr(base, "transformer"):  # DistilBERT
        return base.transformer.layer[0]
    if hasattr(base.encoder, "albert_layer_groups"):
        return base.encoder.albert_layer_groups[0].albert_layers[0]
    return base.encoder.layer[0]


class FirstLayerInput:
    """Catches the first layer's input h (its first call) during a forward pass and keeps its
    gradient; `.scores()` after the backward pass gives the paper's scores there."""

    def __init__(self, model):
        self.layer, self.hidden = first_layer(model), None

    def __enter__(self):
        def hook(module, args, kwargs):
            if self.hidden is None:
                hidden = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
                hidden.retain_grad()
                self.hidden = hidden
        self.handle = self.layer.register_forward_pre_hook(hook, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.handle.remove()

    def scores(self):
        h, g = self.hidden[0].detach(), self.hidden.grad[0]
        return {
            "embedding_gradient_sum_abs": [abs(float(v)) for v in g.sum(dim=-1)],
            "embedding_gradient_x_input_abs": [abs(float(v)) for v in (g * h).sum(dim=-1)],
        }


SCORES = ("gradient_norm", "gradient_x_input", "blank_out", "gradient_sum_abs", "gradient_x_input_abs",
          "blank_out_abs", "integrated_gradients", "embedding_gradient_sum_abs",
          "embedding_gradient_x_input_abs")
STEPS = 50


def integrated_gradients(probability, words, baseline, steps=STEPS):
    """captum's IntegratedGradients of `probability` (a batch of word embeddings [b, n, d] →
    the explained probability [b]) at `words` [1, n, d] from `baseline` [1, n, d]: per token,
    the attributions summed over d, and the completeness check: their sum, the difference
    p(words) − p(baseline) it should equal, and captum's convergence delta."""
    import torch
    from captum.attr import IntegratedGradients

    ig = IntegratedGradients(probability)
    with torch.enable_grad():
        attributions, delta = ig.attribute(words, baselines=baseline, n_steps=steps,
                                           internal_batch_size=steps, return_convergence_delta=True)
    per_token = attributions.sum(dim=-1)[0]
    with torch.no_grad():
        difference = float(probability(words)[0] - probability(baseline)[0])
    return [float(v) for v in per_token], {
        "steps": steps,
        "sum": float(per_token.sum()),
        "difference": difference,
        "delta": float(delta[0]),
    }


def directional(probability, words, grad):
    """Σ_d g_jd·e_jd and Σ_d g_jd per token (g = ∂p/∂e): p's derivatives along each token's
    word embedding and along the all-ones direction. Where the model answers alike after every
    token moves that way (p(1.5·e) = p(e) within 1e-3 of p: a norm reads the word embeddings alone, ModernBERT
    and DeBERTa-v3; p(e + 0.5) = p(e): a LayerNorm's mean comes first, every post-norm
    encoder), the derivative is zero in exact arithmetic and float32 leaves only rounding of
    it: written as 0, as bert-explain writes it, after checking that it is rounding (under
    1e-3 of the largest Σ_d |g_jd·e_jd|, or Σ_d |g_jd|). `probability` maps a batch of word
    embeddings [b, n, d] to p [b]; `words` is [1, n, d], `grad` [n, d]."""
    import torch

    e = words[0].detach()
    with torch.no_grad():
        p, scaled, shifted = (float(v) for v in probability(torch.cat([words, 1.5 * words, words + 0.5])))
    sums = []
    for moved, terms in ((scaled, grad * e), (shifted, grad)):
        total = terms.sum(dim=-1)
        if abs(moved - p) <= 1e-3 * abs(p):
            if total.abs().max() > 1e-3 * terms.abs().sum(dim=-1).max():
                ref.fail(f"p is unmoved ({moved} vs {p}) but its derivative that way is {total.tolist()}")
            total = torch.zeros_like(total)
        sums.append(total)
    return sums


def paper_scores(along, sums, drops):
    """The paper's code's scores taken at the word embeddings, from `directional`'s sums and
    the signed blank-out drops."""
    return {
        "gradient_sum_abs": [abs(float(v)) for v in sums],
        "gradient_x_input_abs": [abs(float(v)) for v in along],
        "blank_out_abs": [abs(d) for d in drops],
    }


def evaluation(report, scores, leave_out=None):
    """Spearman correlation per score, method and layer, as bert-explain's --evaluate; over
    the positions not in `leave_out` (a set), or every one."""
    import numpy as np
    from scipy.stats import spearmanr

    keep = [j for j in range(len(scores["gradient_norm"])) if j not in (leave_out or ())]
    out = {}
    for score in SCORES:
        if score not in scores:
            continue
        b = np.array(scores[score])[keep]
        per_method = {}
        for method in ("raw", "rollout", "flow"):
            rows = []
            for row in report["relevance"][method]:
                a = np.array(row)[keep]
                if np.all(a == a[0]) or np.all(b == b[0]):
                    rows.append(None)
                else:
                    rows.append(float(spearmanr(a, b).statistic))
            per_method[method] = rows
        out[score] = per_method
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--target", type=int, default=None)
    ap.add_argument("--word", default=None)
    ap.add_argument("--blank", choices=["unk", "mask"], default="unk")
    ap.add_argument("--report", default=None, help="the reference report of the same case, for the correlations")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        scores = importance(args.model, args.text, args.target, args.word, args.blank)
    except ref.ReferenceError as e:
        print(f"importance: error: {e}", file=sys.stderr)
        sys.exit(1)
    result = {"importance": scores}
    if args.report:
        with open(args.report) as f:
            result["evaluation"] = evaluation(json.load(f), scores)
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
