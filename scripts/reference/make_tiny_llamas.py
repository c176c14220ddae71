#!/usr/bin/env python3
"""Make models/tiny-{llama,qwen2,qwen2-window,mistral}/: tiny random decoders for the causal-LM
tests (issue 15).

Deterministic (fixed seed), each well under 1 MB, all with models/tiny-gpt2's byte-level BPE
tokenizer.json (no chat template: the prompt is encoded as it is):

  tiny-llama    LlamaForCausalLM, 3 layers, 4 query heads over 2 key/value heads (GQA),
                rope_theta 500000 with llama3 rope scaling (original context 16, so it matters),
                untied lm_head, saved SHARDED (model.safetensors.index.json + shards); its
                tokenizer.json prepends a BOS token as Llama 3's does (post-processor
                Sequence[ByteLevel, TemplateProcessing])
  tiny-qwen2    Qwen2ForCausalLM (q/k/v biases), tied embeddings, rope_theta 1e6, saved in bf16
  tiny-qwen2-window
                tiny-qwen2's configuration with Qwen2's own sliding window: use_sliding_window,
                sliding_window 3, max_window_layers 1 (layer 0 full attention, layers 1 and 2
                windowed; config.json also gets transformers' layer_types), float32
  tiny-mistral  MistralForCausalLM, one key/value head, sliding_window 4, linear rope scaling 2

Weights are drawn wide (std 0.4, embeddings 0.6, noisy RMSNorm weights) so that attention is
peaked and greedy decoding has clear winners.

  --big DIR     instead: a random ~100M-parameter Llama (not committed) for the memory numbers
  --one-b DIR   instead: a random Llama in Llama-3.2-1B's shape (1.24 B parameters, not
                committed): its config.json's sizes and rope scaling, vocabulary rows beyond
                the tiny tokenizer's zero so that they are never generated
  --qwen-half-b DIR   the same in Qwen2.5-0.5B's shape (0.49 B parameters)

Usage: make_tiny_llamas.py [--out models]   (run with the reference venv's python)
"""

import argparse
import json
import os
import shutil
import sys

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER = os.path.join(REPO, "models", "tiny-gpt2", "tokenizer.json")
EOS = "<|endoftext|>"
SEED = 15


def common(vocab, eos):
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6,
                bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)


def models(vocab, eos):
    from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                              Qwen2Config, Qwen2ForCausalLM)
    llama = LlamaConfig(**common(vocab, eos), num_key_value_heads=2, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                         "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 16})
    qwen2 = Qwen2Config(**common(vocab, eos), num_key_value_heads=2, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                        use_sliding_window=False)
    qwen2_window = Qwen2Config(**common(vocab, eos), num_key_value_heads=2,
                               tie_word_embeddings=True,
                               rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                               use_sliding_window=True, sliding_window=3, max_window_layers=1)
    mistral = MistralConfig(**common(vocab, eos), num_key_value_heads=1, sliding_window=4,
                            tie_word_embeddings=False,
                            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                             "factor": 2.0})
    return [("tiny-llama", LlamaForCausalLM, llama, dict(max_shard_size="100KB", bos=True)),
            ("tiny-qwen2", Qwen2ForCausalLM, qwen2, dict(dtype=torch.bfloat16)),
            ("tiny-qwen2-window", Qwen2ForCausalLM, qwen2_window, {}),
            ("tiny-mistral", MistralForCausalLM, mistral, {})]


def spread_init(model, generator, norm_centre=1.0, embedding=0.6):
    """norm_centre: where norm weights are drawn around (0 for Gemma's (1 + w) norms);
    embedding: the embeddings' spread (Gemma multiplies them by sqrt(hidden))."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(norm_centre + 0.15 * torch.randn(p.shape, generator=generator))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(embedding * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=generator))


def write_tokenizer(out, bos=False):
    if bos:
        from tokenizers import Tokenizer, processors
        tok = Tokenizer.from_file(TOKENIZER)
        tok.post_processor = processors.Sequence([
            tok.post_processor,
            processors.TemplateProcessing(single=f"{EOS} $A", pair=f"{EOS} $A {EOS} $B",
                                          special_tokens=[(EOS, tok.token_to_id(EOS))])])
        tok.save(os.path.join(out, "tokenizer.json"))
    else:
        shutil.copy(TOKENIZER, os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS,
                   "eos_token": EOS, "unk_token": EOS, "model_max_length": 64}, f, indent=1)
        f.write("\n")


def build(folder, cls, config, save):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    torch.manual_seed(SEED)
    config._attn_implementation = "eager"
    model = cls(config).eval()
    gemma = save.get("gemma", False)
    spread_init(model, torch.Generator().manual_seed(SEED), norm_centre=0.0 if gemma else 1.0,
                embedding=0.1 if gemma else 0.6)
    if "dtype" in save:
        model = model.to(save["dtype"])
    model.save_pretrained(folder, max_shard_size=save.get("max_shard_size", "5GB"))
    write_tokenizer(folder, save.get("bos", False))
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{os.path.basename(folder)}: {sorted(os.listdir(folder))}, {size / 1e6:.2f} MB",
          file=sys.stderr)
    if size >= 1_000_000:
        raise SystemExit(f"{folder} is {size} bytes, over 1 MB")


HUB_CONFIGS = {
    "1b": {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
           "attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
           "initializer_range": 0.02, "intermediate_size": 8192,
           "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
           "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
           "pretraining_tp": 1, "rms_norm_eps": 1e-05,
           "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
           "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
           "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256},
    "qwen": {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
             "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
             "intermediate_size": 4864, "max_position_embeddings": 32768,
             "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
             "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
             "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
             "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
             "use_mrope": False, "use_sliding_window": False, "vocab_size": 151936},
}


def big(folder, shape="100m"):
    """A random Llama of about 100M parameters (hidden 768, 12 layers, 12 heads, 4 kv heads),
    or in the shape of Llama-3.2-1B ("1b") or Qwen2.5-0.5B ("qwen")."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from tokenizers import Tokenizer
    vocab = Tokenizer.from_file(TOKENIZER).get_vocab_size()
    eos = Tokenizer.from_file(TOKENIZER).token_to_id(EOS)
    cls = LlamaForCausalLM
    if shape == "qwen":
        # Qwen/Qwen2.5-0.5B's config.json, but for the tokenizer and its ids.
        cls = Qwen2ForCausalLM
        config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                             num_hidden_layers=24, num_attention_heads=14,
                             num_key_value_heads=2, max_position_embeddings=32768,
                             rms_norm_eps=1e-6, rope_theta=1000000.0, sliding_window=32768,
                             use_sliding_window=False, max_window_layers=24,
                             tie_word_embeddings=True, bos_token_id=eos, eos_token_id=[])
    elif shape == "1b":
        # meta-llama/Llama-3.2-1B's config.json, but for the tokenizer and its ids.
        config = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                             num_hidden_layers=16, num_attention_heads=32,
                             num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                             rms_norm_eps=1e-5, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                              "factor": 32.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 8192},
                             bos_token_id=eos, eos_token_id=[])
    else:
        config = LlamaConfig(vocab_size=vocab, hidden_size=768, intermediate_size=3072,
                             num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                             max_position_embeddings=1024, bos_token_id=eos, eos_token_id=[],
                             tie_word_embeddings=False)
    torch.manual_seed(SEED)
    model = cls(config).to(torch.bfloat16)
    if shape != "100m":
        with torch.no_grad():
            model.model.embed_tokens.weight[vocab:] = 0.0
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, max_shard_size="100MB" if shape == "100m" else "1GB")
    if shape != "100m":
        # config.json as the Hub holds it (written by transformers 4: rope_theta and
        # rope_scaling at the top, Qwen2's unused sliding_window, no layer_types).
        hub = dict(HUB_CONFIGS[shape], bos_token_id=eos, eos_token_id=eos)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(hub, f, indent=2)
    write_tokenizer(folder)
    print(f"big llama: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters",
          file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models"))
    ap.add_argument("--big")
    ap.add_argument("--one-b")
    ap.add_argument("--qwen-half-b")
    args = ap.parse_args()
    if args.big:
        return big(args.big)
    if args.one_b:
        return big(args.one_b, "1b")
    if args.qwen_half_b:
        return big(args.qwen_half_b, "qwen")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(TOKENIZER)
    vocab, eos = tok.get_vocab_size(), tok.token_to_id(EOS)
    for name, cls, config, save in models(vocab, eos):
        build(os.path.join(args.out, name), cls, config, save)


if __name__ == "__main__":
    main()
