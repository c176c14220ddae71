"""The README's notebook example: a transformers model's attentions → attention flow → the
figure. `python python/examples/transformers_flow.py [MODEL] [OUT.svg]` (default: the tiny
test checkpoint models/tiny-bert-modern, docs/figure-python.svg). Needs torch and
transformers."""

import sys

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

import bert_explain

model_id = sys.argv[1] if len(sys.argv) > 1 else "models/tiny-bert-modern"
out = sys.argv[2] if len(sys.argv) > 2 else "docs/figure-python.svg"

# 1. The model, with eager attention so that it can return its attention probabilities.
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForMaskedLM.from_pretrained(model_id, attn_implementation="eager").eval()
inputs = tokenizer("The author talked to Sara about [MASK] book", return_tensors="pt")
with torch.no_grad():
    attentions = model(**inputs, output_attentions=True).attentions  # L × [1, H, n, n]
tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
target = tokens.index(tokenizer.mask_token)

# 2. The maps, straight from the tuple: each [layers, n] as a NumPy array.
flow = bert_explain.attention_flow(attentions, target)
rollout = bert_explain.attention_rollout(attentions, target)
for token, f, r in zip(tokens, flow[-1], rollout[-1]):
    print(f"{token:>8}  flow {f:.3f}  rollout {r:.3f}")

# 3. The paper's figure (raw, rollout, flow per layer), drawn by bert-explain itself.
report = bert_explain.explain_attention(attentions, tokens, figure=out, name=model_id)
print("wrote", out, "- most relevant by flow:", max(zip(flow[-1], tokens))[1])
