#!/usr/bin/env python3
"""Make models/tiny-{qwen3,gemma,gemma2,gemma3,gemma3-mm,phi3}/: tiny random decoders of the families
of issue 62, each with what sets its family apart made to matter on the test prompts.

Deterministic (fixed seed), each well under 1 MB, eager attention, float32, with
models/tiny-gpt2's byte-level BPE tokenizer.json (as make_tiny_llamas.py):

  tiny-qwen3    Qwen3ForCausalLM: per-head q/k RMSNorm, head_dim 12 (hidden 32 / 4 heads is 8),
                4 query heads over 2 key/value heads, Qwen's own sliding window 3 on the layers
                from max_window_layers 1 on, untied lm_head
  tiny-gemma    GemmaForCausalLM: (1 + w) RMSNorms, embeddings x sqrt(32), tanh-GELU GeGLU
                (its config says "gelu", as Gemma's first releases do), head_dim 12, multi-query
  tiny-gemma2   Gemma2ForCausalLM: (1 + w) RMSNorms before and after attention and the MLP,
                embeddings x sqrt(32), tanh-GELU GeGLU, head_dim 12, query_pre_attn_scalar 20,
                attention soft cap 1.5 and final soft cap 2.5 (both change greedy tokens),
                sliding window 3 on layers 0 and 2
  tiny-gemma3   Gemma3ForCausalLM (gemma3_text): Gemma 2's block with q/k norms and no soft
                caps, sliding window 3 on layers 0 and 2 (layer_types), a global rotary table
                (theta 1e6, linear scaling 4) and a local one (theta 1e4), one key/value head
  tiny-gemma3-mm
                Gemma3ForConditionalGeneration: tiny-gemma3's text model inside an image and
                text checkpoint (a 1-layer SigLIP tower), config under text_config, weights
                under model.language_model
  tiny-phi3     Phi3ForCausalLM: fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5,
                LongRoPE with original_max_position_embeddings 8 (prompts of more than 8
                tokens take the long factors, shorter ones the short)

and models/tiny-{llama,qwen2,mistral,qwen3,gemma,gemma2,gemma3,phi3}-cls/: each family's
*ForSequenceClassification (Gemma 3: Gemma3TextForSequenceClassification), 2 layers, the same
settings as its causal model above (Llama, Qwen2, Mistral: make_tiny_llamas.py's), three labels
(negative, neutral, positive), `score` read at the last token; tiny-qwen3-cls without the
window (see classifiers()).

Usage: make_tiny_decoders.py [--out models]   (run with the reference venv's python)
"""

import argparse
import os

import torch

from make_tiny_llamas import TOKENIZER, EOS, build


def common(vocab, eos, layers=3):
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6,
                bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)


def gemma3_text(vocab, eos):
    from transformers import Gemma3TextConfig
    return Gemma3TextConfig(**common(vocab, eos, layers=4), num_key_value_heads=1, head_dim=12,
                            query_pre_attn_scalar=16, sliding_window=3,
                            layer_types=["sliding_attention", "full_attention"] * 2,
                            rope_parameters={
                                "full_attention": {"rope_type": "linear", "factor": 4.0,
                                                   "rope_theta": 1000000.0},
                                "sliding_attention": {"rope_type": "default",
                                                      "rope_theta": 10000.0}},
                            attn_logit_softcapping=None, final_logit_softcapping=None)


def models(vocab, eos):
    from transformers import (GemmaConfig, GemmaForCausalLM, Gemma2Config, Gemma2ForCausalLM, Gemma3Config,
                              Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Phi3Config,
                              Phi3ForCausalLM, Qwen3Config, Qwen3ForCausalLM, SiglipVisionConfig)
    qwen3 = Qwen3Config(**common(vocab, eos), num_key_value_heads=2, head_dim=12,
                        tie_word_embeddings=False, use_sliding_window=True, sliding_window=3,
                        max_window_layers=1,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    gemma = GemmaConfig(**common(vocab, eos), num_key_value_heads=1, head_dim=12,
                        hidden_act="gelu")
    gemma2 = Gemma2Config(**common(vocab, eos), num_key_value_heads=2, head_dim=12,
                          query_pre_attn_scalar=20, attn_logit_softcapping=1.5,
                          final_logit_softcapping=2.5, sliding_window=3)
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                num_attention_heads=2, image_size=16, patch_size=8)
    multimodal = Gemma3Config(text_config=gemma3_text(vocab, eos).to_dict(),
                              vision_config=vision.to_dict(), mm_tokens_per_image=4,
                              image_token_index=eos, boi_token_index=eos, eoi_token_index=eos,
                              eos_token_id=eos, pad_token_id=eos, bos_token_id=eos)
    phi3 = Phi3Config(**common(vocab, eos), num_key_value_heads=2,
                      original_max_position_embeddings=8,
                      rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                       "partial_rotary_factor": 0.5,
                                       "short_factor": [1.0, 1.5], "long_factor": [2.0, 5.0]})
    return [("tiny-qwen3", Qwen3ForCausalLM, qwen3, {}),
            ("tiny-gemma", GemmaForCausalLM, gemma, {"gemma": True}),
            ("tiny-gemma2", Gemma2ForCausalLM, gemma2, {"gemma": True}),
            ("tiny-gemma3", Gemma3ForCausalLM, gemma3_text(vocab, eos), {"gemma": True}),
            ("tiny-gemma3-mm", Gemma3ForConditionalGeneration, multimodal, {"gemma": True}),
            ("tiny-phi3", Phi3ForCausalLM, phi3, {})]


LABELS = {"id2label": {0: "negative", 1: "neutral", 2: "positive"},
          "label2id": {"negative": 0, "neutral": 1, "positive": 2}}


def classifiers(vocab, eos):
    """(name, class, config, save) of each family's classifier: its causal model's config with
    2 layers and three labels."""
    import transformers
    from make_tiny_llamas import models as llamas
    out = []
    for name, cls, config, save in llamas(vocab, eos) + models(vocab, eos):
        if name in ("tiny-qwen2-window", "tiny-gemma3-mm"):
            continue
        fields = {**config.to_dict(), "num_hidden_layers": 2, **LABELS}
        if fields.get("layer_types"):
            fields["layer_types"] = fields["layer_types"][:2]
        if name == "tiny-qwen3":
            # Its window would leave every token but the last three out of the last layer's
            # reach, so that they reach the label only through RMSNorms: their gradient x
            # input is then 0 up to rounding (an RMSNorm ignores its input's scale), and the
            # correlations' ranks of such values are noise. tiny-qwen3 tests the window.
            fields.update(use_sliding_window=False, layer_types=None)
        config = type(config)(**fields)
        family = cls.__name__.replace("ForCausalLM", "")
        head = "Gemma3TextForSequenceClassification" if family == "Gemma3" else \
            f"{family}ForSequenceClassification"
        out.append((f"{name}-cls", getattr(transformers, head), config,
                    {k: v for k, v in save.items() if k == "gemma"}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(TOKENIZER), ".."))
    args = ap.parse_args()
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(TOKENIZER)
    vocab, eos = tok.get_vocab_size(), tok.token_to_id(EOS)
    for name, cls, config, save in models(vocab, eos) + classifiers(vocab, eos):
        build(os.path.join(os.path.abspath(args.out), name), cls, config, save)


if __name__ == "__main__":
    main()
