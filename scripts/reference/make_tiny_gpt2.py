#!/usr/bin/env python3
"""Make models/tiny-gpt2/: a tiny GPT-2 (GPT2LMHeadModel) for the causal-LM tests.

Deterministic (fixed seeds), well under 2 MB:

  config.json          model_type "gpt2", 3 layers, 4 heads, n_embd 32, n_positions 32,
                       eos/bos = <|endoftext|>, tied lm_head (as openai-community/gpt2)
  model.safetensors    transformers' own names ("transformer.h.0.attn.c_attn.weight", Conv1D
                       weights stored [in, out]); no lm_head.weight (tied to wte)
  tokenizer.json       a byte-level BPE (GPT-2's pre-tokenizer and decoder) trained here on a
                       small built-in corpus, ~400 entries
  vocab.json, merges.txt  the same BPE in GPT-2's original two-file form
  tokenizer_config.json

Weights are drawn with a wide spread (std 0.4, embeddings 0.6, noisy LayerNorm) instead of
GPT-2's 0.02, so that attention is clearly peaked and greedy decoding has clear winners (a test
that means something, with no near-ties between the Rust and PyTorch argmax).

Usage: make_tiny_gpt2.py [--out models/tiny-gpt2]   (run with the reference venv's python)
"""

import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EOS = "<|endoftext|>"
SEED = 6
VOCAB_SIZE = 400

CORPUS = """
The author talked to Sara about her book. The author talked to John about his book.
Mary tried to convince John of her love. John brought flowers for Mary, and she liked them.
The keys to the cabinet are on the table. The key to the cabinets is on the table.
She asked the doctor about her backache. He asked the teacher about his homework.
Once upon a time there was a little girl who lived in a village near the forest.
The cat sat on the mat, and the dog slept by the door. It was a cold and rainy night.
We went to the city to see our friends, and then we came back home for dinner.
What did you say? I said that the weather is good today, so let us go for a walk!
Students read books in the school library; teachers write letters to their parents.
The river runs through the valley, past the old mill and the small stone bridge.
""" * 3


def build_tokenizer(folder):
    """A byte-level BPE trained on CORPUS; writes tokenizer.json, vocab.json, merges.txt."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator([CORPUS], vocab_size=VOCAB_SIZE, min_frequency=2,
                            special_tokens=[EOS], show_progress=False)
    bpe.save_model(folder)  # vocab.json + merges.txt
    tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=EOS, eos_token=EOS,
                            unk_token=EOS, model_max_length=32)
    tok.save_pretrained(folder)
    return tok


def spread_init(model, generator):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("lm_head"):
                continue  # tied to transformer.wte
            if ".ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.15 * torch.randn(p.shape, generator=generator))
            elif ".ln_" in name and name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith(("wte.weight", "wpe.weight")):
                p.copy_(0.6 * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=generator))


def quiet_unprintable_bytes(model, tok):
    """Shrink the embeddings of the single-byte tokens outside printable ASCII, so that greedy
    text is readable words rather than stray UTF-8 fragments (they stay in the vocabulary)."""
    from tokenizers.pre_tokenizers import ByteLevel

    byte_chars = ByteLevel.alphabet()
    printable = {c for c in byte_chars if len(c.encode()) == 1 and c.isprintable()} | {"\u0120"}
    with torch.no_grad():
        wte = model.transformer.wte.weight
        for token, i in tok.get_vocab().items():
            if len(token) == 1 and token in byte_chars and token not in printable:
                wte[i] *= 0.05


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "tiny-gpt2"))
    args = ap.parse_args()
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    out = args.out
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    tok = build_tokenizer(out)
    eos = tok.convert_tokens_to_ids(EOS)
    config = GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=32, n_layer=3, n_head=4,
                        bos_token_id=eos, eos_token_id=eos, attn_implementation="eager")
    torch.manual_seed(SEED)
    model = GPT2LMHeadModel(config).eval()
    spread_init(model, torch.Generator().manual_seed(SEED))
    quiet_unprintable_bytes(model, tok)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(), "lm_head not tied"
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
          if not k.startswith("lm_head") and not k.endswith((".attn.bias", ".attn.masked_bias"))}
    save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)

    # Reload exactly as the reference does and report how peaked attention is.
    tok = AutoTokenizer.from_pretrained(out)
    loaded = GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    enc = tok("The author talked to Sara about", return_tensors="pt")
    with torch.no_grad():
        a = model(**enc, output_attentions=True)
        b = loaded(**enc, output_attentions=True)
    assert torch.allclose(a.logits, b.logits, atol=1e-6), "reload changed the model"
    att = torch.stack(b.attentions)[:, 0]  # L, H, n, n
    probs = torch.softmax(b.logits[0, -1], -1)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"tiny-gpt2: {sorted(os.listdir(out))}, {size / 1e6:.2f} MB, vocab {len(tok)}, eos {eos}, "
          f"tokens {tok.convert_ids_to_tokens(enc['input_ids'][0])}, max attention per row "
          f"(rows past the first) mean {att.max(-1).values[..., 1:].mean():.3f}, next-token top p "
          f"{probs.max():.3f} (uniform {1 / len(probs):.4f})", file=sys.stderr)
    if size >= 2_000_000:
        raise SystemExit(f"tiny-gpt2 is {size} bytes, over 2 MB")
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["model_type"] == "gpt2"


if __name__ == "__main__":
    main()
