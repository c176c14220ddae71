#!/usr/bin/env python3
"""Independent reference for bert-explain on every encoder family and task head (SPEC §7).

Loads a local checkpoint with the transformers class its config.json names in `architectures`
(float32, eval mode, `attn_implementation="eager"`), encodes exactly the given text (and pair)
with the checkpoint's own tokenizer (no padding, no truncation), and writes the SPEC §4 report
with the §7 fields:

  family      config.json's model_type: bert, roberta (also for xlm-roberta), distilbert,
              albert, electra
  task        masked-lm (*ForMaskedLM), sequence-classification (*ForSequenceClassification),
              replaced-token-detection (ElectraForPreTraining), encoder (no head)
  target      --target, else: the mask token (masked LM, discriminator, encoder), the first
              token (classifier)
  prediction  masked LM: {"candidates", "top"} from softmax(logits[t]); candidates are looked
              up as they read after a space (Ġhis, ▁his) for BPE/SentencePiece vocabularies,
              then as typed; classifier: {"labels": every label of id2label with softmax(logits)
              at the first token, most probable first}; discriminator: {"labels": original /
              replaced with p(replaced) = sigmoid(logit[t])}; encoder: null

Relevances (raw, rollout, flow) come from reference.py's functions on the float32 attention
probabilities. With --importance, also the importance scores of the explained word or label
(--word / --label NAME|ID) and their correlations, as importance.py for masked LMs:
gradients of p with respect to the word embeddings, and blank-out with [UNK]/<unk> (or the mask
token with --blank mask). Never uses any Rust code.

Usage: family_reference.py --model DIR --text TEXT [--pair TEXT] [--target I]
                           [--candidates his,her] [--top-k 5] [--out FILE] [--attention-out FILE]
                           [--importance [--word W | --label L] [--blank unk|mask] --importance-out FILE]
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import importance as importance_ref  # noqa: E402
import reference as ref  # noqa: E402

FAMILIES = {"bert": "bert", "roberta": "roberta", "xlm-roberta": "roberta", "distilbert": "distilbert",
            "albert": "albert", "electra": "electra", "modernbert": "modernbert", "deberta-v2": "deberta-v2"}
NO_TOKEN_TYPES = ("distilbert", "modernbert")
# Decoders read as classifiers (*ForSequenceClassification): `score` at the last token.
DECODERS = {"llama": "llama", "qwen2": "qwen2", "mistral": "mistral", "qwen3": "qwen3",
            "gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma3_text", "phi3": "phi3"}
MASKS = ("[MASK]", "<mask>")
UNKNOWN = ("[UNK]", "<unk>")


def task_of(architecture):
    if architecture.endswith("ForMaskedLM"):
        return "masked-lm"
    if architecture.endswith("ForSequenceClassification"):
        return "sequence-classification"
    if architecture == "ElectraForPreTraining":
        return "replaced-token-detection"
    return "encoder"


class Checkpoint:
    """A loaded folder: tokenizer, model, family and task."""

    def __init__(self, folder):
        import torch
        import transformers

        self.folder = os.path.abspath(folder)
        with open(os.path.join(self.folder, "config.json")) as f:
            config = json.load(f)
        model_type = config.get("model_type", "bert")
        architecture = (config.get("architectures") or ["AutoModel"])[0]
        self.task = task_of(architecture)
        self.decoder = model_type in DECODERS and self.task == "sequence-classification"
        if model_type not in FAMILIES and not self.decoder:
            ref.fail(f"{folder}: model_type {model_type!r} is not an encoder family")
        self.family = DECODERS[model_type] if self.decoder else FAMILIES[model_type]
        self.tok = ref.load_tokenizer(self.folder)
        cls = getattr(transformers, architecture)
        self.model, info = cls.from_pretrained(self.folder, attn_implementation="eager",
                                               dtype=torch.float32, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys")}
        if problems:
            ref.fail(f"{folder}: {problems}")
        self.model = self.model.float().eval()

    def encode(self, text, pair=None):
        """Exactly the text (and pair), as the tokenizer joins them. Token types as tokenizer.json's
        post-processor gives them (1 for the second text of a BERT/ALBERT/ELECTRA pair), for every
        family that has token types: transformers 5's AlbertTokenizer leaves token_type_ids out of
        its model_input_names, so a pair would otherwise run with types all 0."""
        with_types = self.family not in NO_TOKEN_TYPES and not self.decoder
        enc = self.tok(text, pair, add_special_tokens=True, padding=False, truncation=False,
                       return_token_type_ids=with_types, return_tensors="pt")
        if not bool((enc["attention_mask"] == 1).all()):
            ref.fail("the tokenizer padded the input")
        return dict(enc)

    def special_id(self, spellings):
        """The first of `spellings` that is a vocabulary entry, and its id."""
        for token in spellings:
            idx = self.tok.convert_tokens_to_ids(token)
            if idx is not None and self.tok.convert_ids_to_tokens(idx) == token:
                return token, int(idx)
        ref.fail(f"the vocabulary has none of {spellings}")

    def target(self, ids, given):
        n = len(ids)
        if given is not None:
            if not 0 <= given < n:
                ref.fail(f"--target {given} is out of range (0..{n - 1})")
            return given
        if self.task == "sequence-classification":
            # transformers' decoder classifiers read the last token that is not padding.
            return n - 1 if self.decoder else 0
        masks = [i for i, x in enumerate(ids) if x == self.tok.mask_token_id]
        if len(masks) != 1:
            ref.fail(f"the text has {len(masks)} mask tokens; give exactly one or pass --target")
        return masks[0]

    def single_piece(self, word):
        """A candidate's id: as it reads after a space (Ġword, ▁word), then as typed, for BPE
        and SentencePiece vocabularies; as typed for WordPiece."""
        wordpiece = type(self.tok.backend_tokenizer.model).__name__ == "WordPiece"
        forms = [word] if wordpiece else [" " + word, word]
        seen = []
        for form in forms:
            pieces = self.tok.tokenize(form)
            if len(pieces) == 1 and pieces[0] != self.tok.unk_token:
                return int(self.tok.convert_tokens_to_ids(pieces[0]))
            seen.append(pieces)
        ref.fail(f"candidate {word!r} is not one token: {seen}")

    def label_names(self, count):
        if self.task == "replaced-token-detection":
            return ["original", "replaced"]
        id2label = self.model.config.id2label or {}
        return [id2label.get(i, f"LABEL_{i}") for i in range(count)]

    def probabilities(self, logits, t):
        """The head's distribution that the prediction reports, float32, for one sequence:
        the vocabulary at t, the labels at the first token, or (original, replaced) at t."""
        import torch

        if self.task == "masked-lm":
            return torch.softmax(logits[:, t], dim=-1)
        if self.task == "sequence-classification":
            return torch.softmax(logits, dim=-1)  # a decoder's: already at its last token
        if self.task == "replaced-token-detection":
            replaced = torch.sigmoid(logits[:, t])
            return torch.stack([1 - replaced, replaced], dim=-1)
        return None


def prediction(ck, probs, candidates, top_k):
    import torch

    if ck.task == "masked-lm":
        cands = []
        for word in candidates:
            idx = ck.single_piece(word)
            cands.append({"word": word, "id": idx, "probability": float(probs[idx])})
        values, indices = torch.topk(probs, min(top_k, probs.shape[0]))
        top = [{"word": ck.tok.convert_ids_to_tokens(int(i)), "id": int(i), "probability": float(v)}
               for v, i in zip(values, indices)]
        return {"candidates": cands, "top": top}
    names = ck.label_names(probs.shape[0])
    order = sorted(range(probs.shape[0]), key=lambda i: (-float(probs[i]), i))
    return {"labels": [{"label": names[i], "id": i, "probability": float(probs[i])} for i in order]}


def run(model_dir, text, pair=None, target=None, candidates=("his", "her"), top_k=5, attention_out=None,
        checkpoint=None):
    import torch

    torch.set_grad_enabled(False)
    ck = checkpoint or Checkpoint(model_dir)
    enc = ck.encode(text, pair)
    ids = enc["input_ids"][0].tolist()
    tokens = ck.tok.convert_ids_to_tokens(ids)
    n = len(ids)
    if n > ck.model.config.max_position_embeddings - (2 if ck.family == "roberta" else 0):
        ref.fail(f"the text is {n} tokens long, more than the model's positions")
    t = ck.target(ids, target)
    ref.log(f"{ck.family} {ck.task}: {n} tokens {tokens}, target {t}")

    out = ck.model(**enc, output_attentions=True)
    att32 = torch.stack([a[0] for a in out.attentions])
    assert att32.dtype == torch.float32 and att32.shape[-1] == n
    att = att32.double().numpy()
    mean, aug = ref.fuse_and_augment(att)
    probs = ck.probabilities(out.logits, t) if ck.task != "encoder" else None
    report = {
        "model": os.path.basename(ck.folder.rstrip("/")),
        "family": ck.family,
        "task": ck.task,
        "device": "cpu",
        "tokens": tokens,
        "target": {"index": t, "token": tokens[t]},
        "prediction": None if probs is None else prediction(ck, probs[0], list(candidates), top_k),
        "layers": att.shape[0],
        "heads": att.shape[1],
        "relevance": {
            "raw": mean[:, t, :].tolist(),
            "rollout": ref.rollout_rows(aug, t).tolist(),
            "flow": ref.flow_rows(aug, t).tolist(),
        },
    }
    if attention_out:
        with open(attention_out, "w") as f:
            json.dump({"model": report["model"], "tokens": tokens, "target": t,
                       "attention": att32.tolist()}, f)
            f.write("\n")
    return report


def importance(model_dir, text, pair=None, target=None, word=None, label=None, blank="unk", checkpoint=None):
    """importance.py's scores for any head: p of the word at t (masked LM) or of the label
    (classifier: at the first token; discriminator: at t), default the top one."""
    import torch

    ck = checkpoint or Checkpoint(model_dir)
    if ck.task == "encoder":
        ref.fail("importance scores need a prediction head")
    enc = ck.encode(text, pair)
    ids = enc["input_ids"]
    n = ids.shape[1]
    t = ck.target(ids[0].tolist(), target)
    extra = {k: v for k, v in enc.items() if k != "input_ids"}
    with torch.enable_grad():
        words = ck.model.get_input_embeddings()(ids).detach().clone().requires_grad_(True)
        with importance_ref.FirstLayerInput(ck.model) as block:
            probs = ck.probabilities(ck.model(inputs_embeds=words, **extra).logits, t)[0]
        if ck.task == "masked-lm":
            wid = ck.single_piece(word) if word is not None else int(torch.argmax(probs))
            name = word if word is not None else ck.tok.convert_ids_to_tokens(wid)
        else:
            names = ck.label_names(probs.shape[0])
            if label is None:
                wid = int(torch.argmax(probs))
            elif label in names:
                wid = names.index(label)
            elif label.isdigit() and int(label) < len(names):
                wid = int(label)
            else:
                ref.fail(f"unknown label {label!r}; the labels are {names}")
            name = names[wid]
        p = probs[wid]
        p.backward()
    grad = words.grad[0]
    if blank == "pad":  # config.json's pad_token_id (a decoder's classifier)
        blank_id = int(ck.model.config.pad_token_id)
        blank_token = ck.tok.convert_ids_to_tokens(blank_id)
    else:
        blank_token, blank_id = ck.special_id(UNKNOWN if blank == "unk" else MASKS)

    def probability(batch):
        wide = {k: v.expand(batch.shape[0], -1) for k, v in extra.items()}
        return ck.probabilities(ck.model(inputs_embeds=batch, **wide).logits, t)[:, wid]

    along, sums = importance_ref.directional(probability, words.detach(), grad)
    baseline = ck.model.get_input_embeddings()(torch.full_like(ids, blank_id)).detach()
    ig, completeness = importance_ref.integrated_gradients(probability, words.detach(), baseline)
    drops = []
    with torch.no_grad():
        for j in range(n):
            blanked = ids.clone()
            blanked[0, j] = blank_id
            if ck.decoder:
                # The label is read at the text's last position whatever is blanked: given
                # input_ids, transformers would read the last token that is not the pad token,
                # so blanking the last one with it would move the read; its embeddings are
                # always read at the last position.
                embedded = ck.model.get_input_embeddings()(blanked)
                logits = ck.model(inputs_embeds=embedded, **extra).logits
            else:
                logits = ck.model(input_ids=blanked, **extra).logits
            q = ck.probabilities(logits, t)[0, wid]
            drops.append(float(p.detach()) - float(q))
    return {
        "word": name,
        "id": wid,
        "probability": float(p.detach()),
        "blank_token": blank_token,
        "gradient_norm": [float(v) for v in grad.norm(dim=-1)],
        "gradient_x_input": [float(v) for v in along],
        "blank_out": drops,
        **importance_ref.paper_scores(along, sums, drops),
        "integrated_gradients": ig,
        "integrated_gradients_check": completeness,
        **block.scores(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="local checkpoint folder")
    ap.add_argument("--text", required=True)
    ap.add_argument("--pair", default=None, help="the second text of a pair")
    ap.add_argument("--target", type=int, default=None)
    ap.add_argument("--candidates", default="his,her", help="masked LM: comma-separated words")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the report here (default: stdout)")
    ap.add_argument("--attention-out", default=None, help="also write the float32 attention (L×H×n×n)")
    ap.add_argument("--importance", action="store_true", help="also compute importance scores")
    ap.add_argument("--word", default=None, help="with --importance on a masked LM: this word")
    ap.add_argument("--label", default=None, help="with --importance on a classifier: this label (name or id)")
    ap.add_argument("--blank", choices=["unk", "mask", "pad"], default="unk")
    args = ap.parse_args()
    cands = [c.strip() for c in args.candidates.split(",") if c.strip()]
    try:
        ck = Checkpoint(args.model)
        report = run(args.model, args.text, args.pair, args.target, cands, args.top_k, args.attention_out, ck)
        if args.importance:
            scores = importance(args.model, args.text, args.pair, args.target, args.word, args.label,
                                args.blank, ck)
            report["importance"] = scores
            report["evaluation"] = importance_ref.evaluation(report, scores)
    except ref.ReferenceError as e:
        print(f"family_reference: error: {e}", file=sys.stderr)
        sys.exit(1)
    text = json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
