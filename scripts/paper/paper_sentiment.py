#!/usr/bin/env python3
"""The sentiment correlations scored as the paper's own sentiment code scores them
(`compute_corel_distilbert_sst.py` in samiraabnar/attention_flow), on this project's
sentiment model and reviews (issue 30).

That code differs from the paper's agreement notebooks in four ways, all followed here:
- each map is taken from every query position and reduced by its maximum over them (not the
  [CLS] row): raw attention (the heads' mean), rollout and flow (residual 0.5, renormalised);
- the importance is |Σ_d ∂z/∂h_jd|, the gradient of the positive class's logit z (not its
  probability) at the embedding block's output h, over every token, [CLS] and [SEP] included;
- the correlation is Spearman's formula 1 − 6Σd²/(n(n² − 1)) on dense ranks;
- it reports layers 0, 2, 4 and 5 of a 6-layer model (1, 3, 5 and 6 here), mean and standard
  deviation over the sentences.

The maps are bert-explain's (`--all-positions`, batch mode, read from its standard output);
the gradient is computed here with PyTorch transformers from the same checkpoint, and each
review's tokens are checked to be the report's. The reviews are data/fine-foods-test.jsonl
cut after their 40th word, as scripts/paper/faithfulness.sh cuts them with CUT_WORDS=40.

    .venv-reference/bin/python scripts/paper/paper_sentiment.py [--limit N] [--cut 40]
        [--model DIR] [--bin PATH] [--out FILE.md]

Prints a markdown table (and writes it to --out) with the paper's logged values beside.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from scipy.stats import rankdata, spearmanr
from transformers import AutoModelForSequenceClassification, AutoTokenizer

REPO = Path(__file__).resolve().parents[2]
LAYERS = (1, 3, 5, 6)
MAPS = ("raw", "rollout", "flow")
# The paper's logs (correlation_logs/correlations_bert_sst_max7_flow and _max6, _max6_flow):
# mean over 101 SST-2 test sentences at layers 0, 2, 4, 5, two runs each.
PAPER = {
    "raw": ((0.073, 0.076), (0.130, 0.084), (0.123, 0.104), (0.039, 0.036)),
    "rollout": ((0.102, 0.100), (0.042, 0.037), (0.079, 0.086), (0.108, 0.116)),
    "flow": ((0.102, 0.100), (0.132, 0.131), (0.167, 0.170), (0.148, 0.129)),
}


def cut_reviews(path, cut, limit):
    """The reviews' texts, each cut after its `cut`th word as faithfulness.sh does."""
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        text = json.loads(line)["text"]
        words = list(re.finditer(r"\S+", text))
        if cut and len(words) > cut:
            text = text[: words[cut - 1].end()]
        texts.append(text)
        if limit and len(texts) == limit:
            break
    return texts


def paper_spearman(x, y):
    """The paper's formula on dense ranks."""
    d = rankdata(x, method="dense") - rankdata(y, method="dense")
    n = len(x)
    return 1.0 - 6.0 * float(np.sum(d * d)) / (n * (n * n - 1.0))


class LogitGradient:
    """|Σ_d ∂z_positive/∂h_jd| at the first layer's input h (the embedding block's output)."""

    def __init__(self, model_dir):
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        labels = self.model.config.id2label
        # The positive class: "great" in this model; the paper's y = −1 is its last logit.
        self.positive = next((i for i, l in labels.items() if l == "great"), len(labels) - 1)

    def __call__(self, text):
        encoded = self.tokenizer(text, return_tensors="pt")
        caught = {}

        def hook(module, args, kwargs):
            if "h" not in caught:
                hidden = args[0] if args else kwargs["hidden_states"]
                hidden.retain_grad()
                caught["h"] = hidden

        handle = self.model.bert.encoder.layer[0].register_forward_pre_hook(hook, with_kwargs=True)
        try:
            logits = self.model(**encoded).logits
            logits[0, self.positive].backward()
        finally:
            handle.remove()
        tokens = self.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
        return tokens, caught["h"].grad[0].sum(dim=-1).abs().double().numpy()


def reports(binary, model, texts):
    """bert-explain's reports with --all-positions, one per text, streamed."""
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp, "input.jsonl")
        lines.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        command = [binary, "--model", str(model), "--input", str(lines), "--all-positions"]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as run:
            for line in run.stdout:
                yield json.loads(line)
        if run.returncode != 0:
            sys.exit(f"bert-explain exited {run.returncode}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--cut", type=int, default=40)
    parser.add_argument("--model", default=REPO / "models/downloaded/minilm-fine-foods")
    parser.add_argument("--data", default=REPO / "data/fine-foods-test.jsonl")
    parser.add_argument("--bin", default=REPO / "target/release/bert-explain")
    parser.add_argument("--out")
    args = parser.parse_args()

    texts = cut_reviews(Path(args.data), args.cut, args.limit)
    gradient = LogitGradient(args.model)
    paper = {m: {l: [] for l in LAYERS} for m in MAPS}
    usual = {m: {l: [] for l in LAYERS} for m in MAPS}
    mismatched = 0
    for k, (text, report) in enumerate(zip(texts, reports(args.bin, args.model, texts))):
        tokens, importance = gradient(text)
        if tokens != report["tokens"]:
            mismatched += 1
            continue
        for name in MAPS:
            maps = report["all_positions"][name]
            for layer in LAYERS:
                relevance = np.asarray(maps[layer - 1]).max(axis=0)
                paper[name][layer].append(paper_spearman(relevance, importance))
                usual[name][layer].append(spearmanr(relevance, importance).statistic)
        if (k + 1) % 100 == 0:
            print(f"{k + 1} reviews", file=sys.stderr)

    count = len(paper["raw"][LAYERS[0]])
    lines = [
        f"Sentiment scored as the paper's sentiment code scores it: {count} test reviews cut "
        f"after word {args.cut} ({mismatched} left out: tokens differ from the report's), "
        "each map's maximum over every query position against |Σ_d ∂z_positive/∂h_jd| at "
        "the embedding block's output, every token; the paper's dense-rank formula, mean ± "
        "standard deviation (standard error) over the reviews; in brackets, Spearman with "
        "average ranks. The paper: DistilBERT fine-tuned on SST-2, 101 test sentences, two "
        "logged runs.",
        "",
        "| layer | map | this model | Spearman (average ranks) | the paper's runs |",
        "|---|---|---|---|---|",
    ]
    for i, layer in enumerate(LAYERS):
        for name in MAPS:
            values = np.asarray(paper[name][layer])
            mean, std = values.mean(), values.std()
            se = std / np.sqrt(len(values))
            plain = np.nanmean(usual[name][layer])
            runs = " / ".join(f"{v:.3f}" for v in PAPER[name][i])
            lines.append(
                f"| {layer} | {name} | {mean:+.3f} ± {std:.3f} ({se:.3f}) | {plain:+.3f} | {runs} |"
            )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
