#!/usr/bin/env python3
"""Independent PyTorch/captum reference for bert-explain's importance scores of the tokens a
causal language model generates. Never calls or reads the Rust code.

For each tiny decoder in models/ (config.json architectures *ForCausalLM) and prompt:

  prompt       tokenized by the checkpoint's tokenizer as transformers does by default
               (AutoTokenizer, add_special_tokens left at its default: tiny-llama adds a BOS);
               checked against tokenizer.json alone (causal_llm_reference.py's way)
  generation   greedy, G = 3 tokens, by transformers' generate() with its KV cache (float32),
               as bert-explain generates; checked, where one exists, against the generate()
               fixture of the same case (tests/fixtures/causal/llm/, author.json). Each y_t
               is then explained over ids_t = prompt ids + the t tokens generated before it,
               without a cache (the argmax there too, except tiny-phi3 from step 1: its
               long-context rotary factors reach the cached keys only without a cache)
  explained    p_t = softmax(logits at the last position of ids_t)[y_t], n = len(ids_t)
  e            the input embeddings model.get_input_embeddings()(ids_t) [n, d] (Gemma's
               already × √hidden, as its scaled word embedding returns them), fed as
               inputs_embeds; g = ∂p_t/∂e by autograd

  gradient_norm[j]                   ‖g_j‖₂
  gradient_x_input[j]                Σ_d g_jd e_jd                      (signed)
  gradient_sum_abs[j]                |Σ_d g_jd|
  gradient_x_input_abs[j]            |Σ_d g_jd e_jd|
  embedding_gradient_sum_abs[j]      = gradient_sum_abs     (a causal model's embedding block
  embedding_gradient_x_input_abs[j]  = gradient_x_input_abs  is its word embeddings)
  blank_out[j]                       p_t − p_t(ids_t with token j replaced by the blank), for
                                     every j < n (prompt and earlier generated tokens alike)
  blank_out_abs[j]                   |blank_out[j]|
  integrated_gradients[j]            captum's IntegratedGradients of p_t on inputs_embeds,
                                     baseline = the blank's embedding at every position,
                                     method "gausslegendre", n_steps 50, summed over d
  integrated_gradients_check         {steps: 50, sum: Σ_j IG_j, difference: p_t − p_t(baseline),
                                      delta: sum − difference}

  blank        the vocabulary's unknown token ("<unk>" or "[UNK]") if it has one, else the
               end-of-text token (config.json's eos_token_id, the first of a list)

Arithmetic: float64 throughout. model.double() alone is not enough: transformers computes
RMSNorm, the eager attention softmax (Llama, Qwen, Mistral, Gemma, Phi-3) and the rotary
tables in float32 even in a float64 model. So the scores come from causal_methods_reference.py's
model_f64 (a float64 copy with float64 RMSNorms, a float64 eager softmax and float64 cos/sin
from the model's inv_freq, sliding windows as transformers masks them), and for Gemma the
embedding scale is set to the float64 √hidden (transformers keeps it as a float32 buffer).

Self-checks (each asserted; the largest discrepancies are printed to stderr):
  - finite differences (five-point central, h = 2.5e-5, float64) against autograd for every
    token j, to 1e-7 of the largest: the derivative along e_j (= gradient_x_input), along the
    all-ones vector (= Σ_d g_jd) and along g_j/‖g_j‖ (= gradient_norm); the error falls as h⁴;
  - integrated gradients by a Gauss–Legendre rule written here (numpy's leggauss, 50 nodes
    mapped to [0, 1]) against captum's. captum 0.9 rounds the rule's weights to float32 (its
    alphas stay float64), so its float64 attributions are off the exact rule by ~1e-8
    relative: the rule here with float32-rounded weights must equal captum's to rounding, and
    the exact rule's distance from captum's (and its own completeness delta) is printed. The
    fixtures hold captum's values;
  - the same scores from model.double() alone and from the float32 model (eager attention),
    against the float64 ones: the float32 differences are reported, not written.

Fixtures: tests/fixtures/causal/importance/<short>-<word>.json, 1-space indent:
  {name, model, prompt, prompt_ids, generated_ids, blank_token, blank_id, ig_steps,
   importance: [one Importance per generated token], reference: {torch, transformers, captum}}

Notes. tiny-gpt2: p is unchanged when one token's embedding moves along the all-ones vector
(every path from it starts with a LayerNorm, and the residual stream carries the shift only
into LayerNorms), so Σ_d g_jd is zero by construction and its two *_sum_abs scores are float64
rounding (~1e-16); they are written as computed. Integrated gradients' 50-point rule is far
from converged on several of these tiny, sharp models (|delta| up to a third of the
difference); on the four worst steps the exact-weight rule with 800 points brings delta to
4e-6 (phi3-author t=1) and ≤ 5e-11 (the others), so it is the quadrature, not the gradients.

One torch thread (tiny models: faster, and sums always in one order). ~20 s on 2 cores.

Usage (from the repo root; writes every fixture):
  .venv-reference/bin/python scripts/reference/causal_importance.py [--only NAME ...]
"""

import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import causal_methods_reference as cmr  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(REPO, "models")
OUT = os.path.join(REPO, "tests", "fixtures", "causal", "importance")
GENERATE = 3
STEPS = 50
AUTHOR = "The author talked to Sara about"
RIVER = "The river runs through the valley and the town"
# (fixture name, model folder, prompt)
CASES = [
    ("gpt2-author", "tiny-gpt2", AUTHOR),
    ("llama-author", "tiny-llama", AUTHOR),
    ("qwen2-author", "tiny-qwen2", AUTHOR),
    ("qwen2-window-author", "tiny-qwen2-window", AUTHOR),
    ("qwen2-window-river", "tiny-qwen2-window", RIVER),
    ("qwen3-author", "tiny-qwen3", AUTHOR),
    ("mistral-author", "tiny-mistral", AUTHOR),
    ("gemma-author", "tiny-gemma", AUTHOR),
    ("gemma2-author", "tiny-gemma2", AUTHOR),
    ("gemma3-author", "tiny-gemma3", AUTHOR),
    ("gemma3-river", "tiny-gemma3", RIVER),
    ("phi3-author", "tiny-phi3", AUTHOR),
]
# float32 generate() fixtures of the same prompt: their first tokens must be ours.
GENERATED_ELSEWHERE = {
    ("tiny-gpt2", AUTHOR): "tests/fixtures/causal/author.json",
    ("tiny-llama", AUTHOR): "tests/fixtures/causal/llm/llama-author.json",
    ("tiny-qwen2", AUTHOR): "tests/fixtures/causal/llm/qwen2-author.json",
    ("tiny-qwen2-window", RIVER): "tests/fixtures/causal/llm/qwen2-window-river.json",
    ("tiny-mistral", AUTHOR): "tests/fixtures/causal/llm/mistral-author.json",
    ("tiny-qwen3", AUTHOR): "tests/fixtures/causal/llm/qwen3-author.json",
    ("tiny-gemma2", AUTHOR): "tests/fixtures/causal/llm/gemma2-author.json",
    ("tiny-gemma3", AUTHOR): "tests/fixtures/causal/llm/gemma3-author.json",
    ("tiny-gemma3", RIVER): "tests/fixtures/causal/llm/gemma3-river.json",
}
SCORES = ("gradient_norm", "gradient_x_input", "blank_out", "gradient_sum_abs",
          "gradient_x_input_abs", "blank_out_abs", "integrated_gradients",
          "embedding_gradient_sum_abs", "embedding_gradient_x_input_abs")


def log(msg):
    print(f"causal_importance: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Loading


def load(folder):
    """The tokenizer as transformers picks it, and the float32 model with eager attention."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    return tok, model


def prompt_ids(tok, folder, prompt):
    from transformers import PreTrainedTokenizerFast
    ids = tok(prompt)["input_ids"]
    alone = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    assert alone(prompt)["input_ids"] == ids, ("tokenizer.json alone disagrees", ids)
    return ids


def blank(tok, folder):
    """(token, id): the vocabulary's unknown token if it has one, else config.json's EOS."""
    vocab = tok.get_vocab()
    for unk in ("<unk>", "[UNK]"):
        if unk in vocab:
            return unk, vocab[unk]
    with open(os.path.join(folder, "config.json")) as f:
        eos = json.load(f)["eos_token_id"]
    eos = eos[0] if isinstance(eos, list) else eos
    return tok.convert_ids_to_tokens(eos), eos


def eos_ids(model):
    eos = model.config.eos_token_id
    return set(eos if isinstance(eos, list) else [eos])


def float64_model(model, n):
    """cmr.model_f64 (float64 norms, softmax and rotary tables for n positions), with Gemma's
    embedding scale as the float64 √hidden rather than transformers' float32 buffer."""
    m64 = cmr.model_f64(model, n)
    emb = m64.get_input_embeddings()
    if hasattr(emb, "scalar_embed_scale"):
        emb.embed_scale = torch.tensor(emb.scalar_embed_scale, dtype=torch.float64)
    return m64


# --------------------------------------------------------------------------------------------
# Scores


class Step:
    """One generated token's prediction: ids (the n tokens fed), the explained id y, a model
    (any dtype) whose inputs_embeds → last-position softmax[y] is `prob`."""

    def __init__(self, model, ids, y):
        self.model, self.ids, self.y = model, ids, y
        self.embeddings = model.get_input_embeddings()

    def embed(self, ids):
        with torch.no_grad():
            return self.embeddings(torch.tensor([ids])).detach()

    def prob(self, batch):
        """[b, n, d] embeddings → p(y) at the last position, [b]."""
        logits = self.model(inputs_embeds=batch).logits[:, -1]
        return torch.softmax(logits, dim=-1)[:, self.y]


def scores(step, blank_id):
    """Every score of one step, as float64 numpy arrays and floats."""
    e = step.embed(step.ids)
    x = e.clone().requires_grad_(True)
    with torch.enable_grad():
        p = step.prob(x)[0]
        (g,) = torch.autograd.grad(p, x)
    g, e0 = g[0], e[0]
    along_e = (g * e0).sum(-1)
    along_ones = g.sum(-1)
    drops = []
    with torch.no_grad():
        for j in range(len(step.ids)):
            blanked = list(step.ids)
            blanked[j] = blank_id
            drops.append(float(p) - float(step.prob(step.embed(blanked))[0]))
    baseline = step.embed([blank_id] * len(step.ids))
    ig, check = integrated_gradients(step, e, baseline)
    f = lambda t: t.detach().double().numpy()
    out = {
        "probability": float(p),
        "gradient_norm": f(g.norm(dim=-1)),
        "gradient_x_input": f(along_e),
        "blank_out": np.array(drops),
        "gradient_sum_abs": np.abs(f(along_ones)),
        "gradient_x_input_abs": np.abs(f(along_e)),
        "blank_out_abs": np.abs(np.array(drops)),
        "integrated_gradients": ig,
        "integrated_gradients_check": check,
    }
    out["embedding_gradient_sum_abs"] = out["gradient_sum_abs"].copy()
    out["embedding_gradient_x_input_abs"] = out["gradient_x_input_abs"].copy()
    return out, g, e, baseline


def integrated_gradients(step, e, baseline):
    from captum.attr import IntegratedGradients

    ig = IntegratedGradients(step.prob)
    with torch.enable_grad():
        attributions, delta = ig.attribute(e, baselines=baseline, method="gausslegendre",
                                           n_steps=STEPS, internal_batch_size=STEPS,
                                           return_convergence_delta=True)
    per_token = attributions.sum(-1)[0].detach().double().numpy()
    with torch.no_grad():
        difference = float(step.prob(e)[0]) - float(step.prob(baseline)[0])
    total = float(per_token.sum())
    # captum's delta is its own sum − (f(input) − f(baseline)); ours is the same quantity.
    tol = 1e-12 + 1e-9 * abs(difference) if e.dtype == torch.float64 else 1e-5
    assert abs(float(delta[0]) - (total - difference)) <= tol, (float(delta[0]), total - difference)
    return per_token, {"steps": STEPS, "sum": total, "difference": difference,
                       "delta": total - difference}


# --------------------------------------------------------------------------------------------
# Checks (float64 only)


def check_finite_differences(step, g, e, h=2.5e-5):
    """Five-point central differences (error O(h⁴)) of p along e_j, 1 and g_j/‖g_j‖ for every
    j, against autograd. Returns the largest discrepancy relative to the largest derivative of
    its kind."""
    worst = 0.0
    n, d = e.shape[1], e.shape[2]
    exact = {"e": (g * e[0]).sum(-1), "ones": g.sum(-1), "unit": g.norm(dim=-1)}
    offsets = (2.0, 1.0, -1.0, -2.0)
    batch, kinds = [], []
    for j in range(n):
        # (a token with no path to the last position has g_j = 0: its unit direction is any)
        unit = g[j] / g[j].norm() if g[j].norm() > 0 else torch.ones(d, dtype=e.dtype) / d ** 0.5
        for kind, v in (("e", e[0, j]), ("ones", torch.ones(d, dtype=e.dtype)), ("unit", unit)):
            for k in offsets:
                moved = e.clone()
                moved[0, j] += k * h * v
                batch.append(moved)
            kinds.append((kind, j))
    with torch.no_grad():
        p = step.prob(torch.cat(batch)).numpy().reshape(-1, len(offsets))
    fd = {k: np.zeros(n) for k in exact}
    for i, (kind, j) in enumerate(kinds):
        p2, p1, m1, m2 = p[i]
        fd[kind][j] = (8.0 * (p1 - m1) - (p2 - m2)) / (12.0 * h)
    for kind, v in exact.items():
        v = v.numpy()
        scale = max(np.abs(v).max(), np.abs(fd[kind]).max(), 1e-300)
        err = np.abs(v - fd[kind]).max()
        # an exact zero direction (tiny-gpt2's all-ones one) leaves rounding on both sides
        rel = err / scale if scale > 1e-9 else err
        assert rel < 1e-7, ("finite differences disagree", kind, rel, v, fd[kind])
        worst = max(worst, rel)
    return worst


def check_ig_by_hand(step, e, baseline, captum_ig, difference):
    """Σ_k w_k ∇p(b + α_k (e − b)) · (e − b) by numpy's 50-node Gauss–Legendre rule on [0, 1].
    captum 0.9 casts its step sizes (the weights w_k) to float32 (`.float()` in
    IntegratedGradients._attribute) while its alphas stay float64: with the weights so rounded
    the sum here must be captum's to rounding. Returns (that error, the largest difference of
    captum's from the exact-weight rule, the exact-weight rule's completeness delta)."""
    nodes, weights = np.polynomial.legendre.leggauss(STEPS)
    alphas, weights = 0.5 * (1.0 + nodes), 0.5 * weights
    path = torch.cat([baseline + float(a) * (e - baseline) for a in alphas]).requires_grad_(True)
    with torch.enable_grad():
        (grads,) = torch.autograd.grad(step.prob(path).sum(), path)

    def rule(w):
        w = torch.tensor(w, dtype=e.dtype)[:, None, None]
        return ((grads * w).sum(0) * (e - baseline)[0]).sum(-1).numpy()

    as_captum = rule(weights.astype(np.float32).astype(np.float64))
    exact = rule(weights)
    scale = np.abs(captum_ig).max()
    err = float(np.abs(as_captum - captum_ig).max())
    assert err <= 1e-15 + 1e-12 * scale, ("IG by hand disagrees with captum", err)
    off = float(np.abs(exact - captum_ig).max())
    assert off <= 1e-6 * scale, ("captum's float32 weights moved IG too far", off)
    return err, off, float(exact.sum()) - difference


def largest_difference(a, b):
    """Per score: (max |a − b|, that over max |b|)."""
    out = {}
    for k in SCORES:
        diff = float(np.abs(np.asarray(a[k]) - np.asarray(b[k])).max())
        scale = float(np.abs(np.asarray(b[k])).max())
        out[k] = (diff, diff / scale if scale else diff)
    out["probability"] = (abs(a["probability"] - b["probability"]),
                          abs(a["probability"] - b["probability"]) / b["probability"])
    return out


# --------------------------------------------------------------------------------------------
# One case


def explain(name, folder_name, prompt, summary):
    folder = os.path.join(MODELS, folder_name)
    tok, model = load(folder)
    ids = prompt_ids(tok, folder, prompt)
    blank_token, blank_id = blank(tok, folder)
    ends = eos_ids(model)
    plain64 = copy.deepcopy(model).double().eval()
    # What the model generates: transformers' greedy generate() with its KV cache (float32),
    # as bert-explain generates. Each token is then explained by a forward pass over all the
    # tokens fed at its step, without a cache. The two pick the same token except where the
    # cache changes the logits: Phi-3's long-context rotary factors apply to every position
    # once the text passes original_max_position_embeddings, while the cache keeps the keys
    # made before that with the short ones (tiny-phi3 from step 1 on).
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=GENERATE, do_sample=False,
                             use_cache=True, pad_token_id=min(ends) if ends else None)
    cached = out[0, len(ids):].tolist()
    generated, entries = [], []
    for t, y in enumerate(cached):
        fed = ids + generated
        m64 = float64_model(model, len(fed))
        with torch.no_grad():
            logits64 = m64(torch.tensor([fed])).logits[0, -1]
        assert logits64.dtype == torch.float64
        top2 = torch.topk(logits64, 2).values
        step = Step(m64, fed, y)
        s, g, e, baseline = scores(step, blank_id)
        # the forward pass through inputs_embeds is the one through input_ids
        p_ids = float(torch.softmax(logits64, -1)[y])
        assert abs(p_ids - s["probability"]) < 1e-14, (p_ids, s["probability"])
        fd = check_finite_differences(step, g, e)
        ig_err, ig_exact, exact_delta = check_ig_by_hand(
            step, e, baseline, s["integrated_gradients"], s["integrated_gradients_check"]["difference"])
        s32, *_ = scores(Step(model, fed, y), blank_id)
        sdbl, *_ = scores(Step(plain64, fed, y), blank_id)
        summary.append({
            "case": name, "t": t, "n": len(fed), "y": y, "p": s["probability"],
            "uncached_argmax": int(torch.argmax(logits64)) == y,
            "margin": float(top2[0] - top2[1]), "fd": fd, "ig_by_hand": ig_err,
            "ig_exact_weights": ig_exact, "exact_delta": exact_delta,
            "check": s["integrated_gradients_check"],
            "float32": largest_difference(s32, s), "double_only": largest_difference(sdbl, s),
        })
        entry = {"word": tok.decode([y]), "id": y, "probability": s["probability"],
                 "blank_token": blank_token}
        for k in SCORES:
            entry[k] = [float(v) for v in s[k]]
        entry["integrated_gradients_check"] = s["integrated_gradients_check"]
        entries.append(entry)
        generated.append(y)
        if y in ends:
            break
    elsewhere = GENERATED_ELSEWHERE.get((folder_name, prompt))
    if elsewhere:
        with open(os.path.join(REPO, elsewhere)) as f:
            other = json.load(f)
        assert other["prompt_ids"] == ids, ("prompt ids differ from", elsewhere)
        assert other["generated_ids"][:len(generated)] == generated, \
            ("generation differs from", elsewhere, other["generated_ids"], generated)
    log(f"{name}: {prompt!r} -> {[tok.decode([i]) for i in generated]}")
    import captum
    import transformers
    return {
        "name": name,
        "model": folder_name,
        "prompt": prompt,
        "prompt_ids": ids,
        "generated_ids": generated,
        "blank_token": blank_token,
        "blank_id": blank_id,
        "ig_steps": STEPS,
        "importance": entries,
        "reference": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "captum": captum.__version__},
    }


def report(summary):
    for r in summary:
        c = r["check"]
        f32 = max(r["float32"].items(), key=lambda kv: kv[1][1])
        dbl = max(r["double_only"].items(), key=lambda kv: kv[1][1])
        log(f"{r['case']} t={r['t']} n={r['n']} y={r['y']} p={r['p']:.6g} margin={r['margin']:.3g} "
            f"fd={r['fd']:.1e} ig-by-hand={r['ig_by_hand']:.1e} "
            f"exact-weights {r['ig_exact_weights']:.1e} (delta {r['exact_delta']:.1e}) "
            f"IG sum={c['sum']:.6g} diff={c['difference']:.6g} delta={c['delta']:.2e} | "
            f"float32 worst {f32[0]} {f32[1][0]:.1e} (rel {f32[1][1]:.1e}) | "
            f"double() alone worst {dbl[0]} {dbl[1][0]:.1e} (rel {dbl[1][1]:.1e})")
    for kind in ("float32", "double_only"):
        per_score = {}
        for r in summary:
            for k, (a, rel) in r[kind].items():
                old = per_score.get(k, (0.0, 0.0))
                per_score[k] = (max(old[0], a), max(old[1], rel))
        log(f"{kind} vs float64, over every case (max abs, max relative to the score's max):")
        for k, (a, rel) in per_score.items():
            log(f"  {k:32s} {a:.2e}  {rel:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="a case name (repeatable)")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)  # tiny models: threads only cost time, and reorder sums
    cmr.register_f64_attention()
    os.makedirs(OUT, exist_ok=True)
    summary = []
    for name, folder, prompt in CASES:
        if args.only and name not in args.only:
            continue
        fixture = explain(name, folder, prompt, summary)
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            f.write(json.dumps(fixture, indent=1) + "\n")
    report(summary)


if __name__ == "__main__":
    main()
