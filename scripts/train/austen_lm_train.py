#!/usr/bin/env python3
"""Train a small GPT-2 (models/austen-gpt2) from scratch on Jane Austen's six novels.

transformers' GPT2LMHeadModel (6 layers, 4 heads, n_embd 128, 64 positions, tied embeddings)
learns the sentences of data/austen-lm-train.txt (scripts/train/austen_lm_data.py), one sentence
per sequence: its tokens, then <|endoftext|>, cut at 64 tokens. No beginning-of-sequence token:
a prompt of the task file (a held-out sentence's beginning) is fed to the model exactly as
bert-explain tokenizes it, from position 0, as every training sentence was.

Tokenizer: a word-level `tokenizers` tokenizer (WordLevel; Lowercase normalizer; Whitespace
pre-tokenizer, `\\w+|[^\\w\\s]+`, so punctuation is its own token; no post-processor): [UNK],
<|endoftext|>, then the training sentences' tokens seen at least 3 times (austen_lm_data's
vocabulary; the validation sentences are not counted), most frequent first.

    .venv-reference/bin/python scripts/train/austen_lm_data.py
    .venv-reference/bin/python scripts/train/austen_lm_train.py [--threads 1] [--epochs N]

The epoch kept is the one with the lowest validation loss (training sentences whose sha256
ends in 3); the held-out sentences and data/austen-next-word.jsonl are only scored. Writes
models/austen-gpt2/ (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
TRAINING.md). CPU only, fixed seeds, deterministic algorithms: the same thread count gives the
same weights.
"""
import argparse
import collections
import json
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import austen_lm_data  # noqa: E402
from agreement_train import batches, read_jsonl  # noqa: E402

SPECIALS = ["[UNK]", "<|endoftext|>"]
UNK, EOS = 0, 1
POSITIONS = 64


def build_tokenizer(words):
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(words))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return tok, vocab


def encode(tok, sentences):
    """Each sentence's ids, <|endoftext|> appended, cut at POSITIONS tokens."""
    return [(e.ids + [EOS])[:POSITIONS] for e in tok.encode_batch(sentences)]


def collate(ids, idx):
    """Right-padded ids (with <|endoftext|>), mask, and labels (-100 on padding)."""
    n = max(len(ids[i]) for i in idx)
    x = torch.full((len(idx), n), EOS, dtype=torch.long)
    mask = torch.zeros(len(idx), n, dtype=torch.long)
    for row, i in enumerate(idx):
        x[row, :len(ids[i])] = torch.tensor(ids[i])
        mask[row, :len(ids[i])] = 1
    labels = x.masked_fill(mask == 0, -100)
    return x, mask, labels


@torch.no_grad()
def perplexity(model, ids, batch_size=32):
    """Mean loss per predicted token (every token after the first, <|endoftext|> included),
    its exponential, and the share of predicted tokens that are [UNK]."""
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    total, count = 0.0, 0
    for k in range(0, len(order), batch_size):
        x, m, y = collate(ids, order[k:k + batch_size])
        logits = model(input_ids=x, attention_mask=m).logits[:, :-1].float()
        target = y[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                 ignore_index=-100, reduction="sum")
        total += loss.item()
        count += int((target != -100).sum())
    model.train()
    unk = sum(x[1:].count(UNK) for x in ids) / sum(len(x) - 1 for x in ids)
    return total / count, math.exp(total / count), unk


@torch.no_grad()
def next_tokens(model, ids, batch_size=32):
    """The greedy next token after each prompt, and its probability."""
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [None] * len(ids)
    for k in range(0, len(order), batch_size):
        idx = order[k:k + batch_size]
        x, m, _ = collate(ids, idx)
        logits = model(input_ids=x, attention_mask=m).logits
        for row, i in enumerate(idx):
            p = torch.softmax(logits[row, len(ids[i]) - 1].double(), -1)
            out[i] = (int(p.argmax()), float(p.max()))
    model.train()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=austen_lm_data.TRAIN_FILE)
    ap.add_argument("--task", default=austen_lm_data.TASK_FILE)
    ap.add_argument("--out", default="models/austen-gpt2")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training sentences (a quick try)")
    args = ap.parse_args()

    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    train_sents, valid_sents = austen_lm_data.read_train_file(args.train)
    words = austen_lm_data.vocabulary(train_sents)
    if args.limit:
        train_sents = train_sents[:args.limit]
    tok, vocab = build_tokenizer(words)
    task = read_jsonl(args.task)
    assert all(r["expected"] in vocab for r in task), "a task word is not in the vocabulary: rerun austen_lm_data.py"

    held_sents = held_out_sentences()
    tr_ids, va_ids, ho_ids = encode(tok, train_sents), encode(tok, valid_sents), encode(tok, held_sents)
    task_ids = [e.ids for e in tok.encode_batch([r["text"] for r in task])]
    assert max(len(x) for x in task_ids) < POSITIONS
    assert all(x == [vocab.get(t, UNK) for t, _ in austen_lm_data.tokens_of(r["text"])] for x, r in zip(task_ids, task))
    expected = [vocab[r["expected"]] for r in task]
    majority_word, majority_n = collections.Counter(r["expected"] for r in task).most_common(1)[0]
    n_tokens = sum(len(x) for x in tr_ids)
    cut = sum(max(0, len(e.ids) + 1 - POSITIONS) for e in tok.encode_batch(train_sents))

    config = GPT2Config(
        vocab_size=len(vocab), n_positions=POSITIONS, n_embd=args.embd, n_layer=args.layers, n_head=args.heads,
        resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout, bos_token_id=EOS,
        eos_token_id=EOS, pad_token_id=None, tie_word_embeddings=True)
    model = GPT2LMHeadModel._from_config(config, attn_implementation="eager")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    rng = random.Random(args.seed)
    steps = (len(tr_ids) + args.batch_size - 1) // args.batch_size
    total = steps * args.epochs
    warmup = max(1, total // 20)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "wpe" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / (total - warmup))))
    print(f"{len(tr_ids)} training sentences ({n_tokens} tokens with <|endoftext|>; {cut} cut off at {POSITIONS}), "
          f"{len(va_ids)} validation, {len(ho_ids)} held out, {len(task)} task prompts; vocabulary {len(vocab)}; "
          f"{n_params} parameters; {total} steps", flush=True)

    def scores():
        valid, held = perplexity(model, va_ids), perplexity(model, ho_ids)
        pred = next_tokens(model, task_ids)
        right = sum(1 for (p, _), e in zip(pred, expected) if p == e)
        return valid, held, right

    t0, best, best_state, best_epoch, log = time.time(), float("inf"), None, 0, []
    dummy = [0] * len(tr_ids)
    for epoch in range(args.epochs):
        for idx in batches(tr_ids, dummy, args.batch_size, rng):
            x, m, y = collate(tr_ids, idx)
            loss = model(input_ids=x, attention_mask=m, labels=y).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        valid, held, right = scores()
        line = (f"epoch {epoch + 1}: validation loss {valid[0]:.4f} (perplexity {valid[1]:.2f}), held-out "
                f"perplexity {held[1]:.2f}, next-word accuracy {right}/{len(task)} ({100 * right / len(task):.1f}%) "
                f"({time.time() - t0:.0f} s)")
        print(line, flush=True)
        log.append(line)
        if valid[0] < best:
            best, best_epoch = valid[0], epoch + 1
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    train_time = time.time() - t0
    valid, held, right = scores()
    pred = next_tokens(model, task_ids)

    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", model_max_length=POSITIONS)
    fast.save_pretrained(args.out)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    cfg_path = os.path.join(args.out, "tokenizer_config.json")
    tok_cfg = json.load(open(cfg_path))
    tok_cfg.pop("backend", None)
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    with open(cfg_path, "w") as f:
        json.dump(tok_cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    for extra in ("special_tokens_map.json", "generation_config.json"):
        if os.path.exists(os.path.join(args.out, extra)):
            os.remove(os.path.join(args.out, extra))

    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    mean_p = sum(q for _, q in pred) / len(pred)
    report = f"""# austen-gpt2

A small GPT-2 trained from scratch on Jane Austen's six novels (Debian's r-cran-janeaustenr
1.0.0-1), one sentence per sequence, for bert-explain's "next word" task
(data/austen-next-word.jsonl: held-out sentences' beginnings and the word that follows).

    .venv-reference/bin/python scripts/train/austen_lm_data.py
    .venv-reference/bin/python scripts/train/austen_lm_train.py --threads {args.threads}

- data: {len(tr_ids)} training sentences ({n_tokens} tokens, <|endoftext|> included; {cut} tokens
  of long sentences cut off at {POSITIONS}), {len(va_ids)} validation sentences (sha256 ending in 3;
  they choose the epoch), {len(ho_ids)} held-out sentences (sha256 ending in 0, 1 or 2; only
  scored); held-out tokens that are [UNK]: {100 * held[2]:.1f}%
- tokenizer: word level, lower-cased, punctuation its own token; vocabulary {len(vocab)}
  ([UNK], <|endoftext|>, and the training tokens seen at least {austen_lm_data.MIN_COUNT} times)
- model: GPT2LMHeadModel, {args.layers} layers, {args.heads} heads, n_embd {args.embd}, {POSITIONS}
  positions, tied embeddings, dropout {args.dropout}; {n_params} parameters, model.safetensors
  {size} bytes
- training: seed {args.seed}, batches of {args.batch_size} sentences (length-bucketed), AdamW lr
  {args.lr} (5% warm-up, linear decay over {args.epochs} epochs), weight decay 0.01 (not on
  biases, LayerNorms or positions), gradient clipping 1, torch {torch.__version__},
  {args.threads} thread(s), {train_time:.0f} s; epoch {best_epoch} kept (lowest validation loss)

Perplexity is per predicted token (every token after a sentence's first, the closing
<|endoftext|> included, [UNK] counted as a token). Next-word accuracy: the greedy token after
each of the {len(task)} prompts of data/austen-next-word.jsonl equals `expected`.

{chr(10).join('    ' + l for l in log)}

Kept model: validation perplexity {valid[1]:.2f}, held-out perplexity {held[1]:.2f}, next-word
accuracy {right}/{len(task)} ({100 * right / len(task):.1f}%; mean probability of the greedy token
{mean_p:.3f}). Majority baseline (always "{majority_word}", the most frequent expected word):
{majority_n}/{len(task)} ({100 * majority_n / len(task):.1f}%).
"""
    open(os.path.join(args.out, "TRAINING.md"), "w").write(report)
    print(report)


def held_out_sentences():
    """The held-out sentences (austen_lm_data's split), rebuilt from the package."""
    return [s for _, s in austen_lm_data.austen_sentences() if austen_lm_data.held_out(s)]


if __name__ == "__main__":
    main()
