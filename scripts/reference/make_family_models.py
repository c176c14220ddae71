#!/usr/bin/env python3
"""Make the tiny test checkpoints of the encoder families (SPEC §7) under models/.

Deterministic (fixed seeds, tokenizers trained on the fixed corpus below), each folder < 2 MB,
written with transformers' save_pretrained (config.json with `architectures`, model.safetensors)
plus a tokenizer.json built with the tokenizers library and a tokenizer_config.json naming the
family's tokenizer class:

  tiny-roberta-mlm      RobertaForMaskedLM, byte-level BPE (Ġ pieces), <s> <pad> </s> <unk>,
                        <mask> added last (lstrip, as roberta-base), RoBERTa post-processor,
                        type_vocab_size 1, positions from padding_idx + 1 = 2
  tiny-roberta-cls      RobertaForSequenceClassification, 3 labels negative/neutral/positive
  tiny-xlmr-mlm         XLMRobertaForMaskedLM (model_type xlm-roberta), SentencePiece-style
                        Unigram (▁ pieces, Metaspace), cased, <mask> added last
  tiny-distilbert-mlm   DistilBertForMaskedLM, WordPiece (tiny-bert-modern's vocabulary)
  tiny-distilbert-cls   DistilBertForSequenceClassification, NEGATIVE/POSITIVE
  tiny-albert-mlm       AlbertForMaskedLM, embedding_size 16 < hidden 32, one shared layer,
                        lower-cased Unigram with <pad> <unk> [CLS] [SEP] [MASK] (as albert-base-v2)
  tiny-albert-cls       AlbertForSequenceClassification, 2 labels
  tiny-electra-mlm      ElectraForMaskedLM (the generator), embedding_size 16 < hidden 32
  tiny-electra-disc     ElectraForPreTraining (the discriminator)
  tiny-electra-cls      ElectraForSequenceClassification, 2 labels
  tiny-bert-cls         BertForSequenceClassification, 2 labels (also for text pairs)
  tiny-modernbert-*     ModernBERT's masked LM, classifier on [CLS] and on the mean
  tiny-deberta-mlm      DebertaV2ForMaskedLM, v3's layout (deberta_config), Unigram tokenizer.json
  tiny-deberta-v2-mlm   DebertaV2ForMaskedLM, v2's older layout, legacy head names
  tiny-deberta-cls      DebertaV2ForSequenceClassification, v3's layout, shipped as
                        microsoft/deberta-v3-base is: spm.model (tests/fixtures/spm/tiny) and
                        tokenizer_config.json, no tokenizer.json

All: hidden 32, 3 layers, 4 heads, intermediate 64, 64 usable positions, a few hundred vocabulary
entries. Weights are drawn with a wide spread (as make_tiny_models.py) so that attention is
peaked and the heads' probabilities are far from uniform.

Usage: make_family_models.py [--out models] [--only NAME[,NAME]]   (the reference venv's python)
"""

import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import make_tiny_models  # noqa: E402  (the WordPiece vocabulary of the tiny BERT models)

HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS, EMBEDDING = 32, 3, 4, 64, 64, 16

# The training corpus of the BPE and Unigram tokenizers: the fixture sentences and simple
# English around the same words, so that the words of the test sentences are single pieces.
SUBJECTS = ["The author", "The doctor", "She", "He", "John", "Mary", "Sara", "The teacher",
            "The student", "My mother", "His father", "Her sister", "The man", "The woman"]
VERBS = ["talked to", "asked", "wrote to", "told", "gave a book to", "brought flowers for",
         "tried to convince", "liked", "saw", "found"]
OBJECTS = ["Sara", "John", "Mary", "the doctor", "the author", "her friend", "his friend",
           "the children", "the teacher", "my brother"]
ENDINGS = ["about his book", "about her book", "about his love", "about her backache",
           "about his keys", "about her letter", "of his love", "of her love", "at home",
           "on the table", "in the city", "after the night", "before the day"]
EXTRA = """
The keys to the cabinet are on the table. The key to the cabinets is on the table.
The keys are here. The key is there. They are good. It is bad. We are happy. I am sad.
This film was great and the story was good. That book was bad and the words were boring.
The food is not good. The food is very good. What a wonderful day! What a terrible night.
I love this story. I hate this letter. It was fine, nothing more. Nobody liked the film.
Everyone loved the flowers. The water is cold. The room was small but the house was big.
A man is playing a guitar. A woman is reading a book. The children are sleeping.
Two dogs run in the park. A cat sleeps on the window. Nobody is here. Somebody is there.
"""


def corpus():
    lines = []
    for i, s in enumerate(SUBJECTS):
        for j, v in enumerate(VERBS):
            o = OBJECTS[(i + j) % len(OBJECTS)]
            e = ENDINGS[(i * 3 + j) % len(ENDINGS)]
            lines.append(f"{s} {v} {o} {e}.")
    lines += [s.strip() + "." for s in EXTRA.replace("!", ".").split(".") if s.strip()]
    return lines


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


# ---------------------------------------------------------------- tokenizers

def byte_level_bpe():
    """RoBERTa's tokenizer: byte-level BPE, <mask> added last with lstrip."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=560, min_frequency=1, show_progress=False,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    return tok


def unigram(specials, mask, lowercase, template, unk="<unk>"):
    """A SentencePiece-style Unigram tokenizer (▁ pieces, Metaspace): every corpus word as one
    piece scored by its log frequency, then suffixes and single characters as fallbacks
    ("backache" is left out so that it splits as ▁back + ache)."""
    import math
    import re
    from collections import Counter

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if lowercase:  # albert-base-v2: keep_accents false, do_lower_case true
        steps += [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()]
    steps += [normalizers.Replace(Regex(" {2,}"), " ")]
    normalizer = normalizers.Sequence(steps)
    counts = Counter()
    for line in corpus():
        counts.update(re.findall(r"\w+|[^\w\s]", normalizer.normalize_str(line)))
    counts.pop("backache", None)
    total = sum(counts.values())
    pieces = [(t, 0.0) for t in specials]
    pieces += [("▁" + w, math.log(c / total)) for w, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
    pieces += [(s, -9.0) for s in ("ache", "s", "ed", "ing", "er", "ly", "est", "ness")]
    pieces.append(("▁", -9.5))
    letters = "abcdefghijklmnopqrstuvwxyz" + ("" if lowercase else "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for c in letters + "0123456789" + ".,!?'\";:-()":
        pieces += [(c, -10.0), ("▁" + c, -10.5)]
    seen, vocab = set(), []
    for piece, score in pieces:
        if piece not in seen:
            seen.add(piece)
            vocab.append((piece, score))
    tok = Tokenizer(models.Unigram(vocab, unk_id=specials.index(unk), byte_fallback=False))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials if t != unk]
                           + [AddedToken(unk, normalized=False, special=True),
                              AddedToken(mask, lstrip=True, rstrip=False, normalized=False, special=True)])
    tok.post_processor = template(tok)
    return tok


def xlmr_template(tok):
    from tokenizers import processors

    ids = [("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))]
    return processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                         special_tokens=ids)


def bert_template(tok):
    from tokenizers import processors

    ids = [("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))]
    return processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0",
                                         pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=ids)


def wordpiece(vocab):
    """bert-base-uncased's tokenizer over the tiny BERT vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in make_tiny_models.SPECIAL])
    tok.post_processor = bert_template(tok)
    return tok


SPM = os.path.join(REPO, "tests", "fixtures", "spm", "tiny")


def spm_tokenizer():
    """deberta-v3's tokenizer as transformers' DebertaV2Tokenizer builds it from the tiny
    spm.model of tests/fixtures/spm/tiny (make_tiny_spm.py): its vocabulary, [MASK] after it."""
    from transformers import DebertaV2Tokenizer

    return DebertaV2Tokenizer.from_pretrained(SPM).backend_tokenizer


TOKENIZERS = {
    "bpe": lambda vocab: byte_level_bpe(),
    "xlmr": lambda vocab: unigram(["<s>", "<pad>", "</s>", "<unk>"], "<mask>", False, xlmr_template),
    "albert": lambda vocab: unigram(["<pad>", "<unk>", "[CLS]", "[SEP]"], "[MASK]", True, bert_template),
    "wordpiece": wordpiece,
    # DeBERTa-v3's layout: [PAD] [CLS] [SEP] [UNK] first, cased, [MASK] added last.
    "deberta": lambda vocab: unigram(["[PAD]", "[CLS]", "[SEP]", "[UNK]"], "[MASK]", False, bert_template,
                                     unk="[UNK]"),
    # As microsoft/deberta-v3-base ships it: spm.model and tokenizer_config.json, no tokenizer.json.
    "spm": lambda vocab: spm_tokenizer(),
}

# tokenizer_config.json per tokenizer kind: the class real checkpoints name, and the specials.
TOKENIZER_CONFIG = {
    "bpe": {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
            "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>", "add_prefix_space": False},
    "xlmr": {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
             "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"},
    "albert": {"bos_token": "[CLS]", "eos_token": "[SEP]", "sep_token": "[SEP]", "cls_token": "[CLS]",
               "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "[MASK]",
               "do_lower_case": True, "keep_accents": False},
    "wordpiece": {"sep_token": "[SEP]", "cls_token": "[CLS]", "unk_token": "[UNK]", "pad_token": "[PAD]",
                  "mask_token": "[MASK]", "do_lower_case": True},
    "deberta": {"bos_token": "[CLS]", "eos_token": "[SEP]", "sep_token": "[SEP]", "cls_token": "[CLS]",
                "unk_token": "[UNK]", "pad_token": "[PAD]", "mask_token": "[MASK]", "do_lower_case": False,
                "split_by_punct": False, "vocab_type": "spm"},
    "spm": {"do_lower_case": False, "split_by_punct": False, "vocab_type": "spm"},
}


# ---------------------------------------------------------------- models

def spread_init(model, generator):
    """Overwrite every parameter with a wide, deterministic random init (by module kind)."""
    with torch.no_grad():
        for _, module in sorted(model.named_modules(), key=lambda m: m[0]):
            params = dict(module.named_parameters(recurse=False))
            for name in sorted(params):
                p = params[name]
                if isinstance(module, torch.nn.LayerNorm):
                    value = 1.0 + 0.15 * torch.randn(p.shape, generator=generator) if name == "weight" \
                        else 0.1 * torch.randn(p.shape, generator=generator)
                elif isinstance(module, torch.nn.Embedding):
                    value = 0.5 * torch.randn(p.shape, generator=generator)
                elif name == "bias":
                    value = 0.2 * torch.randn(p.shape, generator=generator)
                else:
                    value = 0.45 * torch.randn(p.shape, generator=generator)
                p.copy_(value)


def common(vocab_size, pad_id):
    return dict(vocab_size=vocab_size, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, intermediate_size=INTERMEDIATE, pad_token_id=pad_id)


def labels(names):
    return {"id2label": {i: n for i, n in enumerate(names)},
            "label2id": {n: i for i, n in enumerate(names)}, "num_labels": len(names)}


def roberta_config(cls_name, vocab_size, tok, **extra):
    import transformers

    config_cls = getattr(transformers, cls_name)
    return config_cls(**common(vocab_size, tok.token_to_id("<pad>")),
                      bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
                      max_position_embeddings=POSITIONS + 2, type_vocab_size=1, layer_norm_eps=1e-5,
                      hidden_act="gelu", **extra)


def distilbert_config(vocab_size, tok, **extra):
    from transformers import DistilBertConfig

    return DistilBertConfig(vocab_size=vocab_size, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
                            hidden_dim=INTERMEDIATE, max_position_embeddings=POSITIONS, activation="gelu",
                            pad_token_id=tok.token_to_id("[PAD]"), **extra)


def albert_config(vocab_size, tok, **extra):
    from transformers import AlbertConfig

    return AlbertConfig(**common(vocab_size, tok.token_to_id("<pad>")), embedding_size=EMBEDDING,
                        num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new",
                        max_position_embeddings=POSITIONS, type_vocab_size=2,
                        bos_token_id=tok.token_to_id("[CLS]"), eos_token_id=tok.token_to_id("[SEP]"), **extra)


def electra_config(vocab_size, tok, **extra):
    from transformers import ElectraConfig

    return ElectraConfig(**common(vocab_size, tok.token_to_id("[PAD]")), embedding_size=EMBEDDING,
                         max_position_embeddings=POSITIONS, type_vocab_size=2, hidden_act="gelu", **extra)


def bert_config(vocab_size, tok, **extra):
    from transformers import BertConfig

    return BertConfig(**common(vocab_size, tok.token_to_id("[PAD]")), max_position_embeddings=POSITIONS,
                      type_vocab_size=2, hidden_act="gelu", **extra)


def modernbert_config(vocab_size, tok, **extra):
    """ModernBERT (issue 62): local layers whose window (local_attention 4: 2 tokens each side)
    is shorter than the test texts, global ones every second layer, bias-less LayerNorms."""
    from transformers import ModernBertConfig

    ids = {k: tok.token_to_id(t) for k, t in
           [("pad_token_id", "[PAD]"), ("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"),
            ("bos_token_id", "[CLS]"), ("eos_token_id", "[SEP]")]}
    return ModernBertConfig(**{**common(vocab_size, ids["pad_token_id"]), **ids},
                            max_position_embeddings=POSITIONS, local_attention=4,
                            global_attn_every_n_layers=2, hidden_activation="gelu", **extra)


def deberta_config(vocab_size, tok, v3=True, **extra):
    """DeBERTa (issue 62). v3's layout: relative attention only (no absolute positions), 8 log
    buckets (|δ| > 4 shares buckets, so the test texts reach them) up to 64 positions, c2p and
    p2c through the layer's own projections, the relative table normed, no token types.
    v2's older layout: absolute positions too, plain relative positions clamped at 6 (shorter
    than the texts), c2p|p2c as a string, projections of their own, token types, a factorised
    embedding (16 → 32), and the legacy masked-LM names."""
    from transformers import DebertaV2Config

    ids = {"pad_token_id": tok.token_to_id("[PAD]"), "bos_token_id": tok.token_to_id("[CLS]"),
           "eos_token_id": tok.token_to_id("[SEP]")}
    if v3:
        layout = dict(position_biased_input=False, position_buckets=8, max_relative_positions=POSITIONS,
                      pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm",
                      type_vocab_size=0, legacy=False)
    else:
        layout = dict(position_biased_input=True, max_relative_positions=6, pos_att_type="c2p|p2c",
                      share_att_key=False, norm_rel_ebd="none", type_vocab_size=2, embedding_size=EMBEDDING,
                      legacy=True)
    return DebertaV2Config(**{**common(vocab_size, ids["pad_token_id"]), **ids},
                           max_position_embeddings=POSITIONS, relative_attention=True, hidden_act="gelu",
                           layer_norm_eps=1e-7, pooler_hidden_act="gelu", **layout, **extra)


TWO = ["NEGATIVE", "POSITIVE"]
# name: (model class, tokenizer kind, tokenizer class, config maker, config extras, seed)
MODELS = {
    "tiny-roberta-mlm": ("RobertaForMaskedLM", "bpe", "RobertaTokenizer",
                         lambda v, t: roberta_config("RobertaConfig", v, t), 21),
    "tiny-roberta-cls": ("RobertaForSequenceClassification", "bpe", "RobertaTokenizer",
                         lambda v, t: roberta_config("RobertaConfig", v, t,
                                                     **labels(["negative", "neutral", "positive"])), 22),
    "tiny-xlmr-mlm": ("XLMRobertaForMaskedLM", "xlmr", "XLMRobertaTokenizer",
                      lambda v, t: roberta_config("XLMRobertaConfig", v, t), 23),
    "tiny-distilbert-mlm": ("DistilBertForMaskedLM", "wordpiece", "DistilBertTokenizer", distilbert_config, 24),
    "tiny-distilbert-cls": ("DistilBertForSequenceClassification", "wordpiece", "DistilBertTokenizer",
                            lambda v, t: distilbert_config(v, t, **labels(TWO)), 25),
    "tiny-albert-mlm": ("AlbertForMaskedLM", "albert", "AlbertTokenizer", albert_config, 26),
    "tiny-albert-cls": ("AlbertForSequenceClassification", "albert", "AlbertTokenizer",
                        lambda v, t: albert_config(v, t, **labels(["unacceptable", "acceptable"])), 27),
    "tiny-electra-mlm": ("ElectraForMaskedLM", "wordpiece", "ElectraTokenizer", electra_config, 28),
    "tiny-electra-disc": ("ElectraForPreTraining", "wordpiece", "ElectraTokenizer", electra_config, 29),
    "tiny-electra-cls": ("ElectraForSequenceClassification", "wordpiece", "ElectraTokenizer",
                         lambda v, t: electra_config(v, t, **labels(TWO)), 30),
    "tiny-bert-cls": ("BertForSequenceClassification", "wordpiece", "BertTokenizer",
                      lambda v, t: bert_config(v, t, **labels(["not_entailment", "entailment"])), 32),
    "tiny-modernbert-mlm": ("ModernBertForMaskedLM", "wordpiece", "PreTrainedTokenizerFast",
                            modernbert_config, 33),
    "tiny-modernbert-cls": ("ModernBertForSequenceClassification", "wordpiece",
                            "PreTrainedTokenizerFast",
                            lambda v, t: modernbert_config(v, t, **labels(["negative", "neutral", "positive"])),
                            34),
    "tiny-modernbert-mean": ("ModernBertForSequenceClassification", "wordpiece",
                             "PreTrainedTokenizerFast",
                             lambda v, t: modernbert_config(v, t, classifier_pooling="mean", **labels(TWO)),
                             35),
    "tiny-deberta-mlm": ("DebertaV2ForMaskedLM", "deberta", "DebertaV2Tokenizer", deberta_config, 36),
    "tiny-deberta-v2-mlm": ("DebertaV2ForMaskedLM", "deberta", "DebertaV2Tokenizer",
                            lambda v, t: deberta_config(v, t, v3=False), 37),
    "tiny-deberta-cls": ("DebertaV2ForSequenceClassification", "spm", "DebertaV2Tokenizer",
                         lambda v, t: deberta_config(v, t, **labels(["negative", "neutral", "positive"])), 38),
}


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def save_tokenizer(out, tok, kind, tokenizer_class, vocab):
    if kind == "spm":
        shutil.copy(os.path.join(SPM, "spm.model"), os.path.join(out, "spm.model"))
    else:
        tok.save(os.path.join(out, "tokenizer.json"))
    config = {"tokenizer_class": tokenizer_class, "model_max_length": POSITIONS, **TOKENIZER_CONFIG[kind]}
    write_json(os.path.join(out, "tokenizer_config.json"), config)
    if kind == "wordpiece":
        make_tiny_models.write_vocab(os.path.join(out, "vocab.txt"), vocab)


def make(name, out_root, tokenizers_cache, vocab):
    import transformers

    model_class, kind, tokenizer_class, make_config, seed = MODELS[name]
    if kind not in tokenizers_cache:
        tokenizers_cache[kind] = TOKENIZERS[kind](vocab)
    tok = tokenizers_cache[kind]
    config = make_config(tok.get_vocab_size(with_added_tokens=True), tok)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    spread_init(model, generator)
    model.tie_weights()  # the tied decoders follow the new word embeddings
    out = os.path.join(out_root, name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    model.save_pretrained(out)
    # save_pretrained records the eager attention it was built with; real checkpoints do not.
    with open(os.path.join(out, "config.json")) as f:
        saved = json.load(f)
    saved.pop("_attn_implementation", None)
    saved.pop("attn_implementation", None)
    write_json(os.path.join(out, "config.json"), saved)
    save_tokenizer(out, tok, kind, tokenizer_class, vocab)
    return model, out


def check(name, out, model, tok):
    """Reload with transformers: same outputs, tokenizer = tokenizers' tokenizer.json, peaked attention."""
    import transformers
    from tokenizers import Tokenizer

    model_class = MODELS[name][0]
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    raw = tok if MODELS[name][1] == "spm" else Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    mask = hf_tok.mask_token
    text = f"The author talked to Sara about {mask} book"
    pair = "She is a doctor"
    for args in ((text,), (text, pair)):
        enc = hf_tok(*args)
        want = raw.encode(*args)
        if enc["input_ids"] != want.ids:
            raise SystemExit(f"{name}: transformers' tokenizer and tokenizer.json disagree on {args}: "
                             f"{hf_tok.convert_ids_to_tokens(enc['input_ids'])} vs {want.tokens}")
    enc = hf_tok(text, return_tensors="pt")
    loaded, info = getattr(transformers, model_class).from_pretrained(
        out, attn_implementation="eager", output_loading_info=True, dtype=torch.float32)
    loaded.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys", "error_msgs")}
    if bad:
        raise SystemExit(f"{name}: loading problems: {bad}")
    with torch.no_grad():
        a = model(**enc, output_attentions=True)
        b = loaded(**enc, output_attentions=True)
    att = torch.stack(b.attentions)[:, 0]
    diff = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))
    logit_diff = (a.logits - b.logits).abs().max().item()
    tokens = hf_tok.convert_ids_to_tokens(enc["input_ids"][0])
    line = (f"{name}: {folder_size(out) / 1e6:.2f} MB, vocab {loaded.config.vocab_size}, tokens {tokens}, "
            f"reload diff attention {diff:.1e} logits {logit_diff:.1e}, "
            f"max attention per row {att.max(-1).values.mean():.3f}")
    logits = b.logits[0]
    if model_class.endswith("MaskedLM"):
        t = tokens.index(mask)
        p = torch.softmax(logits[t], -1)
        top = torch.topk(p, 3)
        line += ", top at mask " + ", ".join(f"{hf_tok.convert_ids_to_tokens(int(i))}={float(v):.3f}"
                                             for v, i in zip(top.values, top.indices))
    elif model_class.endswith("ForPreTraining"):
        line += f", p(replaced) {[round(float(x), 3) for x in torch.sigmoid(logits)]}"
    else:
        line += f", labels {[round(float(x), 3) for x in torch.softmax(logits, -1)]}"
    print(line, file=sys.stderr)
    assert diff < 1e-6 and logit_diff < 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models"), help="parent folder (default: <repo>/models)")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    args = ap.parse_args()
    names = list(MODELS) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(names) - set(MODELS)
    if unknown:
        sys.exit(f"unknown model(s) {sorted(unknown)}; known: {list(MODELS)}")
    torch.set_grad_enabled(False)
    vocab = make_tiny_models.build_vocab()
    cache = {}
    for name in names:
        model, out = make(name, args.out, cache, vocab)
        size = folder_size(out)
        if size >= 2_000_000:
            raise SystemExit(f"{name} is {size} bytes, over 2 MB")
        check(name, out, model, cache[MODELS[name][1]])


if __name__ == "__main__":
    main()
