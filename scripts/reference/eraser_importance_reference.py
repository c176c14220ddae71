#!/usr/bin/env python3
"""Independent reference for `evaluation.eraser_importance`: the ERASER AOPC (SPEC §8) of each
importance score, the tokens ranked by the score's value as a relevance map is ranked. Never
calls or reads the Rust code, nor any output of it.

For each case the scores come from the references that already compute them independently:

  masked-lm      importance.py's importance() (torch float32: every gradient score, blank-out,
                 captum integrated gradients), plus attnlrp / cp_lrp from the LXT 2.1 fixture
                 tests/fixtures/lrp/<case>.json of the same model, text, position and explained
                 word (asserted), read as they are (float64)
  classifier     family_reference.py's importance() (importance.py's scores for the label's
                 probability at the first token, blank-out p(y) − p(y | token j → [UNK]) by
                 torch), plus attnlrp / cp_lrp from tests/fixtures/lrp[-real]/<case>.json
  causal-lm      causal_importance.py's functions: transformers' greedy generate() (float32,
                 KV cache) gives the tokens; each generated token y_t is explained over the
                 tokens fed at its step by causal_importance.scores() on its float64 model
                 (the values tests/fixtures/causal/importance/ holds, asserted equal), plus,
                 for the first generated token only, attnlrp / cp_lrp from the LXT fixture of
                 the same prompt (LXT explains the next token after the prompt)

ERASER of a score v (n values): the removable tokens ranked by round(v_j, 10), highest first
(signed scores as they are), ties by the lower position; m = their count, k = (p·m + 99) // 100
for p in 1, 5, 10, 20, 50; comprehensiveness_k = p(y|x) − p(y | the top k → blank),
sufficiency_k = p(y|x) − p(y | the other m − k → blank); AOPC = the mean over the five k.
p from the float32 model's softmax (p(y|x) as the importance reference gives it).

  removable  masked LM / classifier: every token but the special ones ([CLS] [SEP] [MASK] ...,
             methods_reference.SPECIAL) and the explained position. Causal: the prompt's tokens
             (all of them, a BOS included; for the first generated token the explained position,
             the prompt's last, too); the tokens generated before y_t are never blanked.
  blank      masked LM / classifier: [UNK] (--blank mask: [MASK]). Causal: the vocabulary's
             [UNK]/<unk>, else the end-of-text token (causal_importance.blank()).

Masked LM and classifier cases with the [UNK] blank take their AOPC from methods_reference.py's
eraser() (the function that matches bert-explain's maps' ERASER); aopc() here, used for
--blank mask and the causal cases, is asserted to give the same numbers on every case where
both apply (1e-9).

Robustness. ERASER depends on the scores only through the set of the top k at each cut, so
for each score and each distinct cut k (0 < k < m) the fixture records the k-th and (k+1)-th
ranked values and relative_gap = (k-th − (k+1)-th) / max_j |v_j| over the removable tokens
(the scale of a float32 implementation's rounding). A score is left out of
`eraser_importance` (and listed under `left_out` with the reason) when a cut's relative gap is
below 1e-4; for LRP also when the gap is below 10 × the LXT fixture's float32_gap (its float32
run's largest deviation); for causal scores also when the float32 model's scores (same
functions, float32) pick another set at some cut. Exception: a cut between two values that
are both zero (|v| < 1e-12: a direction along which p cannot move, written as 0 by the
references and by bert-explain) is an exact tie, ranked by position, and kept.

Fixtures: tests/fixtures/eraser-importance/<case>.json and cases.json (every case: name, kind,
model, args, real). `args` are bert-explain's arguments after the binary that reproduce the
case (`--json --evaluate` and the flags, the text last); `real` cases need a model under
models/downloaded (git-ignored). Per score, `eraser_importance` holds comprehensiveness,
sufficiency, k, comprehensiveness_k, sufficiency_k, the ranking and the cuts. Causal fixtures
hold one entry per generated token under `steps`.

Usage (from the repository root; one torch thread):
  .venv-reference/bin/python scripts/reference/eraser_importance_reference.py [--only NAME ...]
                                                  [--skip-real] [--check BINARY]
--check runs the binary on every fixture and prints the largest |difference| per case (it
compares; it never feeds anything back into the fixtures).
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import causal_importance as ci  # noqa: E402
import causal_methods_reference as cmr  # noqa: E402
import family_reference as fr  # noqa: E402
import importance as importance_ref  # noqa: E402
import methods_reference as mr  # noqa: E402
import reference as ref  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(REPO, "models")
FIXTURES = os.path.join(REPO, "tests", "fixtures")
OUT = os.path.join(FIXTURES, "eraser-importance")
PERCENTS = (1, 5, 10, 20, 50)
DECIMALS = 10
MIN_RELATIVE_GAP = 1e-4
LRP_GAP_FACTOR = 10.0
ZERO = 1e-12
SCORES = ("gradient_norm", "gradient_x_input", "gradient_sum_abs", "gradient_x_input_abs",
          "embedding_gradient_sum_abs", "embedding_gradient_x_input_abs", "blank_out",
          "blank_out_abs", "integrated_gradients")
LRP = ("attnlrp", "cp_lrp")

AUTHOR = "The author talked to Sara about [MASK] book"
# kind, name, model (under models/), text, options; lrp: the LXT fixture (under tests/fixtures)
CASES = [
    {"kind": "masked-lm", "name": "legacy-author", "model": "tiny-bert-legacy", "text": AUTHOR,
     "lrp": "lrp/legacy-author.json"},
    {"kind": "masked-lm", "name": "legacy-keys", "model": "tiny-bert-legacy",
     "text": "The keys to the cabinet [MASK] on the table", "lrp": "lrp/legacy-keys.json"},
    {"kind": "masked-lm", "name": "legacy-flowers", "model": "tiny-bert-legacy",
     "text": "John tried to convince Mary of his love and brought flowers for [MASK]",
     "lrp": "lrp/legacy-flowers.json"},
    {"kind": "masked-lm", "name": "modern-author", "model": "tiny-bert-modern", "text": AUTHOR,
     "lrp": "lrp/modern-author.json"},
    {"kind": "masked-lm", "name": "modern-his-target", "model": "tiny-bert-modern",
     "text": "He talked to her about his book", "target": 6, "lrp": "lrp/modern-his-target.json"},
    {"kind": "masked-lm", "name": "modern-flowers", "model": "tiny-bert-modern",
     "text": "John tried to convince Mary of his love and brought flowers for [MASK]",
     "lrp": "lrp/modern-flowers.json"},
    # the second word (p 0.25) and the [MASK] blank: no LXT fixture explains it
    {"kind": "masked-lm", "name": "modern-keys-those-mask", "model": "tiny-bert-modern",
     "text": "The keys to the cabinet [MASK] on the table", "word": "those", "blank": "mask"},
    {"kind": "classifier", "name": "cls-author", "model": "tiny-bert-cls",
     "text": "The author talked to Sara about his book", "lrp": "lrp/bert-cls-author.json"},
    {"kind": "classifier", "name": "cls-plot", "model": "tiny-bert-cls",
     "text": "A dull, lifeless plot.", "lrp": "lrp/bert-cls-plot.json"},
    {"kind": "classifier", "name": "cls-film", "model": "tiny-bert-cls",
     "text": "The film was a delight from start to finish.", "lrp": "lrp/bert-cls-film.json"},
    {"kind": "classifier", "name": "minilm-sentiment-bad", "model": "downloaded/minilm-fine-foods",
     "text": "This tastes so bad, I'm considering throwing it away.",
     "lrp": "lrp-real/minilm-sentiment-bad.json", "real": True},
    {"kind": "classifier", "name": "minilm-sentiment-gummies", "model": "downloaded/minilm-fine-foods",
     "text": "These are the best tasting gummy fruits I have ever eaten. Can't stop eating them "
             "and the flavors are great.",
     "lrp": "lrp-real/minilm-sentiment-gummies.json", "real": True},
    {"kind": "causal-lm", "name": "gpt2-author", "model": "tiny-gpt2",
     "text": "The author talked to Sara about", "lrp": "lrp/gpt2-author.json",
     "importance_fixture": "causal/importance/gpt2-author.json"},
    {"kind": "causal-lm", "name": "llama-author", "model": "tiny-llama",
     "text": "The author talked to Sara about", "lrp": "lrp/llama-author.json",
     "importance_fixture": "causal/importance/llama-author.json"},
    {"kind": "causal-lm", "name": "qwen2-author", "model": "tiny-qwen2",
     "text": "The author talked to Sara about", "lrp": "lrp/qwen2-author.json",
     "importance_fixture": "causal/importance/qwen2-author.json"},
]
GENERATE = ci.GENERATE


def log(msg):
    print(f"eraser_importance: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    raise SystemExit(f"eraser_importance: error: {msg}")


# --------------------------------------------------------------------------------------------
# Ranking, cuts and AOPC


def cut_points(m):
    return [(p * m + 99) // 100 for p in PERCENTS]


def ranked(values, removable):
    """methods_reference.eraser's order: round(v, 10) highest first, ties by position."""
    return sorted(removable, key=lambda j: (-round(float(values[j]), DECIMALS), j))


def cuts(values, removable):
    """Per distinct cut k (0 < k < m): the k-th and (k+1)-th ranked values and their gap,
    absolute and relative to the largest |v| over the removable tokens."""
    order = ranked(values, removable)
    m = len(order)
    scale = max(abs(float(values[j])) for j in removable)
    out = []
    for k in sorted(set(cut_points(m))):
        if not 0 < k < m:
            continue
        above, below = float(values[order[k - 1]]), float(values[order[k]])
        gap = above - below
        out.append({
            "k": k,
            "above": above,
            "below": below,
            "gap": gap,
            "relative_gap": gap / scale if scale > 0 else 0.0,
            "zero_tie": abs(above) < ZERO and abs(below) < ZERO,
        })
    return order, out


def verdict(name, cut_list, float32_gap=None, other_sets=None):
    """None if the ranking is robust, else the reason for leaving the score out."""
    for c in cut_list:
        if c["zero_tie"]:
            continue
        if c["relative_gap"] < MIN_RELATIVE_GAP:
            return (f"cut k={c['k']}: the {c['k']}-th and {c['k'] + 1}-th values {c['above']:.9g} and "
                    f"{c['below']:.9g} differ by {c['relative_gap']:.2e} of the largest |value| "
                    f"(< {MIN_RELATIVE_GAP:g}): a float32 implementation could pick another top {c['k']}")
        if float32_gap is not None and c["gap"] < LRP_GAP_FACTOR * float32_gap:
            return (f"cut k={c['k']}: the gap {c['gap']:.3g} between the {c['k']}-th and {c['k'] + 1}-th "
                    f"values is under {LRP_GAP_FACTOR:g} × the LXT fixture's float32_gap {float32_gap:.3g}")
    if other_sets is not None:
        for c in cut_list:
            k = c["k"]
            # (at an exact zero tie the float32 run's rounding noise is no guide: the
            # references and bert-explain write those values as 0)
            if not c["zero_tie"] and set(other_sets[0][:k]) != set(other_sets[1][:k]):
                return f"cut k={k}: the float32 model's {name} picks another top {k}"
    return None


def aopc(prob_of, ids, removable, values, blank_id, p):
    """ERASER AOPC of `values`: prob_of(LongTensor [b, n]) → p(y) [b], float32 model."""
    order = ranked(values, removable)
    ks = cut_points(len(order))
    variants = []
    for k in ks:
        comp, suff = list(ids), list(ids)
        for j in order[:k]:
            comp[j] = blank_id
        for j in order[k:]:
            suff[j] = blank_id
        variants += [comp, suff]
    with torch.no_grad():
        probs = prob_of(torch.tensor(variants))
    comp = [p - float(probs[2 * i]) for i in range(len(ks))]
    suff = [p - float(probs[2 * i + 1]) for i in range(len(ks))]
    return {"comprehensiveness": sum(comp) / len(ks), "sufficiency": sum(suff) / len(ks),
            "k": ks, "comprehensiveness_k": comp, "sufficiency_k": suff}


def same_aopc(a, b, what, tol=1e-9):
    for key in ("comprehensiveness", "sufficiency"):
        if abs(a[key] - b[key]) > tol:
            fail(f"{what}: aopc() and methods_reference.eraser() disagree on {key}: {a[key]} vs {b[key]}")
    if a["k"] != b["k"]:
        fail(f"{what}: k differs: {a['k']} vs {b['k']}")


# --------------------------------------------------------------------------------------------
# LRP from the LXT fixtures


def lrp_scores(case, ids, target, explained_id):
    """attnlrp / cp_lrp and their float32 gaps from the case's LXT fixture, after checking that
    it explains the same thing: model, text, ids, position, explained id."""
    path = case.get("lrp")
    if not path:
        return {}, {}, None
    with open(os.path.join(FIXTURES, path)) as f:
        fx = json.load(f)
    if fx["model"] != case["model"] or fx["text"] != case["text"]:
        fail(f"{path}: model/text {fx['model']!r}/{fx['text']!r} is not the case's")
    if fx["ids"] != list(ids) or fx["target"] != target or fx["class_id"] != explained_id:
        fail(f"{path}: ids/target/class {fx['ids']}/{fx['target']}/{fx['class_id']} differ from "
             f"{list(ids)}/{target}/{explained_id}")
    values = {name: [float(v) for v in fx[name]] for name in LRP}
    return values, {name: float(fx["float32_gap"][name]) for name in LRP}, path


# --------------------------------------------------------------------------------------------
# Scores and ERASER per score


def rank_and_erase(values, removable, erase, float32_gaps=None, other=None, sources=None):
    """For every score in `values`: its cuts and verdict, and its AOPC if robust."""
    kept, left_out, detail = {}, {}, {}
    for name, v in values.items():
        order, cut_list = cuts(v, removable)
        other_sets = None
        if other is not None and name in other:
            other_sets = (order, ranked(other[name], removable))
        why = verdict(name, cut_list, (float32_gaps or {}).get(name), other_sets)
        detail[name] = {"ranked": order, "cuts": cut_list,
                        "min_relative_gap": min((c["relative_gap"] for c in cut_list if not c["zero_tie"]),
                                                default=None),
                        "source": (sources or {}).get(name)}
        if why is None:
            kept[name] = {**erase(name, v), **detail[name]}
        else:
            left_out[name] = {"reason": why, **detail[name]}
    return kept, left_out


def case_header(case):
    """What every fixture starts with: the case as cases.json names it."""
    return {"name": case["name"], "kind": case["kind"], "model": case["model"],
            "real": bool(case.get("real")), "text": case["text"]}


def encoder_case(case):
    folder = os.path.join(MODELS, case["model"])
    blank = case.get("blank", "unk")
    if case["kind"] == "masked-lm":
        s = importance_ref.importance(folder, case["text"], case.get("target"), case.get("word"), blank)
        source = "importance.py importance() (torch float32, captum IG)"
    else:
        s = fr.importance(folder, case["text"], label=case.get("label"), blank=blank)
        source = "family_reference.py importance() (torch float32, captum IG)"
    ck = mr.Checkpoint(folder)
    enc = mr.encode(ck, case["text"])
    ids = enc["input_ids"][0].tolist()
    tokens = ck.tok.convert_ids_to_tokens(ids)
    if ck.task == "sequence-classification":
        t = 0
    elif case.get("target") is not None:
        t = case["target"]
    else:
        t = ids.index(ck.tok.mask_token_id)
    if len(s["gradient_norm"]) != len(ids):
        fail(f"{case['name']}: the importance reference saw {len(s['gradient_norm'])} tokens, not {len(ids)}")
    wid, p = s["id"], s["probability"]
    blank_token = {"unk": "[UNK]", "mask": "[MASK]"}[blank]
    blank_id = ck.tok.convert_tokens_to_ids(blank_token)
    if blank_token != s["blank_token"]:
        fail(f"{case['name']}: blank {s['blank_token']} is not {blank_token}")
    removable = [j for j, tk in enumerate(tokens) if tk not in mr.SPECIAL and j != t]
    values = {name: [float(x) for x in s[name]] for name in SCORES}
    sources = {name: source for name in SCORES}
    lrp, gaps, lrp_path = lrp_scores(case, ids, t, wid)
    values.update(lrp)
    sources.update({name: f"tests/fixtures/{lrp_path} (LXT 2.1, float64)" for name in lrp})

    extra = {k: v for k, v in enc.items() if k != "input_ids"}

    def prob_of(batch):
        wide = {k: v.expand(batch.shape[0], -1) for k, v in extra.items()}
        logits = ck.model(input_ids=batch, **wide).logits
        logits = logits[:, t] if ck.task == "masked-lm" else logits
        return torch.softmax(logits.float(), dim=-1)[:, wid]

    explained = {"id": wid, "probability": p}

    def erase(name, v):
        ours = aopc(prob_of, ids, removable, v, blank_id, p)
        if blank == "unk":
            theirs = mr.eraser(ck, enc, t, explained, tokens, v)
            same_aopc(ours, theirs, f"{case['name']} {name}")
            return theirs
        return ours

    kept, left_out = rank_and_erase(values, removable, erase, gaps, sources=sources)
    args = ["--json", "--evaluate", "--model", f"models/{case['model']}"]
    if case.get("target") is not None:
        args += ["--target", str(case["target"])]
    if case.get("word"):
        args += ["--importance-word", case["word"]]
    if ck.task == "sequence-classification":
        args += ["--label", s["word"]]
    if blank != "unk":
        args += ["--blank", blank]
    args.append(case["text"])
    return {
        **case_header(case),
        "args": args,
        "ids": ids,
        "tokens": tokens,
        "target": t,
        "explained": {"id": wid, "word": s["word"], "probability": p},
        "blank_token": blank_token,
        "blank_id": blank_id,
        "removable": removable,
        "importance": values,
        "integrated_gradients_check": s["integrated_gradients_check"],
        "lrp_float32_gap": gaps or None,
        "eraser_importance": {k: kept[k] for k in values if k in kept},
        "left_out": {k: left_out[k] for k in values if k in left_out},
    }


def causal_case(case):
    folder = os.path.join(MODELS, case["model"])
    tok, model = ci.load(folder)
    prompt = ci.prompt_ids(tok, folder, case["text"])
    blank_token, blank_id = ci.blank(tok, folder)
    ends = ci.eos_ids(model)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=GENERATE, do_sample=False,
                             use_cache=True, pad_token_id=min(ends) if ends else None)
    cached = out[0, len(prompt):].tolist()
    stored = None
    if case.get("importance_fixture"):
        with open(os.path.join(FIXTURES, case["importance_fixture"])) as f:
            stored = json.load(f)
        if stored["prompt_ids"] != prompt or stored["generated_ids"] != cached[:len(stored["generated_ids"])]:
            fail(f"{case['name']}: generation differs from {case['importance_fixture']}")
    m = len(prompt)
    removable = list(range(m))
    steps, generated = [], []
    for t, y in enumerate(cached):
        fed = prompt + generated
        m64 = ci.float64_model(model, len(fed))
        s64, *_ = ci.scores(ci.Step(m64, fed, y), blank_id)
        s32, *_ = ci.scores(ci.Step(model, fed, y), blank_id)
        values = {name: [float(x) for x in s64[name]] for name in SCORES}
        other = {name: [float(x) for x in s32[name]] for name in SCORES}
        if stored is not None:
            entry = stored["importance"][t]
            for name in SCORES:
                d = float(np.abs(np.array(entry[name]) - np.array(values[name])).max())
                if d > 1e-12:
                    fail(f"{case['name']} step {t}: {name} differs from {case['importance_fixture']} by {d}")
        sources = {name: "causal_importance.py scores() on its float64 model (captum IG)" for name in SCORES}
        gaps = {}
        if t == 0:
            lrp, gaps, lrp_path = lrp_scores(case, fed, len(fed) - 1, y)
            values.update(lrp)
            sources.update({name: f"tests/fixtures/{lrp_path} (LXT 2.1, float64)" for name in lrp})
        with torch.no_grad():
            p32 = float(torch.softmax(model(torch.tensor([fed])).logits[0, -1], -1)[y])
            p64 = float(torch.softmax(m64(torch.tensor([fed])).logits[0, -1], -1)[y])

        def prob_of(batch, net=model):
            return torch.softmax(net(input_ids=batch).logits[:, -1].float(), dim=-1)[:, y]

        def erase(name, v, fed=fed, p32=p32, p64=p64, m64=m64, y=y):
            a32 = aopc(prob_of, fed, removable, v, blank_id, p32)
            a64 = aopc(lambda b: torch.softmax(m64(input_ids=b).logits[:, -1], -1)[:, y],
                       fed, removable, v, blank_id, p64)
            worst = max(abs(a32[k] - a64[k]) for k in ("comprehensiveness", "sufficiency"))
            if worst > 1e-5:
                fail(f"{case['name']} step {t} {name}: float32 and float64 AOPC differ by {worst}")
            return {**a32, "float64_difference": worst}

        kept, left_out = rank_and_erase(values, removable, erase, gaps, other=other, sources=sources)
        steps.append({
            "index": t,
            "id": y,
            "word": tok.decode([y]),
            "probability": p32,
            "probability_float64": p64,
            "fed_ids": fed,
            "target": len(fed) - 1,
            "importance": values,
            "integrated_gradients_check": s64["integrated_gradients_check"],
            "lrp_float32_gap": gaps or None,
            "eraser_importance": {k: kept[k] for k in values if k in kept},
            "left_out": {k: left_out[k] for k in values if k in left_out},
        })
        generated.append(y)
        if y in ends:
            break
    return {
        **case_header(case),
        "args": ["--json", "--evaluate", "--model", f"models/{case['model']}", "--generate",
                 str(GENERATE), case["text"]],
        "prompt_ids": prompt,
        "prompt_tokens": tok.convert_ids_to_tokens(prompt),
        "generated_ids": generated,
        "blank_token": blank_token,
        "blank_id": blank_id,
        "removable": removable,
        "steps": steps,
    }


# --------------------------------------------------------------------------------------------
# Comparing a binary's output with the fixtures (never written into them)


def check(binary, names, skip_real):
    with open(os.path.join(OUT, "cases.json")) as f:
        listed = json.load(f)
    worst_all = 0.0
    for entry in listed:
        if names and entry["name"] not in names:
            continue
        if entry["real"] and (skip_real or not os.path.isdir(os.path.join(REPO, "models", entry["model"]))):
            log(f"{entry['name']}: skipped (model absent)")
            continue
        with open(os.path.join(OUT, f"{entry['name']}.json")) as f:
            fx = json.load(f)
        run = subprocess.run([binary, *fx["args"]], cwd=REPO, capture_output=True, text=True)
        if run.returncode != 0:
            log(f"{entry['name']}: the binary failed: {run.stderr.strip()[-500:]}")
            continue
        report = json.loads(run.stdout)
        pairs = []
        if fx["kind"] == "causal-lm":
            if report["generated_ids"][:len(fx["generated_ids"])] != fx["generated_ids"]:
                log(f"{entry['name']}: generated {report['generated_ids']} vs {fx['generated_ids']}")
            for step in fx["steps"]:
                pairs.append((f"step {step['index']}", step, report["evaluation"][step["index"]],
                              report["importance"][step["index"]]))
        else:
            pairs.append(("", fx, report["evaluation"], report["importance"]))
        worst, where = 0.0, None
        for label, side, ev, imp in pairs:
            got = ev.get("eraser_importance")
            if got is None:
                log(f"{entry['name']}: no eraser_importance in the report")
                break
            for name, want in side["eraser_importance"].items():
                if name not in got:
                    log(f"{entry['name']} {label} {name}: missing in the report")
                    continue
                for key in ("comprehensiveness", "sufficiency"):
                    d = abs(got[name][key] - want[key])
                    if d > worst:
                        worst, where = d, f"{label} {name} {key}"
                    if d > 1e-5:
                        order = ranked(imp[name], side["removable"])
                        log(f"{entry['name']} {label} {name} {key}: {got[name][key]} vs {want[key]} "
                            f"(|d| {d:.2e}); the binary's scores rank {order}, the reference's "
                            f"{want['ranked']}")
            extra = sorted(set(got) - set(side["eraser_importance"]) - set(side["left_out"]))
            if extra:
                log(f"{entry['name']} {label}: scores in the report the fixture lacks: {extra}")
        log(f"{entry['name']}: largest |difference| {worst:.3e} ({where})")
        worst_all = max(worst_all, worst)
    log(f"every case: largest |difference| {worst_all:.3e}")


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="a case name (repeatable)")
    ap.add_argument("--skip-real", action="store_true", help="leave out the models/downloaded cases")
    ap.add_argument("--check", metavar="BINARY", help="compare BINARY's eraser_importance with the fixtures")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.check:
        check(args.check, args.only, args.skip_real)
        return
    cmr.register_f64_attention()
    os.makedirs(OUT, exist_ok=True)
    listed = []
    for case in CASES:
        listed.append({"name": case["name"], "kind": case["kind"], "model": case["model"],
                       "real": bool(case.get("real"))})
        if args.only and case["name"] not in args.only:
            continue
        if case.get("real") and (args.skip_real or not os.path.isdir(os.path.join(MODELS, case["model"]))):
            log(f"{case['name']}: skipped (models/{case['model']} absent or --skip-real)")
            continue
        fixture = causal_case(case) if case["kind"] == "causal-lm" else encoder_case(case)
        import captum
        import transformers
        fixture["reference"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                                "captum": captum.__version__}
        fixture["robustness"] = (
            f"a score is kept when every cut's (k-th − (k+1)-th ranked value) / max |value| over the "
            f"removable tokens is ≥ {MIN_RELATIVE_GAP:g} (for LRP also ≥ {LRP_GAP_FACTOR:g} × the "
            f"LXT fixture's float32_gap; for causal scores also the same top-k sets from the float32 "
            f"model), or both values are 0 (an exact tie, ranked by position)")
        with open(os.path.join(OUT, f"{case['name']}.json"), "w") as f:
            f.write(json.dumps(fixture, indent=1) + "\n")
        entries = fixture["steps"] if case["kind"] == "causal-lm" else [fixture]
        for e in entries:
            tag = f"{case['name']}" + (f" step {e['index']}" if "index" in e else "")
            log(f"{tag}: kept {len(e['eraser_importance'])} scores; left out "
                f"{ {k: round(v['min_relative_gap'] or 0, 8) for k, v in e['left_out'].items()} }")
        args_line = " ".join(json.dumps(a) if " " in a else a for a in fixture["args"])
        log(f"{case['name']}: bert-explain {args_line}")
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        for i, entry in enumerate(listed):
            f.write(("[" if i == 0 else " ") + json.dumps(entry) + ("," if i + 1 < len(listed) else "]") + "\n")


if __name__ == "__main__":
    main()
