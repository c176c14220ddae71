#!/usr/bin/env python3
"""Train the subject-verb agreement classifier (Abnar & Zuidema 2020, §4) from scratch.

A 6-layer, 8-head BERT (transformers' BertForSequenceClassification) reads "[CLS] prefix [SEP]"
and predicts, from [CLS], the number of the verb that follows the prefix. The data comes from
scripts/train/agreement_data.py (same seed: the same files); the tokenizer is a WordPiece whose
vocabulary is exactly the generator's words plus the five special tokens, so every word is one
token.

    .venv-reference/bin/python scripts/train/agreement_data.py
    .venv-reference/bin/python scripts/train/agreement_train.py [--threads 1] [--epochs N]

Writes models/agreement-classifier/ (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, vocab.txt, TRAINING.md). CPU only, fixed seeds, deterministic algorithms:
the same thread count gives the same weights.
"""
import argparse
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agreement_data  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ID2LABEL = {0: "singular", 1: "plural"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}


def build_tokenizer(words):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(words))}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok, vocab


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def encode(tok, rows):
    encs = tok.encode_batch([r["text"] for r in rows])
    unk = tok.token_to_id("[UNK]")
    ids = [e.ids for e in encs]
    for r, e in zip(rows, ids):
        assert unk not in e and len(e) == len(r["text"].split()) + 2, r["text"]
    labels = [LABEL2ID[r["label"]] for r in rows]
    return ids, labels


def batches(ids, labels, batch_size, rng):
    """Shuffled batches of similar lengths (less padding): shuffle, cut into pools of 50
    batches, sort each pool by length, shuffle the batches."""
    order = list(range(len(ids)))
    rng.shuffle(order)
    pool = batch_size * 50
    out = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: len(ids[i]))
        out += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


def collate(ids, labels, idx):
    n = max(len(ids[i]) for i in idx)
    input_ids = torch.zeros(len(idx), n, dtype=torch.long)
    mask = torch.zeros(len(idx), n, dtype=torch.long)
    for row, i in enumerate(idx):
        input_ids[row, :len(ids[i])] = torch.tensor(ids[i])
        mask[row, :len(ids[i])] = 1
    return input_ids, mask, torch.tensor([labels[i] for i in idx])


@torch.no_grad()
def predict(model, ids, batch_size=256):
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    preds = [0] * len(ids)
    dummy = [0] * len(ids)
    for k in range(0, len(order), batch_size):
        idx = order[k:k + batch_size]
        x, m, _ = collate(ids, dummy, idx)
        logits = model(input_ids=x, attention_mask=m).logits
        for i, p in zip(idx, logits.argmax(-1).tolist()):
            preds[i] = p
    model.train()
    return preds


def accuracy_table(rows, preds):
    """overall, with attractors, and by number of attractors (3 = three or more)"""
    def acc(sel):
        sel = list(sel)
        ok = sum(1 for i in sel if preds[i] == LABEL2ID[rows[i]["label"]])
        return ok, len(sel)
    table = [("all", *acc(range(len(rows)))),
             ("with attractors (≥ 1)", *acc(i for i, r in enumerate(rows) if r["attractors"] > 0))]
    for k in sorted(set(r["attractors"] for r in rows)):
        table.append((f"{k} attractor{'s' if k != 1 else ''}",
                      *acc(i for i, r in enumerate(rows) if r["attractors"] == k)))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default="data/agreement-train.jsonl")
    ap.add_argument("--heldout", default="data/agreement-heldout.jsonl")
    ap.add_argument("--out", default="models/agreement-classifier")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--intermediate", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--predictions", help="also write the held-out predictions here (JSON lines)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training lines")
    args = ap.parse_args()

    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    words = agreement_data.vocabulary()
    tok, vocab = build_tokenizer(words)
    train_rows = read_jsonl(args.train)
    if args.limit:
        train_rows = train_rows[:args.limit]
    held_rows = agreement_data.read_heldout(args.heldout)
    held_texts = set(r["text"] for r in held_rows)
    assert not any(r["text"] in held_texts for r in train_rows), "held-out text in training"
    tr_ids, tr_labels = encode(tok, train_rows)
    ho_ids, _ = encode(tok, held_rows)

    config = BertConfig(
        vocab_size=len(vocab), hidden_size=args.hidden, num_hidden_layers=6,
        num_attention_heads=8, intermediate_size=args.intermediate, max_position_embeddings=64,
        type_vocab_size=2, hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout, id2label=ID2LABEL, label2id=LABEL2ID,
        pad_token_id=0)
    model = BertForSequenceClassification._from_config(config, attn_implementation="eager")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())

    rng = random.Random(args.seed)
    steps_per_epoch = (len(tr_ids) + args.batch_size - 1) // args.batch_size
    total = steps_per_epoch * args.epochs
    warmup = max(1, total // 20)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / (total - warmup))))

    print(f"{len(train_rows)} training, {len(held_rows)} held-out prefixes; vocabulary "
          f"{len(vocab)}; {n_params} parameters; {total} steps", flush=True)
    t0 = time.time()
    step = 0
    log = []
    for epoch in range(args.epochs):
        run_loss, run_n = 0.0, 0
        for idx in batches(tr_ids, tr_labels, args.batch_size, rng):
            x, m, y = collate(tr_ids, tr_labels, idx)
            loss = model(input_ids=x, attention_mask=m, labels=y).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            run_loss += loss.item()
            run_n += 1
            if step % 200 == 0:
                print(f"  step {step}/{total} loss {run_loss / run_n:.4f} "
                      f"({time.time() - t0:.0f} s)", flush=True)
                run_loss, run_n = 0.0, 0
        preds = predict(model, ho_ids)
        table = accuracy_table(held_rows, preds)
        line = (f"epoch {epoch + 1}: held-out {table[0][1] / table[0][2]:.4f}, with attractors "
                f"{table[1][1] / table[1][2]:.4f} ({time.time() - t0:.0f} s)")
        print(line, flush=True)
        log.append(line)
    train_time = time.time() - t0

    preds = predict(model, ho_ids)
    table = accuracy_table(held_rows, preds)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", do_lower_case=True,
        model_max_length=64)
    fast.save_pretrained(args.out)
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        f.write("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    # tokenizer.json straight from the tokenizers library (what save_pretrained may rewrite)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    # transformers 5 writes "TokenizersBackend"; name the class as the other BERT checkpoints do
    # (AutoTokenizer then loads BertTokenizer from the same tokenizer.json: identical ids)
    cfg_path = os.path.join(args.out, "tokenizer_config.json")
    with open(cfg_path) as f:
        tok_cfg = json.load(f)
    tok_cfg.pop("backend", None)
    tok_cfg["tokenizer_class"] = "BertTokenizer"
    with open(cfg_path, "w") as f:
        json.dump(tok_cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    if args.predictions:
        with open(args.predictions, "w") as f:
            for r, p in zip(held_rows, preds):
                f.write(json.dumps({"text": r["text"], "label": r["label"],
                                    "predicted": ID2LABEL[p]}) + "\n")

    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    rows = "\n".join(f"| {name} | {ok}/{n} | {100 * ok / n:.2f}% |" for name, ok, n in table)
    report = f"""# agreement-classifier

Subject-verb agreement (number of the verb after a sentence prefix), after Abnar & Zuidema
(2020) §4: BertForSequenceClassification trained from scratch on [CLS] of "[CLS] prefix [SEP]".
Labels: 0 = singular, 1 = plural.

Regenerate (CPU, {args.threads} thread{'s' if args.threads != 1 else ''}):

    .venv-reference/bin/python scripts/train/agreement_data.py
    .venv-reference/bin/python scripts/train/agreement_train.py --threads {args.threads}

- data: scripts/train/agreement_data.py, seed 13: {len(train_rows)} training prefixes,
  {len(held_rows)} held-out (data/agreement-heldout.jsonl, none in training)
- model: 6 layers, 8 heads, hidden {args.hidden}, intermediate {args.intermediate}, 64 positions,
  vocabulary {len(vocab)} (every word one token), {n_params} parameters,
  model.safetensors {size} bytes
- training: seed {args.seed}, {args.epochs} epochs of {steps_per_epoch} steps, batch
  {args.batch_size}, AdamW lr {args.lr} (5% warm-up, linear decay), weight decay 0.01,
  dropout {args.dropout}, torch {torch.__version__}, {args.threads} thread(s),
  {train_time:.0f} s

{chr(10).join('    ' + l for l in log)}

Held-out accuracy ("attractors": nouns of the other number between the subject's head and the
verb):

| held-out subset | correct | accuracy |
|---|---|---|
{rows}
"""
    with open(os.path.join(args.out, "TRAINING.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
