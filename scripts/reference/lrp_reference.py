#!/usr/bin/env python3
"""Reference relevances for AttnLRP and CP-LRP, computed with the authors' library LXT 2.1.

What it computes
----------------
For each case below, the relevance of every input token for one output logit, with LXT's
"efficient" mode: the model's modules are monkey-patched with LXT's rules (which change the
backward pass only), and relevance is Gradient x Input at the word embeddings,

    emb = model.get_input_embeddings()(ids)            (a leaf tensor; Gemma3's is scaled)
    R_j = sum_d emb[j, d] * d logit / d emb[j, d]

(ALBERT, ELECTRA and DeBERTa-v2 with embedding_size: the factorised lookup, before the
projection. Gemma and Gemma 2 in 4.52.4 scale inputs_embeds by sqrt(hidden) inside the model;
R is the same at the scaled or the unscaled lookup, the scale being linear.)
where logit is the explained one: the top word at the [MASK] (or given) position of a masked LM,
the top label of a classifier, the greedy next token at the last position of a causal LM, the
"replaced" logit d at a given position of ELECTRA's discriminator (kind "discriminator": its
labels (original, replaced) read as logits (0, d), as bert-explain reads them; the positions
are chosen with d > 0).
The relevance that does not reach the word embeddings went to the biases, the position and
token-type embeddings (and, for AttnLRP, the softmax), so sum(R) is not the logit in general
(CP-LRP on the bias-free Llama, Qwen3 and Gemma3 checkpoints conserves it to rounding); both
are written so conservation can be inspected.

Rule sets (the patch maps of lxt.efficient.models.<family>):

  attnlrp   LXT's `attnLRP` map of the family: LayerNorm/RMSNorm with the normaliser detached
            (identity rule), identity rule on element-wise activations (GELU, tanh pooler,
            SiLU gate), uniform rule (gradient / 2) on the gated MLP's product and on both
            attention products (q, k gradient / 4, v / 2).
  cp_lrp    LXT's `cp_LRP` map (llama, qwen2, qwen3, gemma3, gpt2): query and key detached, so
            no relevance flows through the softmax, and no uniform rule in attention; the gated
            MLP's gate (activation included) detached and its product not divided; norms and
            GPT-2's MLP as in attnLRP. LXT 2.1 has no cp_LRP map for BERT: BERT's is attnLRP's
            with BertSelfAttention.forward replaced by one that detaches q and k and divides
            nothing (the rule of lxt.efficient.patches.cp_wrap_attention_forward).

The families LXT 2.1 has no map for get the same rules, applied to their transformers 4.52.4
modules as LXT's maps apply them (ENCODER_FAMILIES, DECODER_FAMILIES; each fixture's
"attnlrp_rules" and "cp_lrp_rules" say how, one line each, RULE_NOTES):

  encoders  RoBERTa, XLM-R, ELECTRA (attention line for line BERT's: LXT's own patched
            BertSelfAttention.forward, or BERT's CP one above), ALBERT, DistilBERT (their
            attention forwards written here with the same two rules), DeBERTa-v2 (only the
            content-to-content q.k^T is a product of two activations: c2p and p2c are linear
            in q or k, the relative embeddings being parameters, so AttnLRP halves only that
            term's gradient and A.v's; CP-LRP detaches the attention probabilities), ModernBERT
            (its eager attention wrapped as LXT wraps transformers' eager attention; its GeGLU
            as LXT's gated MLP, act(input) being the gate). Every LayerNorm as LXT's bert map;
            the identity rule on every activation class (LXT's non_linear_forward, as its
            vit_torch map patches nn.GELU) and on the classification heads' torch.tanh.
  decoders  Mistral, Phi-3, Gemma, Gemma 2: LXT's llama map (Gemma: gemma3's RMSNorm patch) on
            the family's classes, Phi-3's fused gate_up MLP as the gated one; Gemma 2's soft
            caps c.tanh(x/c) (attention scores, final logits) with the identity rule.

Cases (written to tests/fixtures/lrp/<name>.json):

  masked_lm   tiny-bert-legacy / tiny-bert-modern on the texts of tests/fixtures/cases.json
              (BERT: attnlrp = lxt bert.attnLRP, cp_lrp = the BERT variant above)
  classifier  tiny-bert-cls (BertForSequenceClassification, pooler tanh -> identity rule);
              tiny-{llama,qwen2,qwen3,gemma3}-cls (XxxForSequenceClassification, last token)
  causal_lm   tiny-{gpt2,llama,qwen2,qwen3,gemma3}, next token after the prompt; ids as the
              tokenizer gives them (tiny-llama's adds its BOS, the others add nothing)
  and for the families above: NEW_MASKED_LM_TEXTS, NEW_CLASSIFIER_TEXTS (encoders read the
  first token, ModernBERT's "mean" head pools all; decoders the last), NEW_CAUSAL_MODELS
  (tiny-qwen2-window: 5.x's per-layer sliding windows), DISCRIMINATOR_CASES; FIXED_TOKENS
  holds tiny-deberta-cls's ids (5.x's), which 4.52.4 cannot read without sentencepiece.

Every relevance is computed in float64 (model.double(), float64 embeddings) and once more in
float32; "float32_gap" is max|R64 - R32| / max|R64| (information only). transformers 4.52.4
(and LXT's rms_norm_forward) compute RMSNorm, the eager softmax and the rotary tables of the
Llama-like families (and ModernBERT's softmax and rotary tables, DeBERTa's score scale) in
float32 even in a float64 model; for the float64 run those are replaced by the same formulas
in float64 (float64_eager, float64_norms_and_rotary, modernbert_eager64, deberta_scale64;
LXT's rules unchanged), so every float64 value is float64 throughout. The float32 run is LXT
and transformers as they are.

The checkpoints were written by transformers 5.x; see load_config for what 4.52.4 needs to read
them as 5.x does (rope_parameters, per-layer sliding windows, Gemma3's classifier, Phi-3's
longrope, ModernBERT's two thetas, DeBERTa-v2's untied non-legacy MLM head).

Checks (a failure stops the run):
  * every rule set's forward logits equal the unpatched model's (max abs diff <= 1e-6);
  * unpatched Gradient x Input differs from AttnLRP (by > 1e-2 of max |R|; printed);
  * BERT (every BERT case): AttnLRP and CP-LRP recomputed by an independent float64 BERT
    written here from the state dict (hand_bert_relevance) agree with LXT's to 1e-9;
  * Llama-like families, ModernBERT, DeBERTa-v2: the float64 relevances with transformers'
    float32 casts left in place are within 1e-5 (relative) of the float64-throughout ones
    (~5e-7: rounding only);
  * every tensor of 4.52.4's class is in the checkpoint, with its shape (none initialised);
  * if .venv-reference (transformers 5.x) exists: its tokenization of every case is the one
    used here, and its float64 logits equal these (with the same float32 casts) to 1e-9, i.e.
    4.52.4 reads the 5.x checkpoints as 5.x does. Two float32 roundings 5.x has and 4.52.4 has
    not are taken out of 5.x for this: ModernBERT's RoPE on float32 q and k, Gemma's
    embedding scale √hidden as a float32 buffer (both ~1e-7 relative).

Usage (from the repo root; scripts/reference/setup.sh lxt makes the env):

    .venv-lxt/bin/python scripts/reference/lrp_reference.py            # every fixture
    .venv-lxt/bin/python scripts/reference/lrp_reference.py --only NAME[,NAME]
    .venv-lxt/bin/python scripts/reference/lrp_reference.py --no-v5-check

monkey_patch is global and irreversible, so each (model, rule set) runs in its own subprocess
of this script (--worker); the parent assembles and checks the fixtures.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(REPO, "models")
OUT = os.path.join(REPO, "tests", "fixtures", "lrp")
# --real: the real pretrained checkpoints the test set-up fetches (models/downloaded/), whose
# fixtures go apart so that only the tests that fetch them read them.
REAL_OUT = os.path.join(REPO, "tests", "fixtures", "lrp-real")
REAL_CLASSIFIER_TEXTS = {
    # all-MiniLM-L6-v2's real weights with the sentiment head trained here
    # (scripts/build-sentiment-model.py): a BertForSequenceClassification, LXT's own BERT map.
    "downloaded/minilm-fine-foods": {
        "minilm-sentiment-gummies": "These are the best tasting gummy fruits I have ever eaten. "
                                    "Can't stop eating them and the flavors are great.",
        "minilm-sentiment-bad": "This tastes so bad, I'm considering throwing it away.",
    },
}
V5_PYTHON = os.path.join(REPO, ".venv-reference", "bin", "python")

RULE_SETS = ("plain", "attnlrp", "cp_lrp")  # plain: no patches (checks only)
BERT_CP_RULES = ("LXT 2.1 has no cp_LRP map for BERT: attnLRP's with q and k detached and no "
                 "uniform rule in attention (patches.cp_wrap_attention_forward's rule)")
FORWARD_TOLERANCE = 1e-6  # patched vs unpatched logits
HAND_TOLERANCE = 1e-9     # LXT vs the hand BERT, relative to max |R|
ISLANDS_TOLERANCE = 1e-5  # float64 with vs without transformers' float32 casts, relative
V5_TOLERANCE = 1e-9       # 4.52.4 vs 5.x float64 logits (both with transformers' casts)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

CLASSIFIER_TEXTS = {
    "tiny-bert-cls": {
        "bert-cls-film": "The film was a delight from start to finish.",
        "bert-cls-plot": "A dull, lifeless plot.",
        "bert-cls-author": "The author talked to Sara about his book",
    },
    "tiny-llama-cls": {"llama-cls-film": "This film was great and the story was good.",
                       "llama-cls-story": "The story was good."},
    "tiny-qwen2-cls": {"qwen2-cls-food": "The food is not good.",
                       "qwen2-cls-story": "The story was good."},
    "tiny-qwen3-cls": {"qwen3-cls-room": "The room was clean but the night was loud.",
                       "qwen3-cls-story": "The story was good."},
    "tiny-gemma3-cls": {"gemma3-cls-food": "The food is not good.",
                        "gemma3-cls-story": "The story was good."},
}
CAUSAL_MODELS = ("tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3")
PROMPTS = {"author": "The author talked to Sara about",
           "river": "The river runs through the valley and the town"}

# The families LXT 2.1 has no map for, with LXT's rules applied as its maps apply them (see
# ENCODER_FAMILIES, DECODER_FAMILIES). {mask} is the model's mask token.
MASKED = {"author": "The author talked to Sara about {mask} book",
          "river": "The river runs through the {mask} and the town"}
NEW_MASKED_LM_TEXTS = {
    "tiny-roberta-mlm": {"roberta-mlm-author": MASKED["author"],
                         "roberta-mlm-river": MASKED["river"]},
    "tiny-xlmr-mlm": {"xlmr-mlm-author": MASKED["author"]},
    "tiny-albert-mlm": {"albert-mlm-author": MASKED["author"]},
    "tiny-distilbert-mlm": {"distilbert-mlm-author": MASKED["author"]},
    "tiny-electra-mlm": {"electra-mlm-author": MASKED["author"]},
    "tiny-deberta-mlm": {"deberta-mlm-author": MASKED["author"],
                         "deberta-mlm-river": MASKED["river"]},
    "tiny-deberta-v2-mlm": {"deberta-v2-mlm-author": MASKED["author"]},
    "tiny-modernbert-mlm": {"modernbert-mlm-author": MASKED["author"],
                            "modernbert-mlm-river": MASKED["river"]},
}
NEW_CLASSIFIER_TEXTS = {
    "tiny-roberta-cls": {"roberta-cls-film": "The film was a delight from start to finish.",
                         "roberta-cls-story": "The story was good."},
    "tiny-albert-cls": {"albert-cls-film": "The film was a delight from start to finish.",
                        "albert-cls-story": "The story was good."},
    "tiny-distilbert-cls": {"distilbert-cls-film": "The film was a delight from start to finish.",
                            "distilbert-cls-story": "The story was good."},
    "tiny-electra-cls": {"electra-cls-film": "The film was a delight from start to finish.",
                         "electra-cls-story": "The story was good."},
    "tiny-deberta-cls": {"deberta-cls-film": "The film was a delight from start to finish.",
                         "deberta-cls-story": "The story was good."},
    "tiny-modernbert-cls": {"modernbert-cls-film": "The film was a delight from start to finish.",
                            "modernbert-cls-story": "The story was good."},
    "tiny-modernbert-mean": {"modernbert-mean-film": "The film was a delight from start to finish.",
                             "modernbert-mean-story": "The story was good."},
    "tiny-mistral-cls": {"mistral-cls-food": "The food is not good.",
                         "mistral-cls-story": "The story was good."},
    # Phi-3's longrope: short factors up to original_max_position_embeddings (8) tokens, long
    # factors beyond: the author prompt has 8 tokens, the river text 21 (the causal ones too)
    "tiny-phi3-cls": {"phi3-cls-author": PROMPTS["author"],
                      "phi3-cls-river": PROMPTS["river"]},
    "tiny-gemma-cls": {"gemma-cls-food": "The food is not good.",
                       "gemma-cls-story": "The story was good."},
    "tiny-gemma2-cls": {"gemma2-cls-food": "The food is not good.",
                        "gemma2-cls-story": "The story was good."},
}
NEW_CAUSAL_MODELS = ("tiny-mistral", "tiny-phi3", "tiny-gemma", "tiny-gemma2", "tiny-qwen2-window")
# ELECTRA's discriminator: the logit d of "replaced" at one position, read as the two labels
# (original, replaced) with logits (0, d) as bert-explain does; each position below has d > 0,
# so the top label is "replaced" and the explained logit is d.
DISCRIMINATOR_CASES = {
    # position 7: "his"
    "tiny-electra-disc": {"electra-disc-author": ("The author talked to Sara about his book", 7)},
}
# Token ids where transformers 4.52.4 cannot tokenize without a package LXT's env lacks:
# tiny-deberta-cls has only spm.model, which 4.52.4 reads with sentencepiece (or converts with
# protobuf). These are transformers 5.x's (the v5 check compares them with 5.x's own).
FIXED_TOKENS = {
    "deberta-cls-film": (
        [1, 264, 1389, 351, 263, 388, 298, 835, 357, 862, 269, 352, 299, 935, 266, 2],
        ["[CLS]", "▁The", "▁film", "▁was", "▁a", "▁de", "l", "ight", "▁from", "▁start", "▁to",
         "▁f", "in", "ish", ".", "[SEP]"]),
    "deberta-cls-story": (
        [1, 264, 325, 631, 519, 351, 422, 266, 2],
        ["[CLS]", "▁The", "▁s", "to", "ry", "▁was", "▁good", ".", "[SEP]"]),
}


def all_cases():
    """Every case as {name, model, kind, text, target}; target None: the default position."""
    cases = []
    with open(os.path.join(REPO, "tests", "fixtures", "cases.json")) as f:
        for c in json.load(f):
            if c["model"] in ("tiny-bert-legacy", "tiny-bert-modern"):
                cases.append(dict(name=c["name"], model=c["model"], kind="masked_lm",
                                  text=c["text"], target=c["target"]))
    for model, texts in NEW_MASKED_LM_TEXTS.items():
        mask = mask_token(model)
        for name, text in texts.items():
            cases.append(dict(name=name, model=model, kind="masked_lm",
                              text=text.format(mask=mask), target=None))
    for model, texts in (CLASSIFIER_TEXTS | NEW_CLASSIFIER_TEXTS).items():
        for name, text in texts.items():
            cases.append(dict(name=name, model=model, kind="classifier", text=text, target=None))
    for model in CAUSAL_MODELS + NEW_CAUSAL_MODELS:
        for key, prompt in PROMPTS.items():
            cases.append(dict(name=f"{model.removeprefix('tiny-')}-{key}", model=model,
                              kind="causal_lm", text=prompt, target=None))
    for model, texts in DISCRIMINATOR_CASES.items():
        for name, (text, target) in texts.items():
            cases.append(dict(name=name, model=model, kind="discriminator", text=text,
                              target=target))
    for case in cases:
        if case["name"] in FIXED_TOKENS:
            case["ids"], case["tokens"] = FIXED_TOKENS[case["name"]]
    return cases


def real_cases():
    """The real pretrained checkpoints' cases (--real)."""
    return [dict(name=name, model=model, kind="classifier", text=text, target=None)
            for model, texts in REAL_CLASSIFIER_TEXTS.items() for name, text in texts.items()]


def mask_token(model):
    """The mask token of models/<model>'s tokenizer, from its tokenizer_config.json."""
    with open(os.path.join(MODELS, model, "tokenizer_config.json")) as f:
        return json.load(f)["mask_token"]


# --------------------------------------------------------------------------------------------
# Loading transformers 5.x checkpoints with transformers 4.52.4 (worker side)
# --------------------------------------------------------------------------------------------

# config.json's model_type -> (transformers module, LXT module: None where LXT 2.1 has no map)
FAMILIES = {
    "bert": ("transformers.models.bert.modeling_bert", "lxt.efficient.models.bert"),
    "gpt2": ("transformers.models.gpt2.modeling_gpt2", "lxt.efficient.models.gpt2"),
    "llama": ("transformers.models.llama.modeling_llama", "lxt.efficient.models.llama"),
    "qwen2": ("transformers.models.qwen2.modeling_qwen2", "lxt.efficient.models.qwen2"),
    "qwen3": ("transformers.models.qwen3.modeling_qwen3", "lxt.efficient.models.qwen3"),
    "gemma3_text": ("transformers.models.gemma3.modeling_gemma3", "lxt.efficient.models.gemma3"),
    "roberta": ("transformers.models.roberta.modeling_roberta", None),
    "xlm-roberta": ("transformers.models.xlm_roberta.modeling_xlm_roberta", None),
    "electra": ("transformers.models.electra.modeling_electra", None),
    "albert": ("transformers.models.albert.modeling_albert", None),
    "distilbert": ("transformers.models.distilbert.modeling_distilbert", None),
    "deberta-v2": ("transformers.models.deberta_v2.modeling_deberta_v2", None),
    "modernbert": ("transformers.models.modernbert.modeling_modernbert", None),
    "mistral": ("transformers.models.mistral.modeling_mistral", None),
    "phi3": ("transformers.models.phi3.modeling_phi3", None),
    "gemma": ("transformers.models.gemma.modeling_gemma", None),
    "gemma2": ("transformers.models.gemma2.modeling_gemma2", None),
}


def read_config_json(model):
    with open(os.path.join(MODELS, model, "config.json")) as f:
        return json.load(f)


def load_config(model, config_class):
    """The model's config as transformers 4.52.4 must see it to compute what 5.x computes.

    5.x writes `rope_parameters` (per layer type for Gemma3 and ModernBERT) where 4.52.4 reads
    `rope_theta`, `rope_scaling` and Gemma3's `rope_local_base_freq` (ModernBERT's
    `global_rope_theta` and `local_rope_theta`; Phi-3's longrope: `rope_scaling` with exactly
    type, short_factor and long_factor, `partial_rotary_factor` beside it); without them 4.52.4
    silently uses its defaults. 5.x's `layer_types` say which layers use the sliding window:
    4.52.4's Gemma3 reads a period (`sliding_window_pattern`), Gemma2 and ModernBERT a fixed
    one (every other layer, `global_attn_every_n_layers`), which is checked, and its Qwen2 and
    Qwen3 apply one window to every layer through the shared causal mask, so for those the
    window is taken out of the config and applied per layer by windowed_eager (returned as
    {layer index: window}).
    """
    d = read_config_json(model)
    model_type = d["model_type"]
    windows = {}
    rope = d.pop("rope_parameters", None)
    if rope is not None:
        if "full_attention" in rope:  # Gemma3, ModernBERT: one set per layer type
            full, local = rope["full_attention"], rope["sliding_attention"]
            assert local.get("rope_type", "default") == "default", local
            if model_type == "modernbert":
                assert full.get("rope_type", "default") == "default", full
                d["global_rope_theta"] = full["rope_theta"]
                d["local_rope_theta"] = local["rope_theta"]
                full = None
            else:
                d["rope_local_base_freq"] = local["rope_theta"]
        else:
            full = rope
        if full is not None:
            full = dict(full)
            d["rope_theta"] = full.pop("rope_theta")
            if full.get("rope_type") == "longrope":
                d["partial_rotary_factor"] = full.pop("partial_rotary_factor", 1.0)
                original = full.pop("original_max_position_embeddings",
                                    d.get("original_max_position_embeddings"))
                assert original == d.get("original_max_position_embeddings"), (original, d)
                d["rope_scaling"] = {"type": "longrope", "short_factor": full.pop("short_factor"),
                                     "long_factor": full.pop("long_factor")}
                assert set(full) == {"rope_type"}, full  # nothing else 4.52.4 would miss
            else:
                d["rope_scaling"] = None if full.get("rope_type", "default") == "default" else full
    layer_types = d.get("layer_types")
    if layer_types and "sliding_attention" in layer_types:
        sliding = [t == "sliding_attention" for t in layer_types]
        if model_type == "gemma3_text":
            # 4.52.4: layer i slides iff (i + 1) % sliding_window_pattern != 0
            period = next((p for p in range(1, len(sliding) + 2)
                           if all(s == bool((i + 1) % p) for i, s in enumerate(sliding))), None)
            if period is None:
                raise SystemExit(f"{model}: layer_types {layer_types} has no 4.52.4 period")
            d["sliding_window_pattern"] = period
        elif model_type in ("qwen2", "qwen3"):
            windows = {i: d["sliding_window"] for i, s in enumerate(sliding) if s}
            d["use_sliding_window"] = False
        elif model_type == "gemma2":
            # 4.52.4: layer i slides iff i is even
            if sliding != [i % 2 == 0 for i in range(len(sliding))]:
                raise SystemExit(f"{model}: layer_types {layer_types} is not 4.52.4's Gemma2")
        elif model_type == "modernbert":
            # 4.52.4: layer i is local iff i % global_attn_every_n_layers != 0
            every = d["global_attn_every_n_layers"]
            if sliding != [i % every != 0 for i in range(len(sliding))]:
                raise SystemExit(f"{model}: layer_types {layer_types} is not every {every}")
        else:
            raise SystemExit(f"{model}: sliding layers of {model_type} not handled")
    if model_type == "modernbert":
        d["reference_compile"] = False  # no torch.compile (4.52.4 turns it off on CPU anyway)
    if model_type == "deberta-v2" and not d.get("legacy", True):
        # 4.52.4's DebertaV2ForMaskedLM ties its non-legacy head's `dense` (hidden x hidden) to
        # the word embeddings (its get_output_embeddings), which 5.x does not: the head reads
        # the word embeddings in its forward, so nothing is to be tied
        d["tie_word_embeddings"] = False
    config = config_class.from_dict(d)
    config._attn_implementation = "eager"
    return config, windows


def windowed_eager(eager_attention_forward):
    """Wraps a family's eager attention so that a layer with `lrp_window` = w masks the keys
    w or more positions before the query (5.x's sliding window: key j is seen by query i iff
    i - w < j <= i). No KV cache here, so query i is position i."""
    import torch

    def attention_forward(module, query, key, value, attention_mask, *args, **kwargs):
        window = getattr(module, "lrp_window", None)
        if window is not None:
            assert attention_mask is not None
            i = torch.arange(query.shape[-2])[:, None]
            j = torch.arange(key.shape[-2])[None, :]
            far = (i - j) >= window
            low = torch.finfo(attention_mask.dtype).min
            attention_mask = attention_mask[:, :, :, :key.shape[-2]].masked_fill(far, low)
        return eager_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)

    return attention_forward


def gemma3_classifier_class():
    """Gemma3TextForSequenceClassification of transformers 5.x, which 4.52.4 lacks: the text
    model, a bias-free linear `score` on every position, the logits of the last position
    (5.x reads the last non-pad token; given inputs_embeds, or without padding, the last)."""
    import torch
    from transformers.modeling_outputs import SequenceClassifierOutputWithPast
    from transformers.models.gemma3.modeling_gemma3 import Gemma3TextModel

    class Gemma3TextClassifier(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.model = Gemma3TextModel(config)
            self.score = torch.nn.Linear(config.hidden_size, config.num_labels, bias=False)

        def get_input_embeddings(self):
            return self.model.embed_tokens

        def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None):
            hidden = self.model(input_ids=input_ids, inputs_embeds=inputs_embeds,
                                attention_mask=attention_mask, use_cache=False).last_hidden_state
            return SequenceClassifierOutputWithPast(logits=self.score(hidden)[:, -1])

    return Gemma3TextClassifier


def load_model(model, transformers_module):
    """The checkpoint in models/<model>, float32, eval mode, eager attention. Classes are
    looked up in the (possibly LXT-patched) transformers module, so call after monkey_patch.
    Every tensor of the class must be in the checkpoint, with its shape."""
    import torch
    from safetensors.torch import load_file

    d = read_config_json(model)
    architecture = (d.get("architectures") or ["GPT2LMHeadModel"])[0]
    folder = os.path.join(MODELS, model)
    if architecture == "Gemma3TextForSequenceClassification":
        cls = gemma3_classifier_class()
        config, windows = load_config(model, transformers_module.Gemma3TextConfig)
        net = cls(config)
        net.load_state_dict(load_file(os.path.join(folder, "model.safetensors")), strict=True)
    else:
        cls = getattr(transformers_module, architecture)
        config, windows = load_config(model, cls.config_class)
        net, info = cls.from_pretrained(folder, config=config, attn_implementation="eager",
                                        torch_dtype=torch.float32, output_loading_info=True)
        # a tensor the class has and the checkpoint does not (or of another shape) would be
        # left as initialised; a checkpoint tensor the class has no use for (BERT's
        # pre-training heads) is no matter
        unread = {k: info[k] for k in ("missing_keys", "mismatched_keys", "error_msgs")
                  if info.get(k)}
        if unread:
            raise SystemExit(f"{model}: 4.52.4's {architecture} reads the checkpoint as {unread}")
    for layer, window in windows.items():
        net.model.layers[layer].self_attn.lrp_window = window
    return net.float().eval()


def patch(model_type, rules):
    """Applies a rule set to the family's transformers module (globally, for this process) and
    returns the module."""
    import importlib

    module_name, lxt_name = FAMILIES[model_type]
    module = importlib.import_module(module_name)
    # Before the rules wrap the eager attention, so that their wrappers wrap these too.
    if model_type in FLOAT64_FAMILIES:
        module.eager_attention_forward = float64_eager(module, rules)
    if model_type in ("qwen2", "qwen3"):
        module.eager_attention_forward = windowed_eager(module.eager_attention_forward)
    if model_type == "modernbert":
        module.MODERNBERT_ATTENTION_FUNCTION["eager"] = modernbert_eager64(module)
    if model_type == "deberta-v2":
        module.scaled_size_sqrt = deberta_scale64(module.scaled_size_sqrt)
    if rules != "plain":
        from lxt.efficient import monkey_patch
        if lxt_name is None:
            patch_map = (encoder_map if model_type in ENCODER_FAMILIES else decoder_map)(
                module, model_type, rules)
            monkey_patch(module, patch_map)
        elif rules == "attnlrp":
            monkey_patch(module, importlib.import_module(lxt_name).attnLRP)
        elif model_type == "bert":
            monkey_patch(module, importlib.import_module(lxt_name).attnLRP)
            module.BertSelfAttention.forward = bert_cp_self_attention_forward
        else:
            monkey_patch(module, importlib.import_module(lxt_name).cp_LRP)
        if model_type != "bert" and model_type not in ENCODER_FAMILIES:
            # LXT's attention rule wraps what the layers call
            assert module.eager_attention_forward.__module__ == "lxt.efficient.patches"
        if model_type == "gemma2":  # the final soft cap (the attention's is in float64_eager)
            module.Gemma2ForCausalLM.forward = gemma2_causal_lm_forward(rules)
    if model_type in FLOAT64_FAMILIES:  # after LXT: these wrap its norms
        float64_norms_and_rotary(module, FLOAT64_FAMILIES[model_type], rules)
    if model_type == "modernbert":
        float64_rotary(module.ModernBertRotaryEmbedding)
    return module


# --------------------------------------------------------------------------------------------
# LXT's rules on the families LXT 2.1 has no map for
# --------------------------------------------------------------------------------------------

# Encoders: model_type -> the prefix of its classes. The rules of LXT's bert.attnLRP: every
# LayerNorm with its normaliser detached (patches.layer_norm_forward), the identity rule on
# every element-wise activation (patches.non_linear_forward on transformers' activation
# classes, as LXT's vit_torch map does for nn.GELU; a functional call patched where it is made),
# the uniform rule on q·kᵀ and A·v (as LXT's BertSelfAttention); CP-LRP as BERT's above (q and
# k detached, no uniform rule).
ENCODER_FAMILIES = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "electra": "Electra",
                    "albert": "Albert", "distilbert": "DistilBert", "deberta-v2": "DebertaV2",
                    "modernbert": "ModernBert"}
# Decoders: model_type -> the prefix of its classes. LXT's llama/gemma3 maps with these classes:
# RMSNorm (rms_norm_forward, or Gemma's `_norm` as LXT's gemma3 map), the gated MLP
# (gated_mlp_forward / cp_gated_mlp_forward), the eager attention (patch_attention /
# patch_cp_attention), dropout.
DECODER_FAMILIES = {"mistral": "Mistral", "phi3": "Phi3", "gemma": "Gemma", "gemma2": "Gemma2"}

_NORMS = "LayerNorm detached (patches.layer_norm_forward)"
_ACTS = "identity rule on GELU (patches.non_linear_forward on transformers' activation classes)"
_BERTLIKE_CP = "q and k detached, no uniform rule (patches.cp_wrap_attention_forward's rule)"
# model_type -> (attnlrp_rules, cp_lrp_rules), one line each, for the fixtures
RULE_NOTES = {
    "roberta": (
        "BertSelfAttention-style patch of RobertaSelfAttention (LXT's BertSelfAttention.forward: "
        f"q·kᵀ and A·v gradient / 2); {_NORMS}; {_ACTS} and the LM head's gelu; identity rule on "
        "the classification head's tanh (RobertaClassificationHead.forward patched)",
        f"BertSelfAttention-style CP patch of RobertaSelfAttention: {_BERTLIKE_CP}; {_NORMS}; "
        f"{_ACTS}; identity rule on the classification head's tanh"),
    "xlm-roberta": (
        "BertSelfAttention-style patch of XLMRobertaSelfAttention (LXT's "
        f"BertSelfAttention.forward: q·kᵀ and A·v gradient / 2); {_NORMS}; {_ACTS} and the LM "
        "head's gelu; identity rule on the classification head's tanh",
        f"BertSelfAttention-style CP patch of XLMRobertaSelfAttention: {_BERTLIKE_CP}; "
        f"{_NORMS}; {_ACTS}"),
    "electra": (
        "BertSelfAttention-style patch of ElectraSelfAttention (LXT's BertSelfAttention.forward: "
        f"q·kᵀ and A·v gradient / 2); {_NORMS}; {_ACTS} (FFN, generator, classifier and "
        "discriminator heads)",
        f"BertSelfAttention-style CP patch of ElectraSelfAttention: {_BERTLIKE_CP}; {_NORMS}; "
        f"{_ACTS}"),
    "albert": (
        "BertSelfAttention-style patch of AlbertAttention.forward (q·kᵀ and A·v gradient / 2); "
        f"{_NORMS}; {_ACTS} (gelu_new in FFN and MLM head) and on the pooler's tanh",
        f"BertSelfAttention-style CP patch of AlbertAttention.forward: {_BERTLIKE_CP}; "
        f"{_NORMS}; {_ACTS} and on the pooler's tanh"),
    "distilbert": (
        "BertSelfAttention-style patch of DistilBERT's MultiHeadSelfAttention.forward (q·kᵀ and "
        f"A·v gradient / 2); {_NORMS}; {_ACTS} and on the classifier's ReLU",
        f"BertSelfAttention-style CP patch of MultiHeadSelfAttention.forward: {_BERTLIKE_CP}; "
        f"{_NORMS}; {_ACTS} and on the classifier's ReLU"),
    "deberta-v2": (
        "BertSelfAttention-style patch of DisentangledSelfAttention.forward: the content-to-"
        "content q·kᵀ gradient / 2 (c2p and p2c are linear in q or k: relative position "
        f"embeddings are constants) and A·v gradient / 2; {_NORMS}; {_ACTS} (FFN, LM head, "
        "ContextPooler)",
        "CP patch of DisentangledSelfAttention.forward: the attention probabilities detached "
        f"(c2c, c2p and p2c alike), no uniform rule; {_NORMS}; {_ACTS}"),
    "modernbert": (
        "ModernBERT's own eager attention wrapped as patches.wrap_attention_forward (q, k "
        "gradient / 4, v / 2, on the packed qkv); GeGLU as patches.gated_mlp_forward (identity "
        f"rule on act(input), act(input)·gate gradient / 2); {_NORMS}; {_ACTS} (head)",
        "ModernBERT's eager attention wrapped as patches.cp_wrap_attention_forward (q and k "
        "detached); GeGLU as patches.cp_gated_mlp_forward (the activated half, act(input), "
        f"detached, no division); {_NORMS}; {_ACTS} (head)"),
    "mistral": (
        "LXT's llama attnLRP map on modeling_mistral: patch_attention, gated_mlp_forward on "
        "MistralMLP, rms_norm_forward on MistralRMSNorm",
        "LXT's llama cp_LRP map on modeling_mistral: patch_cp_attention, cp_gated_mlp_forward "
        "on MistralMLP, rms_norm_forward on MistralRMSNorm"),
    "phi3": (
        "LXT's llama attnLRP map on modeling_phi3: patch_attention, rms_norm_forward on "
        "Phi3RMSNorm, Phi3MLP (fused gate_up_proj) as gated_mlp_forward (identity rule on "
        "SiLU(gate), up·SiLU(gate) gradient / 2)",
        "LXT's llama cp_LRP map on modeling_phi3: patch_cp_attention, rms_norm_forward on "
        "Phi3RMSNorm, Phi3MLP as cp_gated_mlp_forward (gate detached, no division)"),
    "gemma": (
        "LXT's gemma3 attnLRP map on modeling_gemma: patch_attention, gated_mlp_forward on "
        "GemmaMLP, gemma3_norm on GemmaRMSNorm._norm",
        "LXT's gemma3 cp_LRP map on modeling_gemma: patch_cp_attention, cp_gated_mlp_forward on "
        "GemmaMLP, gemma3_norm on GemmaRMSNorm._norm"),
    "gemma2": (
        "LXT's gemma3 attnLRP map on modeling_gemma2: patch_attention, gated_mlp_forward on "
        "Gemma2MLP, gemma3_norm on Gemma2RMSNorm._norm; identity rule on the attention and "
        "final-logit soft caps c·tanh(x/c)",
        "LXT's gemma3 cp_LRP map on modeling_gemma2: patch_cp_attention (so the attention soft "
        "cap carries nothing), cp_gated_mlp_forward on Gemma2MLP, gemma3_norm on "
        "Gemma2RMSNorm._norm; identity rule on the final-logit soft cap"),
    "qwen2": (
        "LXT's qwen2 attnLRP map (5.x's per-layer sliding windows applied by windowed_eager)",
        "LXT's qwen2 cp_LRP map (5.x's per-layer sliding windows applied by windowed_eager)"),
}


def activation_classes():
    """transformers' activation classes (what ACT2FN and get_activation instantiate) and
    torch's element-wise ones the encoders call directly (nn.Tanh, nn.ReLU)."""
    import torch
    from transformers.activations import ACT2CLS

    classes = {c[0] if isinstance(c, tuple) else c for c in ACT2CLS.values()}
    return sorted(classes | {torch.nn.GELU, torch.nn.Tanh, torch.nn.ReLU},
                  key=lambda c: c.__module__ + c.__name__)


def attention_scores(q, k_t, rules):
    """q @ k_t, the first product of attention, under a rule set: AttnLRP's uniform rule (the
    gradient / 2, as LXT's BertSelfAttention), CP-LRP's q and k detached."""
    import torch
    from lxt.efficient.rules import divide_gradient, stop_gradient

    if rules == "cp_lrp":
        return torch.matmul(stop_gradient(q), stop_gradient(k_t))
    scores = torch.matmul(q, k_t)
    return divide_gradient(scores, 2) if rules == "attnlrp" else scores


def attention_context(probs, v, rules):
    """probs @ v, the second product of attention: AttnLRP's uniform rule, else as it is."""
    import torch
    from lxt.efficient.rules import divide_gradient

    context = torch.matmul(probs, v)
    return divide_gradient(context, 2) if rules == "attnlrp" else context


def encoder_map(module, model_type, rules):
    """The patch map (for lxt.efficient.monkey_patch) of an encoder family: see
    ENCODER_FAMILIES and RULE_NOTES."""
    import torch
    from functools import partial
    from lxt.efficient.patches import (dropout_forward, layer_norm_forward, non_linear_forward,
                                       patch_method)
    import lxt.efficient.models.bert as lxt_bert

    prefix = ENCODER_FAMILIES[model_type]
    patch_map = {torch.nn.LayerNorm: partial(patch_method, layer_norm_forward),
                 torch.nn.Dropout: partial(patch_method, dropout_forward)}
    for activation in activation_classes():
        patch_map[activation] = partial(patch_method, non_linear_forward, keep_original=True)
    if model_type in ("roberta", "xlm-roberta", "electra"):
        # the attention of BERT's, line for line: LXT's own patched forward, or BERT's CP one
        attention = (lxt_bert.BertSelfAttention.forward if rules == "attnlrp"
                     else bert_cp_self_attention_forward)
        patch_map[getattr(module, prefix + "SelfAttention")] = partial(patch_method, attention)
        if model_type != "electra":  # its tanh is called as torch.tanh
            patch_map[getattr(module, prefix + "ClassificationHead")] = partial(
                patch_method, roberta_classification_head_forward)
    elif model_type == "albert":
        patch_map[module.AlbertAttention] = partial(patch_method, albert_attention(rules))
    elif model_type == "distilbert":
        patch_map[module.MultiHeadSelfAttention] = partial(patch_method,
                                                           distilbert_attention(rules))
    elif model_type == "deberta-v2":
        patch_map[module.DisentangledSelfAttention] = partial(
            patch_method, deberta_attention(module, rules))
    elif model_type == "modernbert":
        patch_map[module.ModernBertMLP] = partial(patch_method, modernbert_mlp(rules))
        eager = module.MODERNBERT_ATTENTION_FUNCTION["eager"]
        module.MODERNBERT_ATTENTION_FUNCTION["eager"] = modernbert_attention(eager, rules)
    return patch_map


def roberta_classification_head_forward(self, features, **kwargs):
    """RobertaClassificationHead (and XLM-R's): <s>'s state, dense, tanh (identity rule),
    out_proj; dropout as patched (none)."""
    import torch
    from lxt.efficient.rules import identity_rule_implicit

    x = self.dense(self.dropout(features[:, 0, :]))
    x = identity_rule_implicit(torch.tanh, x)
    return self.out_proj(self.dropout(x))


def albert_attention(rules):
    """AlbertAttention.forward (eager, absolute positions): q, k, v, softmax(q kᵀ / √d + mask),
    A v, then the output projection and LayerNorm(x + .) that ALBERT keeps in this class; the
    two products under `rules`."""
    import torch

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                output_attentions=False):
        assert head_mask is None and self.position_embedding_type == "absolute"
        q, k, v = (self.transpose_for_scores(linear(hidden_states))
                   for linear in (self.query, self.key, self.value))
        scores = attention_scores(q, k.transpose(-1, -2), rules) / math.sqrt(
            self.attention_head_size)
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = torch.nn.functional.softmax(scores, dim=-1)
        context = attention_context(probs, v, rules).transpose(2, 1).flatten(2)
        out = self.LayerNorm(hidden_states + self.output_dropout(self.dense(context)))
        return (out, probs) if output_attentions else (out,)

    return forward


def distilbert_attention(rules):
    """DistilBERT's MultiHeadSelfAttention.forward: q / √d, q kᵀ, the padding mask, softmax,
    A v, out_lin; the two products under `rules`."""
    import torch

    def forward(self, query, key, value, mask, head_mask=None, output_attentions=False):
        assert head_mask is None and query is key and key is value
        bs, d = query.size(0), self.dim // self.n_heads

        def split(x):
            return x.view(bs, -1, self.n_heads, d).transpose(1, 2)

        q = split(self.q_lin(query)) / math.sqrt(d)
        k, v = split(self.k_lin(key)), split(self.v_lin(value))
        scores = attention_scores(q, k.transpose(2, 3), rules)
        masked = (mask == 0).view(bs, 1, 1, -1).expand_as(scores)
        scores = scores.masked_fill(masked, torch.tensor(torch.finfo(scores.dtype).min))
        probs = torch.nn.functional.softmax(scores, dim=-1)
        context = attention_context(probs, v, rules)
        context = context.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * d)
        out = self.out_lin(context)
        return (out, probs) if output_attentions else (out,)

    return forward


def deberta_attention(module, rules):
    """DeBERTa-v2's DisentangledSelfAttention.forward (relative attention, no query_states):
    scores = q kᵀ / s + c2p + p2c, where c2p = q · (projected relative embeddings)ᵀ and p2c
    = k · (...)ᵀ, read at the bucketed relative positions (HF's disentangled_attention_bias).
    The relative embeddings are parameters, so c2p and p2c are linear in q or k: AttnLRP
    divides only the content-to-content product (and A v) by 2. CP-LRP detaches the
    attention probabilities."""
    import torch
    from lxt.efficient.rules import divide_gradient, stop_gradient

    def forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                relative_pos=None, rel_embeddings=None):
        assert query_states is None and self.relative_attention
        heads = self.num_attention_heads
        q, k, v = (self.transpose_for_scores(linear(hidden_states), heads)
                   for linear in (self.query_proj, self.key_proj, self.value_proj))
        factor = 1 + ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
        scale = module.scaled_size_sqrt(q, factor)
        c2c = torch.bmm(q, k.transpose(-1, -2) / scale.to(dtype=q.dtype))
        if rules == "attnlrp":
            c2c = divide_gradient(c2c, 2)
        scores = c2c + self.disentangled_attention_bias(
            q, k, relative_pos, self.pos_dropout(rel_embeddings), factor)
        scores = scores.view(-1, heads, scores.size(-2), scores.size(-1))
        scores = scores.masked_fill(~attention_mask.bool(), torch.finfo(q.dtype).min)
        probs = torch.nn.functional.softmax(scores, dim=-1)
        if rules == "cp_lrp":
            probs = stop_gradient(probs)
        context = torch.bmm(probs.view(-1, probs.size(-2), probs.size(-1)), v)
        if rules == "attnlrp":
            context = divide_gradient(context, 2)
        context = context.view(-1, heads, context.size(-2), context.size(-1))
        context = context.permute(0, 2, 1, 3).contiguous()
        context = context.view(context.size()[:-2] + (-1,))
        return (context, probs if output_attentions else None)

    return forward


def modernbert_attention(eager, rules):
    """ModernBERT's eager attention (q, k, v packed as qkv [b, n, 3, heads, d], RoPE inside)
    wrapped as LXT's patches.wrap_attention_forward / cp_wrap_attention_forward wrap
    transformers' eager attention: AttnLRP q, k gradient / 4 and v / 2, CP-LRP q and k
    detached. RoPE is linear in q and k, so applying this before it is the same."""
    import torch
    from lxt.efficient.rules import divide_gradient, stop_gradient

    def attention_forward(module, qkv, **kwargs):
        q, k, v = qkv.unbind(dim=2)
        if rules == "attnlrp":
            q, k, v = divide_gradient(q, 4), divide_gradient(k, 4), divide_gradient(v, 2)
        else:
            q, k = stop_gradient(q), stop_gradient(k)
        return eager(module, qkv=torch.stack((q, k, v), dim=2), **kwargs)

    return attention_forward


def modernbert_mlp(rules):
    """ModernBertMLP: Wi's output split into input and gate, Wo(act(input) * gate). The
    activated half is the gate of LXT's rule: AttnLRP as patches.gated_mlp_forward (identity
    rule on act, the product's gradient / 2), CP-LRP as cp_gated_mlp_forward (input detached
    before act, no division)."""
    from lxt.efficient.rules import divide_gradient, identity_rule_implicit, stop_gradient

    def forward(self, hidden_states):
        input, gate = self.Wi(hidden_states).chunk(2, dim=-1)
        if rules == "attnlrp":
            return self.Wo(self.drop(divide_gradient(
                identity_rule_implicit(self.act, input) * gate, 2)))
        return self.Wo(self.drop(self.act(stop_gradient(input)) * gate))

    return forward


def decoder_map(module, model_type, rules):
    """The patch map of a decoder family: LXT's llama (or, for Gemma's RMSNorm, gemma3) map
    with the family's classes; Phi-3's fused MLP as the gated one. See RULE_NOTES."""
    import torch
    from functools import partial
    from lxt.efficient.models.gemma3 import gemma3_norm
    from lxt.efficient.patches import (cp_gated_mlp_forward, dropout_forward, gated_mlp_forward,
                                       patch_attention, patch_cp_attention, patch_method,
                                       rms_norm_forward)

    prefix = DECODER_FAMILIES[model_type]
    if model_type == "phi3":
        mlp = phi3_mlp(rules)
    else:
        mlp = gated_mlp_forward if rules == "attnlrp" else cp_gated_mlp_forward
    if model_type.startswith("gemma"):
        norm = partial(patch_method, gemma3_norm, method_name="_norm")
    else:
        norm = partial(patch_method, rms_norm_forward)
    return {getattr(module, prefix + "MLP"): partial(patch_method, mlp),
            getattr(module, prefix + "RMSNorm"): norm,
            torch.nn.Dropout: partial(patch_method, dropout_forward),
            module: patch_attention if rules == "attnlrp" else patch_cp_attention}


def phi3_mlp(rules):
    """Phi3MLP: gate_up_proj's output split into gate and up, down_proj(up * act(gate)); as
    patches.gated_mlp_forward (AttnLRP) and cp_gated_mlp_forward (CP-LRP)."""
    from lxt.efficient.rules import divide_gradient, identity_rule_implicit, stop_gradient

    def forward(self, hidden_states):
        gate, up = self.gate_up_proj(hidden_states).chunk(2, dim=-1)
        if rules == "attnlrp":
            return self.down_proj(divide_gradient(
                up * identity_rule_implicit(self.activation_fn, gate), 2))
        return self.down_proj(up * self.activation_fn(stop_gradient(gate)))

    return forward


def soft_cap(x, cap, rules):
    """cap · tanh(x / cap) (Gemma 2's soft caps, computed as transformers does), under either
    LRP rule set with LXT's identity rule on the whole map; x itself without a cap."""
    import torch
    from lxt.efficient.rules import identity_rule_implicit

    if cap is None:
        return x

    def capped(y):
        return torch.tanh(y / cap) * cap

    return capped(x) if rules == "plain" else identity_rule_implicit(capped, x)


def gemma2_causal_lm_forward(rules):
    """Gemma2ForCausalLM.forward (no cache, no loss): the model, lm_head, the final soft cap
    with the identity rule."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                            inputs_embeds=inputs_embeds).last_hidden_state
        logits = soft_cap(self.lm_head(hidden), self.config.final_logit_softcapping, rules)
        return CausalLMOutputWithPast(logits=logits)

    return forward


# --------------------------------------------------------------------------------------------
# Float64 throughout for the Llama-like families
# --------------------------------------------------------------------------------------------

# model_type -> the prefix of its classes
FLOAT64_FAMILIES = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma3_text": "Gemma3",
                    "mistral": "Mistral", "phi3": "Phi3", "gemma": "Gemma", "gemma2": "Gemma2"}
# every family with float32 casts replaced in float64 runs (ModernBERT's softmax and rotary
# tables, DeBERTa's score scale): the islands check runs for these
ISLAND_FAMILIES = set(FLOAT64_FAMILIES) | {"modernbert", "deberta-v2"}
# False (worker-global): transformers' and LXT's own float32 casts, for the check that the
# replacements below change nothing but rounding
EXACT_FLOAT64 = True


def exact(x):
    """Whether to compute without the float32 casts (float64 input, EXACT_FLOAT64 on)."""
    import torch
    return EXACT_FLOAT64 and x.dtype == torch.float64


def float64_eager(module, rules):
    """The family's eager attention with the softmax in the input's dtype: 4.52.4's takes it in
    float32 (then casts back) even for float64 tensors. Otherwise the same computation (keys and
    values repeated over the query groups, scores * scaling, Gemma 2's soft cap, + mask,
    softmax, @ values). With a soft cap it is computed here in float32 runs too (the softmax
    then in float32, as transformers), for the identity rule on the cap under `rules`."""
    import torch
    original = module.eager_attention_forward

    def attention_forward(mod, query, key, value, attention_mask, *args, **kwargs):
        softcap = kwargs.get("softcap")
        if not exact(query) and softcap is None:
            return original(mod, query, key, value, attention_mask, *args, **kwargs)
        assert not args and not mod.training
        key = module.repeat_kv(key, mod.num_key_value_groups)
        value = module.repeat_kv(value, mod.num_key_value_groups)
        scaling = kwargs.get("scaling")
        scores = torch.matmul(query, key.transpose(2, 3)) * (
            mod.head_dim ** -0.5 if scaling is None else scaling)
        scores = soft_cap(scores, softcap, rules)
        if attention_mask is not None:
            scores = scores + attention_mask[:, :, :, :key.shape[-2]]
        if exact(query):
            probs = torch.nn.functional.softmax(scores, dim=-1)
        else:
            probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(
                query.dtype)
        return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs

    return attention_forward


def float64_norms_and_rotary(module, prefix, rules):
    """RMSNorm and the rotary cos/sin tables without their float32 casts, for float64 inputs.

    Llama/Qwen2/Qwen3/Mistral/Phi-3's RMSNorm (transformers' and LXT's rms_norm_forward alike)
    computes in float32; the replacement is the same formula in the input's dtype, with LXT's
    rule (the normaliser detached) unless rules is "plain". Gemma's forward casts to float32
    around `_norm`, which LXT patches and which is kept. The rotary tables: float64_rotary."""
    import torch
    from lxt.efficient.rules import stop_gradient

    norm = getattr(module, prefix + "RMSNorm")
    norm_forward = norm.forward

    if prefix.startswith("Gemma"):
        def norm64(self, x):
            if not exact(x):
                return norm_forward(self, x)
            return self._norm(x) * (1.0 + self.weight)
    else:
        def norm64(self, x):
            if not exact(x):
                return norm_forward(self, x)
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return self.weight * (x * (scale if rules == "plain" else stop_gradient(scale)))

    norm.forward = norm64
    float64_rotary(getattr(module, prefix + "RotaryEmbedding"))


def float64_rotary(rotary):
    """The rotary cos/sin tables computed in float64 from the model's own inv_freq buffer (the
    float32 constants transformers derives) for float64 inputs. Phi-3's longrope picks its
    frequencies by the sequence length: transformers' forward runs first for that update."""
    import torch
    rotary_forward = rotary.forward

    def rotary64(self, x, position_ids):
        if not exact(x):
            return rotary_forward(self, x, position_ids)
        if self.rope_type == "longrope":
            rotary_forward(self, x, position_ids)  # sets inv_freq (short or long factors)
        else:
            assert self.rope_type in ("default", "linear", "llama3"), self.rope_type  # static
        freqs = position_ids[:, :, None].double() * self.inv_freq.double()[None, None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling

    rotary.forward = rotary64


def modernbert_eager64(module):
    """ModernBERT's eager attention with the softmax in float64 for float64 inputs (4.52.4's
    takes it in float32); otherwise its computation: RoPE on q and k, q kᵀ / √d, the global or
    sliding-window mask, softmax, @ v."""
    import torch
    original = module.MODERNBERT_ATTENTION_FUNCTION["eager"]

    def attention_forward(mod, qkv, **kwargs):
        if not exact(qkv):
            return original(mod, qkv=qkv, **kwargs)
        cos, sin = mod.rotary_emb(qkv, position_ids=kwargs["position_ids"])
        query, key, value = qkv.transpose(3, 1).unbind(dim=2)
        query, key = module.apply_rotary_pos_emb(query, key, cos, sin)
        scores = torch.matmul(query, key.transpose(2, 3)) * mod.head_dim ** -0.5
        local = kwargs["local_attention"] != (-1, -1)
        scores = scores + kwargs["sliding_window_mask" if local else "attention_mask"]
        probs = torch.nn.functional.softmax(scores, dim=-1)
        out = torch.matmul(probs, value).transpose(1, 2).contiguous()
        out = out.view(kwargs["bs"], -1, kwargs["dim"])
        return (out, probs) if kwargs.get("output_attentions") else (out,)

    return attention_forward


def deberta_scale64(original):
    """DeBERTa's score scale √(d · factor) in float64 for float64 inputs (4.52.4 and 5.x take
    the square root in float32)."""
    import torch

    def scaled_size_sqrt(layer, scale_factor):
        if exact(layer):
            return torch.sqrt(torch.tensor(layer.size(-1) * scale_factor, dtype=torch.float64))
        return original(layer, scale_factor)

    return scaled_size_sqrt


def bert_cp_self_attention_forward(self, hidden_states, attention_mask=None, head_mask=None,
                                   encoder_hidden_states=None, encoder_attention_mask=None,
                                   past_key_value=None, output_attentions=False):
    """BertSelfAttention.forward (eager, self-attention, absolute positions, no cache) for
    CP-LRP: query and key detached (LXT's stop_gradient), so no relevance passes through the
    softmax, and no divide_gradient on either product. The forward values are unchanged."""
    import torch
    from lxt.efficient.rules import stop_gradient

    assert encoder_hidden_states is None and past_key_value is None and head_mask is None
    assert self.position_embedding_type == "absolute" and not self.is_decoder
    query = stop_gradient(self.transpose_for_scores(self.query(hidden_states)))
    key = stop_gradient(self.transpose_for_scores(self.key(hidden_states)))
    value = self.transpose_for_scores(self.value(hidden_states))
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.nn.functional.softmax(scores, dim=-1)
    context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
    context = context.view(context.size()[:-2] + (self.all_head_size,))
    return (context, probs) if output_attentions else (context,)


# --------------------------------------------------------------------------------------------
# Relevance (worker side)
# --------------------------------------------------------------------------------------------

def encode(tokenizer, case):
    """Token ids as the tokenizer gives them by default (or the case's fixed ones), their
    tokens, and the position the head reads."""
    if "ids" in case:
        ids, tokens = case["ids"], case["tokens"]
    else:
        ids = tokenizer(case["text"])["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(ids)
    n = len(ids)
    if case["kind"] == "masked_lm":
        target = ids.index(tokenizer.mask_token_id) if case["target"] is None else case["target"]
    elif case["kind"] == "classifier":
        # the encoders' heads read the first token (ModernBERT's "mean" pools every one); a
        # decoder classifier the last token
        model_type = read_config_json(case["model"])["model_type"]
        target = 0 if model_type == "bert" or model_type in ENCODER_FAMILIES else n - 1
    elif case["kind"] == "discriminator":
        target = case["target"]
    else:
        target = n - 1
    return ids, tokens, target


def head_logits(out, kind, target):
    """The head's logits for the explained position (a classifier's are already pooled; the
    discriminator's one logit d as the two labels' (0, d), as bert-explain reads it)."""
    import torch

    if kind == "classifier":
        return out.logits[0]
    if kind == "discriminator":
        d = out.logits[0, target]
        return torch.stack((torch.zeros_like(d), d))
    return out.logits[0, target]


def relevance(net, kind, ids, target, class_id, dtype):
    """Gradient x Input at the word embeddings for the logit of class_id (None: the top one).
    Returns (class_id, logit, R, every logit of the explained position)."""
    import torch

    net.to(dtype)
    ids_t = torch.tensor([ids])
    emb = net.get_input_embeddings()(ids_t).detach().to(dtype).requires_grad_()
    out = net(inputs_embeds=emb, attention_mask=torch.ones_like(ids_t))
    logits = head_logits(out, kind, target)
    if class_id is None:
        class_id = int(logits.argmax())
    logit = logits[class_id]
    logit.backward()
    r = (emb * emb.grad).sum(-1)[0]
    return class_id, float(logit), [float(x) for x in r], [float(x) for x in logits.detach()]


def worker(model, rules, cases):
    """One (model, rule set): every case's ids, class, logits and relevances in float64 and
    float32 (and, for BERT without patches, the hand computation)."""
    global EXACT_FLOAT64
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(1)
    model_type = read_config_json(model)["model_type"]
    module = patch(model_type, rules)
    tokenizer = (None if all("ids" in case for case in cases)
                 else AutoTokenizer.from_pretrained(os.path.join(MODELS, model)))
    net64 = load_model(model, module).double()
    net32 = load_model(model, module)
    results = {}
    for case in cases:
        ids, tokens, target = encode(tokenizer, case)
        class_id, logit, r64, logits64 = relevance(net64, case["kind"], ids, target, None,
                                                   torch.float64)
        if case["kind"] == "discriminator" and class_id != 1:
            raise SystemExit(f"{case['name']}: position {target} reads as original: its "
                             "explained logit would be the constant 0; pick another")
        _, logit32, r32, _ = relevance(net32, case["kind"], ids, target, class_id, torch.float32)
        res = dict(ids=ids, tokens=tokens, target=target,
                   class_id=class_id, logit=logit, logits=logits64, r64=r64, r32=r32,
                   logit32=logit32)
        if model_type in ISLAND_FAMILIES:  # the same with transformers' float32 casts
            EXACT_FLOAT64 = False
            _, _, res["r64_islands"], res["logits_islands"] = relevance(
                net64, case["kind"], ids, target, class_id, torch.float64)
            EXACT_FLOAT64 = True
        if rules == "plain" and model_type == "bert":
            res["hand"] = {cp: hand_bert_relevance(net64, case["kind"], ids, target, class_id,
                                                   cp=cp == "cp_lrp")
                           for cp in ("attnlrp", "cp_lrp")}
        results[case["name"]] = res
    return results


# --------------------------------------------------------------------------------------------
# Independent check: BERT with the LRP rules written out by hand (float64)
# --------------------------------------------------------------------------------------------

def hand_bert_relevance(net, kind, ids, target, class_id, cp):
    """AttnLRP (cp=False) or CP-LRP (cp=True) relevances for a BERT masked LM or classifier,
    from its state dict alone: BERT's forward written out here, with each rule as a gradient
    rewrite that leaves the forward value exactly as it is:
      scale(x, f)     gradient / f                      (uniform rule, LXT's divide_gradient)
      identity(f, x)  gradient * f(x) / (x + 1e-10)     (identity rule, as LXT's epsilon)
      LayerNorm       (x - mean) / std, std detached     (identity rule)
      attention       AttnLRP: q k^T and p v each scaled by 1/2; CP: q and k detached
    No transformers or LXT code runs here."""
    import torch

    sd = {k: v.detach().double() for k, v in net.state_dict().items()}
    c = net.config
    heads, dim = c.num_attention_heads, c.hidden_size // c.num_attention_heads

    def scale(x, f):
        return x.detach() + (x - x.detach()) / f

    def identity(fn, x):
        y = fn(x)
        return y.detach() + (x - x.detach()) * (y / (x + 1e-10)).detach()

    def layer_norm(x, p):
        mean = x.mean(-1, keepdim=True)
        std = ((x - mean) ** 2).mean(-1, keepdim=True).add(c.layer_norm_eps).sqrt()
        return (x - mean) / std.detach() * sd[p + ".weight"] + sd[p + ".bias"]

    def linear(x, p):
        return x @ sd[p + ".weight"].T + sd[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    n = len(ids)
    emb = sd["bert.embeddings.word_embeddings.weight"][ids].clone().requires_grad_()
    h = (emb + sd["bert.embeddings.position_embeddings.weight"][:n]
         + sd["bert.embeddings.token_type_embeddings.weight"][0])
    h = layer_norm(h, "bert.embeddings.LayerNorm")
    for layer in range(c.num_hidden_layers):
        p = f"bert.encoder.layer.{layer}."

        def split(x):
            return x.view(n, heads, dim).transpose(0, 1)  # heads, n, dim

        q, k, v = (split(linear(h, p + "attention.self." + w)) for w in ("query", "key", "value"))
        if cp:
            q, k = q.detach(), k.detach()
            scores = q @ k.transpose(-1, -2)
        else:
            scores = scale(q @ k.transpose(-1, -2), 2)
        probs = torch.softmax(scores / math.sqrt(dim), -1)
        context = probs @ v if cp else scale(probs @ v, 2)
        context = context.transpose(0, 1).reshape(n, heads * dim)
        h = layer_norm(linear(context, p + "attention.output.dense") + h,
                       p + "attention.output.LayerNorm")
        inner = identity(gelu, linear(h, p + "intermediate.dense"))
        h = layer_norm(linear(inner, p + "output.dense") + h, p + "output.LayerNorm")
    if kind == "masked_lm":
        x = identity(gelu, linear(h[target], "cls.predictions.transform.dense"))
        x = layer_norm(x, "cls.predictions.transform.LayerNorm")
        logits = x @ sd["cls.predictions.decoder.weight"].T + sd["cls.predictions.bias"]
    else:
        pooled = identity(torch.tanh, linear(h[0], "bert.pooler.dense"))
        logits = linear(pooled, "classifier")
    logits[class_id].backward()
    return [float(x) for x in (emb * emb.grad).sum(-1)]


# --------------------------------------------------------------------------------------------
# transformers 5.x cross-check (runs under .venv-reference's python)
# --------------------------------------------------------------------------------------------

def v5_worker(model, cases):
    """Tokenization and float64 logits of the explained position with transformers 5.x's own
    classes, for comparison with what load_model reads (and with a case's fixed ids)."""
    import torch
    from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForPreTraining,
                              AutoModelForSequenceClassification, AutoTokenizer)

    torch.set_num_threads(1)
    folder = os.path.join(MODELS, model)
    if read_config_json(model)["model_type"] == "modernbert":
        v5_modernbert_rope_in_input_dtype()
    auto = {"masked_lm": AutoModelForMaskedLM, "classifier": AutoModelForSequenceClassification,
            "causal_lm": AutoModelForCausalLM,
            "discriminator": AutoModelForPreTraining}[cases[0]["kind"]]
    net = auto.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    net = net.double().eval()
    if read_config_json(model)["model_type"] in ("gemma", "gemma2"):
        # 5.x scales Gemma's embeddings inside the embedding module by a float32 buffer,
        # √hidden rounded to float32; 4.52.4 scales them in the model by √hidden in the
        # model's dtype. The float64 √hidden here, so that the comparison sees how the
        # checkpoint is read, not that rounding.
        scaled = net.get_input_embeddings()
        scaled.embed_scale = torch.tensor(scaled.scalar_embed_scale, dtype=torch.float64)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    results = {}
    for case in cases:
        case = {k: v for k, v in case.items() if k not in ("ids", "tokens")}
        ids, tokens, target = encode(tokenizer, case)
        with torch.no_grad():
            out = net(input_ids=torch.tensor([ids]))
        logits = head_logits(out, case["kind"], target)
        results[case["name"]] = dict(ids=ids, tokens=tokens, logits=[float(x) for x in logits])
    return results


def v5_modernbert_rope_in_input_dtype():
    """5.x's ModernBERT applies RoPE to q and k cast to float32 (and back), which 4.52.4 does
    not: a float64 run rounds q and k to float32 there only. The same RoPE without that cast,
    so that the comparison sees how the checkpoint is read, not that rounding."""
    import transformers.models.modernbert.modeling_modernbert as modernbert

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return (q * cos + modernbert.rotate_half(q) * sin,
                k * cos + modernbert.rotate_half(k) * sin)

    modernbert.apply_rotary_pos_emb = apply_rotary_pos_emb


# --------------------------------------------------------------------------------------------
# Parent: run the workers, check, write the fixtures
# --------------------------------------------------------------------------------------------

def run_worker(python, args, cases):
    proc = subprocess.run([python, os.path.abspath(__file__), *args], input=json.dumps(cases),
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"worker {args} failed")
    return json.loads(proc.stdout)


def max_abs_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def relative_gap(a, b):
    """max |a - b| / max |a|"""
    return max_abs_diff(a, b) / max(abs(x) for x in a)


def check_case(name, runs, v5):
    """Consistency of one case across rule sets (and with 5.x); returns printable facts."""
    plain = runs["plain"]
    for rules in ("attnlrp", "cp_lrp"):
        r = runs[rules]
        assert (r["ids"], r["target"], r["class_id"]) == (
            plain["ids"], plain["target"], plain["class_id"]), (name, rules)
        diff = max_abs_diff(r["logits"], plain["logits"])
        if diff > FORWARD_TOLERANCE:
            raise SystemExit(f"{name}: {rules} changes the forward logits by {diff:.3g}")
    facts = {"forward": max(max_abs_diff(runs[r]["logits"], plain["logits"])
                            for r in ("attnlrp", "cp_lrp")),
             "plain_vs_attnlrp": relative_gap(runs["attnlrp"]["r64"], plain["r64"])}
    if facts["plain_vs_attnlrp"] < 1e-2:
        raise SystemExit(f"{name}: AttnLRP is plain Gradient x Input: are the rules applied?")
    if "r64_islands" in plain:
        gap = max(relative_gap(runs[r]["r64"], runs[r]["r64_islands"])
                  for r in ("attnlrp", "cp_lrp"))
        facts["islands"] = gap
        if gap > ISLANDS_TOLERANCE:
            raise SystemExit(f"{name}: float64 with and without the float32 casts differ by "
                             f"{gap:.3g}")
    if "hand" in plain:
        for rules in ("attnlrp", "cp_lrp"):
            gap = relative_gap(runs[rules]["r64"], plain["hand"][rules])
            facts[f"hand_{rules}"] = gap
            if gap > HAND_TOLERANCE:
                raise SystemExit(f"{name}: LXT {rules} and the hand BERT differ by {gap:.3g}")
    if v5 is not None:
        if v5["ids"] != plain["ids"]:
            raise SystemExit(f"{name}: 5.x tokenizes {v5['ids']}, 4.52.4 {plain['ids']}")
        if name in FIXED_TOKENS and v5["tokens"] != plain["tokens"]:
            raise SystemExit(f"{name}: 5.x's tokens {v5['tokens']}, fixed {plain['tokens']}")
        # 5.x keeps its float32 casts: compare with the same arithmetic here
        diff = max_abs_diff(v5["logits"], plain.get("logits_islands", plain["logits"]))
        if diff > V5_TOLERANCE:
            raise SystemExit(f"{name}: 5.x and 4.52.4 logits differ by {diff:.3g}")
        facts["v5"] = diff
    return facts


def fixture(case, runs, versions):
    plain, attn, cp = runs["plain"], runs["attnlrp"], runs["cp_lrp"]
    model_type = read_config_json(case["model"])["model_type"]
    out = {
        "name": case["name"],
        "model": case["model"],
        "kind": case["kind"],
        "text": case["text"],
        "ids": plain["ids"],
        "tokens": plain["tokens"],
        "target": plain["target"],
        "class_id": plain["class_id"],
        "logit": attn["logit"],
        "attnlrp": attn["r64"],
        "cp_lrp": cp["r64"],
        "sums": {"attnlrp": math.fsum(attn["r64"]), "cp_lrp": math.fsum(cp["r64"])},
        "float32_gap": {"attnlrp": relative_gap(attn["r64"], attn["r32"]),
                        "cp_lrp": relative_gap(cp["r64"], cp["r32"])},
        "cp_lrp_rules": BERT_CP_RULES if model_type == "bert" else "lxt cp_LRP",
        "reference": {"lxt": "2.1", **versions},
    }
    if model_type in RULE_NOTES and (model_type != "qwen2" or windowed(case["model"])):
        # the families LXT 2.1 has no map for (the older fixtures stay as they were)
        out["attnlrp_rules"], out["cp_lrp_rules"] = RULE_NOTES[model_type]
    return out


def windowed(model):
    """Whether some layer of the checkpoint has a sliding window (5.x's layer_types)."""
    return "sliding_attention" in (read_config_json(model).get("layer_types") or [])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--no-v5-check", action="store_true",
                    help="skip the comparison with transformers 5.x (.venv-reference)")
    ap.add_argument("--jobs", type=int, default=2, help="workers at a time")
    ap.add_argument("--out", help=f"where the fixtures go (default: {OUT}, or with --real {REAL_OUT})")
    ap.add_argument("--real", action="store_true",
                    help="the real pretrained checkpoints of models/downloaded/ instead")
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "RULES"), help=argparse.SUPPRESS)
    ap.add_argument("--v5-worker", metavar="MODEL", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        json.dump(worker(*args.worker, json.load(sys.stdin)), sys.stdout)
        return
    if args.v5_worker:
        json.dump(v5_worker(args.v5_worker, json.load(sys.stdin)), sys.stdout)
        return

    import torch
    import transformers
    versions = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    cases = real_cases() if args.real else all_cases()
    args.out = args.out or (REAL_OUT if args.real else OUT)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c["name"] for c in cases}
        if unknown:
            raise SystemExit(f"unknown cases: {sorted(unknown)}")
        cases = [c for c in cases if c["name"] in wanted]
    models = sorted({c["model"] for c in cases})
    by_model = {m: [c for c in cases if c["model"] == m] for m in models}
    v5 = not args.no_v5_check and os.path.exists(V5_PYTHON)
    if not v5:
        print("not comparing with transformers 5.x", "(--no-v5-check)" if args.no_v5_check
              else f"({V5_PYTHON} missing)", file=sys.stderr)

    jobs = [(m, ("--worker", m, r), sys.executable) for m in models for r in RULE_SETS]
    if v5:
        jobs += [(m, ("--v5-worker", m), V5_PYTHON) for m in models]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {(m, a[-1] if a[0] == "--worker" else "v5"):
                   pool.submit(run_worker, py, list(a), by_model[m]) for m, a, py in jobs}
        results = {key: f.result() for key, f in futures.items()}

    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        m, name = case["model"], case["name"]
        runs = {r: results[(m, r)][name] for r in RULE_SETS}
        facts = check_case(name, runs, results[(m, "v5")][name] if v5 else None)
        fx = fixture(case, runs, versions)
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(fx, f, indent=1)
            f.write("\n")
        print(f"{name:24s} logit {fx['logit']:+.6f}  sum attnlrp {fx['sums']['attnlrp']:+.6f}"
              f"  cp {fx['sums']['cp_lrp']:+.6f}  f32 gap {fx['float32_gap']['attnlrp']:.1e}"
              f"/{fx['float32_gap']['cp_lrp']:.1e}  "
              + " ".join(f"{k} {v:.1e}" for k, v in facts.items()))
    print(f"{len(cases)} fixtures in {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    main()
