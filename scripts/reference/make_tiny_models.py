#!/usr/bin/env python3
"""Make the tiny BERT test checkpoints under models/ (deterministic, each folder < 2 MB).

  models/tiny-bert-legacy/   bert-base-uncased naming: pytorch_model.bin (torch.save of a state
                             dict), `bert.` prefix, LayerNorm.gamma/beta, cls.predictions.bias,
                             no decoder weight (tied to the word embeddings) and no decoder bias,
                             plus the pooler / NSP tensors bert-base-uncased also carries.
                             Tokenizer: vocab.txt + tokenizer_config.json only.
  models/tiny-bert-modern/   modern naming (LayerNorm.weight/bias), model.safetensors,
                             tie_word_embeddings false with its own decoder weight, both
                             cls.predictions.bias and cls.predictions.decoder.bias (equal).
                             Tokenizer: tokenizer.json + vocab.txt.
  models/tiny-bert-encoder/  encoder-only BertModel (no MLM head, no `bert.` prefix),
                             model.safetensors, tokenizer.json that pads to 64 and truncates at
                             64 (as MiniLM's pads/truncates at 128); no vocab.txt.

The weights are drawn with a much larger spread than BERT's std 0.02 init so that attention is
clearly peaked and the MLM distribution is far from uniform (a stronger test).

Usage: make_tiny_models.py [--out models]   (run with the reference venv's python)
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = list(".,!?'\";:-()[]/&%$#@*+=<>")
DIGITS = list("0123456789")
# Every word of the fixture sentences, then common English words. "backache" is deliberately
# absent: it must tokenize as back ##ache.
WORDS = """
the author talked to sara about book she asked doctor he her his john tried convince mary of
love and brought flowers for convinced keys cabinet is are on table a back
an it its they them their we us our you your i me my him hers this that these those there
here who what when where why how which was were be been being has have had do does did not
no yes in at with from by into over under after before up down out off than then so but or
if as all some any one two three many more most other new old good bad great small big long
little first last same own said says say went go goes came come made make saw see gave give
took take wanted want liked like read wrote write told tell thought think knew know found
find put left felt asked talk talks book books letter story name word words friend friends
mother father sister brother son daughter teacher student students school house home room
door window car dog cat man woman men women boy girl people child children day night time
year years week city world water food money work job life hand head eye eyes face place
key cabinets tables flower doctors authors
""".split()
SUFFIXES = ["##s", "##es", "##ed", "##ing", "##er", "##ers", "##ly", "##est", "##ache",
            "##y", "##ion", "##ment", "##ness", "##ful", "##less", "##able", "##ity", "##al"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]


def build_vocab():
    vocab = []
    for tok in SPECIAL + PUNCT + DIGITS + WORDS + SUFFIXES + LETTERS + ["##" + c for c in LETTERS]:
        if tok not in vocab:
            vocab.append(tok)
    assert "backache" not in vocab and "back" in vocab and "##ache" in vocab
    assert vocab[:5] == SPECIAL
    return vocab


def base_config(vocab_size):
    # Shaped like bert-base-uncased's config.json, with tiny sizes.
    return {
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64,
        "model_type": "bert",
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def spread_init(named, generator, skip=()):
    """Overwrite parameters in place with a wide, deterministic random init."""
    with torch.no_grad():
        for name, p in named:
            if name in skip:
                continue
            if "LayerNorm" in name and name.endswith(("weight", "gamma")):
                p.copy_(1.0 + 0.15 * torch.randn(p.shape, generator=generator))
            elif "LayerNorm" in name and name.endswith(("bias", "beta")):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif "embeddings" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.45 * torch.randn(p.shape, generator=generator))


def eager(config):
    """Eager attention: the only implementation that returns attention probabilities."""
    config._attn_implementation = "eager"
    return config


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def write_vocab(path, vocab):
    with open(path, "w") as f:
        f.write("\n".join(vocab) + "\n")


def make_fast_tokenizer(vocab_path):
    """A tokenizers-backed BERT tokenizer over vocab.txt (saves tokenizer.json)."""
    import inspect

    from transformers import BertTokenizerFast

    params = inspect.signature(BertTokenizerFast.__init__).parameters
    if "vocab" in params:  # transformers >= 5
        with open(vocab_path) as f:
            vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        tok = BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=64)
    else:  # transformers 4
        tok = BertTokenizerFast(vocab_file=vocab_path, do_lower_case=True, model_max_length=64)
    probe = tok("backache book")["input_ids"]
    assert tok.convert_ids_to_tokens(probe) == ["[CLS]", "back", "##ache", "book", "[SEP]"], probe
    return tok


def legacy_state_dict(model, generator):
    """bert-base-uncased naming from a tied BertForMaskedLM."""
    sd = {}
    for k, v in model.state_dict().items():
        if k in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
            continue  # tied to bert.embeddings.word_embeddings.weight / cls.predictions.bias
        if k.endswith("position_ids") or k.endswith("token_type_ids"):
            continue  # buffers, not in the original checkpoint
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        sd[k] = v.detach().clone().contiguous()
    assert "cls.predictions.bias" in sd
    # bert-base-uncased also carries the pooler and the next-sentence head; BertForMaskedLM
    # ignores them. Keep them so that loaders learn to skip unused tensors.
    h = model.config.hidden_size
    sd["bert.pooler.dense.weight"] = 0.35 * torch.randn((h, h), generator=generator)
    sd["bert.pooler.dense.bias"] = 0.2 * torch.randn((h,), generator=generator)
    sd["cls.seq_relationship.weight"] = 0.35 * torch.randn((2, h), generator=generator)
    sd["cls.seq_relationship.bias"] = 0.2 * torch.randn((2,), generator=generator)
    return sd


def make_legacy(out, vocab, vocab_path, seed):
    from transformers import BertConfig, BertForMaskedLM

    cfg = base_config(len(vocab))
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = BertForMaskedLM(eager(BertConfig(**cfg))).eval()
    spread_init(model.named_parameters(), g)
    emb = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight.data_ptr() == emb.data_ptr(), "decoder not tied"
    sd = legacy_state_dict(model, g)
    write_json(os.path.join(out, "config.json"), cfg)
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    shutil.copy(vocab_path, os.path.join(out, "vocab.txt"))
    write_json(os.path.join(out, "tokenizer_config.json"), {"do_lower_case": True})
    return model


def make_modern(out, vocab, vocab_path, seed):
    from transformers import BertConfig, BertForMaskedLM

    cfg = base_config(len(vocab))
    cfg["tie_word_embeddings"] = False
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = BertForMaskedLM(eager(BertConfig(**cfg))).eval()
    emb = model.bert.embeddings.word_embeddings.weight
    dec = model.cls.predictions.decoder.weight
    assert dec.data_ptr() != emb.data_ptr(), "decoder unexpectedly tied"
    spread_init(model.named_parameters(), g)
    assert not torch.equal(dec, emb)
    # Without tying, transformers 5 keeps cls.predictions.decoder.bias as its own parameter
    # (the one the forward pass uses); make the two biases equal, as in a real checkpoint.
    with torch.no_grad():
        if model.cls.predictions.decoder.bias.data_ptr() != model.cls.predictions.bias.data_ptr():
            model.cls.predictions.decoder.bias.copy_(model.cls.predictions.bias)
    sd = {}
    for k, v in model.state_dict().items():
        if k.endswith("position_ids") or k.endswith("token_type_ids"):
            continue
        sd[k] = v.detach().clone().contiguous()  # clone: no shared storage in the file
    if "cls.predictions.decoder.bias" not in sd:
        sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"].clone()
    if "cls.predictions.bias" not in sd:
        sd["cls.predictions.bias"] = sd["cls.predictions.decoder.bias"].clone()
    assert torch.equal(sd["cls.predictions.bias"], sd["cls.predictions.decoder.bias"])
    assert "cls.predictions.decoder.weight" in sd
    write_json(os.path.join(out, "config.json"), cfg)
    save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    tok = make_fast_tokenizer(vocab_path)
    tok.save_pretrained(out)
    shutil.copy(vocab_path, os.path.join(out, "vocab.txt"))
    return model


def make_encoder(out, vocab, vocab_path, seed):
    from transformers import BertConfig, BertModel

    cfg = base_config(len(vocab))
    cfg["architectures"] = ["BertModel"]
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = BertModel(eager(BertConfig(**cfg))).eval()  # with pooler, like MiniLM
    spread_init(model.named_parameters(), g)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
          if not (k.endswith("position_ids") or k.endswith("token_type_ids"))}
    assert not any(k.startswith(("bert.", "cls.")) for k in sd)
    # MiniLM's file also stores the int64 position_ids buffer; do the same.
    sd["embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"], dtype=torch.int64)[None, :]
    write_json(os.path.join(out, "config.json"), cfg)
    save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    tok = make_fast_tokenizer(vocab_path)
    backend = tok.backend_tokenizer
    backend.enable_padding(length=64, pad_id=0, pad_type_id=0, pad_token="[PAD]", direction="right")
    backend.enable_truncation(max_length=64)
    tok.save_pretrained(out)
    for extra in ("vocab.txt",):
        path = os.path.join(out, extra)
        if os.path.exists(path):
            os.remove(path)  # this folder exercises the tokenizer.json-only path
    with open(os.path.join(out, "tokenizer.json")) as f:
        tj = json.load(f)
    # Make sure the settings really are in the file, in MiniLM's shape.
    tj["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None,
                     "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}
    tj["truncation"] = {"direction": "Right", "max_length": 64, "strategy": "LongestFirst", "stride": 0}
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tj, f, indent=2, ensure_ascii=False)
    return model


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def check(name, out, model, has_head):
    """Reload the folder with transformers and compare with the in-memory model."""
    from transformers import AutoTokenizer, BertForMaskedLM, BertModel

    tok = AutoTokenizer.from_pretrained(out)
    text = "The author talked to Sara about [MASK] book" if has_head else "She asked the doctor about her backache"
    enc = tok(text, return_tensors="pt", padding=False, truncation=False)
    ids = enc["input_ids"]
    toks = tok.convert_ids_to_tokens(ids[0])
    cls = BertForMaskedLM if has_head else BertModel
    loaded, info = cls.from_pretrained(out, attn_implementation="eager", output_loading_info=True,
                                       dtype=torch.float32)
    loaded.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys", "error_msgs")}
    if bad:
        raise SystemExit(f"{name}: loading problems: {bad}")
    with torch.no_grad():
        a = model(**enc, output_attentions=True)
        b = loaded(**enc, output_attentions=True)
    att = torch.stack(b.attentions)[:, 0]  # L, H, n, n
    diff = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))
    row_max = att.max(-1).values
    line = (f"{name}: {folder_size(out) / 1e6:.2f} MB, tokens {toks}, attention reload diff {diff:.2e}, "
            f"max attention per row: mean {row_max.mean():.3f} min {row_max.min():.3f}, "
            f"head-mean max per row: mean {att.mean(1).max(-1).values.mean():.3f}")
    if has_head:
        t = toks.index("[MASK]")
        pa = torch.softmax(a.logits[0, t], -1)
        pb = torch.softmax(b.logits[0, t], -1)
        top = torch.topk(pb, 5)
        line += (f", logits reload diff {(a.logits - b.logits).abs().max():.2e}, top-5 at mask: "
                 + ", ".join(f"{tok.convert_ids_to_tokens(int(i))}={float(p):.3f}" for p, i in zip(top.values, top.indices))
                 + f" (uniform would be {1 / len(pb):.4f}); p(his)={float(pb[tok.convert_tokens_to_ids('his')]):.4f}"
                 f" p(her)={float(pb[tok.convert_tokens_to_ids('her')]):.4f}")
        assert torch.allclose(pa, pb, atol=1e-6)
    print(line, file=sys.stderr)
    assert diff < 1e-6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models"), help="parent folder (default: <repo>/models)")
    args = ap.parse_args()

    vocab = build_vocab()
    print(f"vocab: {len(vocab)} entries; his={vocab.index('his')} her={vocab.index('her')} "
          f"is={vocab.index('is')} are={vocab.index('are')}", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        vocab_path = os.path.join(tmp, "vocab.txt")
        write_vocab(vocab_path, vocab)
        makers = [("tiny-bert-legacy", make_legacy, 11, True),
                  ("tiny-bert-modern", make_modern, 12, True),
                  ("tiny-bert-encoder", make_encoder, 13, False)]
        for name, maker, seed, has_head in makers:
            out = os.path.join(args.out, name)
            if os.path.isdir(out):
                shutil.rmtree(out)
            os.makedirs(out)
            model = maker(out, vocab, vocab_path, seed)
            files = sorted(os.listdir(out))
            print(f"{name}: wrote {files}", file=sys.stderr)
            size = folder_size(out)
            if size >= 2_000_000:
                raise SystemExit(f"{name} is {size} bytes, over 2 MB")
            check(name, out, model, has_head)


if __name__ == "__main__":
    main()
