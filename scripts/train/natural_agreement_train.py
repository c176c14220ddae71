#!/usr/bin/env python3
"""Train the natural-English agreement classifier (models/agreement-natural) from scratch.

The paper's model (Abnar & Zuidema 2020, §4) on Linzen-style data from real text
(scripts/train/natural_agreement_data.py): a 6-layer, 8-head BERT (transformers'
BertForSequenceClassification) reads "[CLS] prefix [SEP]" and predicts, from [CLS], the number of
the verb that follows. Unlike models/agreement-classifier it is kept from saturating: label
smoothing (0.1 by default) and early stopping on the loss of a validation split cut from the
training prefixes (every prefix whose sha256 ends in 0 in hex); the held-out prefixes are only
scored. Vocabulary: the words of the training prefixes seen at least --min-count times (the
BERT pre-tokenizer's words, lower-cased), at most --vocab; other words become [UNK].

    .venv-reference/bin/python scripts/train/natural_agreement_train.py [--threads 1]

Writes models/agreement-natural/ (config.json, model.safetensors, tokenizer files, TRAINING.md):
accuracy overall and by attractors (Linzen et al.'s table), the logit-margin distribution, both
beside models/agreement-classifier's on its own held-out set. CPU only, fixed seeds,
deterministic algorithms.
"""
import argparse
import collections
import hashlib
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agreement_train import (ID2LABEL, LABEL2ID, SPECIALS, batches, build_tokenizer, collate,  # noqa: E402
                             read_jsonl)

MAX_TOKENS = 128


def words_of(text):
    from tokenizers import normalizers, pre_tokenizers

    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    return [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(norm.normalize_str(text))]


def vocabulary(rows, min_count, limit):
    counts = collections.Counter(w for r in rows for w in words_of(r["text"]))
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return ranked[:limit]


def encode(tok, rows):
    ids = [e.ids for e in tok.encode_batch([r["text"] for r in rows])]
    return ids, [LABEL2ID[r["label"]] for r in rows]


@torch.no_grad()
def logits_of(model, ids, batch_size=256):
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [None] * len(ids)
    for k in range(0, len(order), batch_size):
        idx = order[k:k + batch_size]
        x, m, _ = collate(ids, [0] * len(ids), idx)
        for i, row in zip(idx, model(input_ids=x, attention_mask=m).logits.tolist()):
            out[i] = row
    model.train()
    return out


def loss_of(logits, labels):
    t = torch.tensor(logits)
    return torch.nn.functional.cross_entropy(t, torch.tensor(labels)).item()


def table(rows, logits):
    """(subset, correct, total) overall, with attractors and by count (3 = three or more)."""
    def acc(sel):
        sel = list(sel)
        ok = sum(1 for i in sel if max(range(2), key=lambda c: logits[i][c]) == LABEL2ID[rows[i]["label"]])
        return ok, len(sel)
    out = [("all", *acc(range(len(rows)))),
           ("with attractors (≥ 1)", *acc(i for i, r in enumerate(rows) if r["attractors"] > 0))]
    for k in range(4):
        sel = [i for i, r in enumerate(rows) if min(r["attractors"], 3) == k]
        if sel:
            out.append((f"{k}{'+' if k == 3 else ''} attractor{'s' if k != 1 else ''}", *acc(sel)))
    return out


def margins(rows, logits):
    """The gold label's logit minus the other's: quantiles."""
    m = sorted(l[LABEL2ID[r["label"]]] - l[1 - LABEL2ID[r["label"]]] for r, l in zip(rows, logits))
    q = lambda p: m[min(len(m) - 1, int(p * len(m)))]
    return {"p10": q(0.1), "median": q(0.5), "p90": q(0.9), "iqr": q(0.75) - q(0.25)}


def heldout_rows(text_path, meta_path, label_key="expected"):
    rows = []
    for text, meta in zip(read_jsonl(text_path), read_jsonl(meta_path)):
        rows.append({"text": text["text"], "label": text[label_key], "attractors": meta["attractors"]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default="data/agreement-natural-train.jsonl")
    ap.add_argument("--out", default="models/agreement-natural")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=12, help="at most; early stopping decides")
    ap.add_argument("--patience", type=int, default=2)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=6000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    rows = read_jsonl(args.train)
    held = heldout_rows("data/agreement-natural-heldout.jsonl", "data/agreement-natural-heldout-meta.jsonl")
    valid_side = lambda r: hashlib.sha256(r["text"].encode()).hexdigest()[-1] == "0"
    train_rows = [r for r in rows if not valid_side(r)]
    valid_rows = [r for r in rows if valid_side(r)]
    words = vocabulary(train_rows, args.min_count, args.vocab)
    tok, vocab = build_tokenizer(words)
    tr_ids, tr_labels = encode(tok, train_rows)
    keep = [i for i, x in enumerate(tr_ids) if len(x) <= MAX_TOKENS]
    tr_ids, tr_labels = [tr_ids[i] for i in keep], [tr_labels[i] for i in keep]
    va_ids, va_labels = encode(tok, valid_rows)
    ho_ids, _ = encode(tok, held)
    assert max(len(x) for x in ho_ids + va_ids) <= MAX_TOKENS, "a held-out prefix is longer than the positions"
    unk = tok.token_to_id("[UNK]")
    unk_share = sum(x.count(unk) for x in ho_ids) / sum(len(x) - 2 for x in ho_ids)
    singular_share = sum(1 for r in held if r["label"] == "singular") / len(held)

    config = BertConfig(
        vocab_size=len(vocab), hidden_size=64, num_hidden_layers=6, num_attention_heads=8,
        intermediate_size=256, max_position_embeddings=MAX_TOKENS, type_vocab_size=2,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0, id2label=ID2LABEL,
        label2id=LABEL2ID, pad_token_id=0)
    model = BertForSequenceClassification._from_config(config, attn_implementation="eager")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    rng = random.Random(args.seed)
    steps = (len(tr_ids) + args.batch_size - 1) // args.batch_size
    total = steps * args.epochs
    warmup = max(1, total // 20)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / (total - warmup))))
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    print(f"{len(tr_ids)} training, {len(va_ids)} validation, {len(held)} held-out prefixes; vocabulary "
          f"{len(vocab)}; {n_params} parameters; at most {total} steps", flush=True)

    t0, best, best_state, since, log = time.time(), float("inf"), None, 0, []
    for epoch in range(args.epochs):
        for idx in batches(tr_ids, tr_labels, args.batch_size, rng):
            x, m, y = collate(tr_ids, tr_labels, idx)
            loss = loss_fn(model(input_ids=x, attention_mask=m).logits, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        valid = loss_of(logits_of(model, va_ids), va_labels)
        acc = table(valid_rows, logits_of(model, va_ids))[0]
        line = f"epoch {epoch + 1}: validation loss {valid:.4f}, accuracy {acc[1] / acc[2]:.4f} ({time.time() - t0:.0f} s)"
        print(line, flush=True)
        log.append(line)
        if valid < best - 1e-4:
            best, since = valid, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            since += 1
            if since >= args.patience:
                break
    model.load_state_dict(best_state)
    train_time = time.time() - t0

    held_logits = logits_of(model, ho_ids)
    natural = table(held, held_logits)
    natural_margins = margins(held, held_logits)
    synthetic = BertForSequenceClassification.from_pretrained("models/agreement-classifier", attn_implementation="eager")
    syn_rows = heldout_rows("data/agreement-heldout.jsonl", "data/agreement-heldout-meta.jsonl")
    syn_tok, _ = build_tokenizer([l.strip() for l in open("models/agreement-classifier/vocab.txt")][len(SPECIALS):])
    syn_logits = logits_of(synthetic, encode(syn_tok, syn_rows)[0])
    synthetic_table = table(syn_rows, syn_logits)
    synthetic_margins = margins(syn_rows, syn_logits)

    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", do_lower_case=True,
                                   model_max_length=MAX_TOKENS)
    fast.save_pretrained(args.out)
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        f.write("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    tok.save(os.path.join(args.out, "tokenizer.json"))
    cfg_path = os.path.join(args.out, "tokenizer_config.json")
    tok_cfg = json.load(open(cfg_path))
    tok_cfg.pop("backend", None)
    tok_cfg["tokenizer_class"] = "BertTokenizer"
    with open(cfg_path, "w") as f:
        json.dump(tok_cfg, f, indent=2, sort_keys=True)
        f.write("\n")

    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    by_name = {name: (ok, n) for name, ok, n in synthetic_table}
    lines = []
    for name, ok, n in natural:
        s = by_name.get(name)
        other = f"{s[0]}/{s[1]} ({100 * s[0] / s[1]:.1f}%)" if s else "-"
        lines.append(f"| {name} | {ok}/{n} ({100 * ok / n:.1f}%) | {other} |")
    fmt = lambda m: f"median {m['median']:.2f}, 10th–90th percentile {m['p10']:.2f} to {m['p90']:.2f}, IQR {m['iqr']:.2f}"
    report = f"""# agreement-natural

Subject-verb agreement on natural English (Linzen et al. 2016's recipe on Jane Austen's novels and
Amazon fine-food reviews, data/agreement-natural.md), after Abnar & Zuidema (2020) §4:
BertForSequenceClassification trained from scratch on [CLS] of "[CLS] prefix [SEP]". Labels:
0 = singular, 1 = plural.

    .venv-data/bin/python scripts/train/natural_agreement_data.py
    .venv-reference/bin/python scripts/train/natural_agreement_train.py --threads {args.threads}

- data: {len(tr_ids)} training prefixes (at most {MAX_TOKENS} tokens), {len(va_ids)} validation
  (early stopping), {len(held)} held out (data/agreement-natural-heldout.jsonl); held-out
  tokens unknown to the vocabulary: {100 * unk_share:.1f}%; singular: {100 * singular_share:.1f}% of
  the held-out prefixes (the majority baseline)
- model: 6 layers, 8 heads, hidden 64, intermediate 256, {MAX_TOKENS} positions, vocabulary
  {len(vocab)} (training words seen at least {args.min_count} times), {n_params} parameters,
  model.safetensors {size} bytes
- training: seed {args.seed}, batch {args.batch_size}, AdamW lr {args.lr} (5% warm-up, linear
  decay over {args.epochs} epochs), weight decay 0.01, hidden dropout 0.1, label smoothing
  {args.label_smoothing}, early stopping on validation loss (patience {args.patience}; the best
  epoch kept), torch {torch.__version__}, {args.threads} thread(s), {train_time:.0f} s

{chr(10).join('    ' + l for l in log)}

Held-out accuracy by attractors (nouns of the other number between the subject and the verb),
beside models/agreement-classifier on its own synthetic held-out set:

| held-out subset | natural (this model) | synthetic (agreement-classifier) |
|---|---|---|
{chr(10).join(lines)}

Logit margin (gold minus other) on the held-out prefixes: natural {fmt(natural_margins)};
synthetic {fmt(synthetic_margins)}.
"""
    open(os.path.join(args.out, "TRAINING.md"), "w").write(report)
    print(report)


if __name__ == "__main__":
    main()
