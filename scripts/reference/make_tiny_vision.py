#!/usr/bin/env python3
"""Make the tiny vision-transformer checkpoints (SPEC §10) under models/.

Deterministic (one fixed torch seed per model), each folder well under 300 KB, written with
transformers' save_pretrained (config.json with `architectures`, model.safetensors, float32) plus a
hand-written preprocessor_config.json laid out as the real checkpoint's:

  tiny-vit-cls        ViTForImageClassification, image 32, patch 8 (4×4 grid, 17 tokens);
                      preprocessor as google/vit-base-patch16-224's (ViTImageProcessor: resize to
                      32×32 bilinear, rescale 1/255, mean = std = 0.5)
  tiny-vit-encoder    ViTModel (no head, with its pooler), same shapes; the preprocessor in the
                      legacy layout (feature_extractor_type ViTFeatureExtractor, "size": 32 as an
                      integer, no rescale fields), which transformers reads as tiny-vit-cls's
  tiny-deit-teacher   DeiTForImageClassificationWithTeacher ([CLS] + [DIST], logits = the mean of
                      the two heads'), image 32, patch 8 (18 tokens); preprocessor as
                      facebook/deit-base-distilled-patch16-224's (DeiTImageProcessor: resize to
                      40×40 bicubic, centre crop 32×32, ImageNet mean/std); 3 layers
  tiny-dinov2-cls     Dinov2ForImageClassification (classifier on [CLS ; mean of the patch
                      tokens]), image_size 56, patch 7: position embeddings for an 8×8 grid, but
                      the preprocessor (as facebook/dinov2-small's BitImageProcessor: shortest edge
                      40 bicubic, centre crop 28×28, ImageNet mean/std, do_convert_rgb) gives a
                      4×4 grid, so transformers interpolates the position embeddings (bicubic);
                      mlp_ratio 2, layer scales random per channel
  tiny-dinov2-registers-cls
                      Dinov2WithRegistersForImageClassification, 2 register tokens (no position
                      embedding; [CLS] [REG1] [REG2] patches), otherwise as tiny-dinov2-cls
                      (its interpolation is bicubic with antialias); 3 layers
  tiny-dinov2-encoder Dinov2Model (no head), as tiny-dinov2-cls

All: hidden 32, 4 heads, gelu (erf), MLP 64, 3 labels cat / coffee / rocket where there is a head.
After construction EVERY parameter is redrawn from a seeded torch.Generator (init_spread below):
LayerNorm weights 1 ± 0.2 and biases ±0.1, layer scales uniform in [0.25, 1.5] per channel,
[CLS]/[DIST]/register/mask tokens N(0, 1), position embeddings N(0, 0.6²), patch projection
N(0, 0.12²), attention and MLP weights N(0, 0.45²), classifier weights N(0, 0.25²), biases
N(0, 0.2²), so attention rows are peaked and far from uniform, and nothing is exactly 0 or 1
(checked). A wrong tensor name, a missing layer scale, a wrong pooling or a wrong interpolation
each change the maps and the probabilities well beyond the fixtures' tolerance.

The script reloads each folder with transformers (no missing or unexpected tensors, the same
outputs), runs one image through the checkpoint's own image processor (the Pillow backend) and
prints its size, the mean largest attention per row and the label probabilities.

Usage: make_tiny_vision.py [--out models] [--only NAME[,NAME]]   (the reference venv's python)
"""

import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

HIDDEN, HEADS, INTERMEDIATE = 32, 4, 64
LABELS = ["cat", "coffee", "rocket"]
HEADS_OUT = ("classifier", "cls_classifier", "distillation_classifier")
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
RESCALE = 0.00392156862745098  # 1/255 as the Hub's preprocessor_config.json files write it


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def labels():
    return {"id2label": {i: n for i, n in enumerate(LABELS)},
            "label2id": {n: i for i, n in enumerate(LABELS)}}


# ---------------------------------------------------------------- preprocessors

VIT_PREPROCESSOR = {  # google/vit-base-patch16-224's, in the current layout, at 32×32
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "ViTImageProcessor",
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "rescale_factor": RESCALE,
    "size": {"height": 32, "width": 32},
}
VIT_LEGACY_PREPROCESSOR = {  # the same, as transformers 4's ViTFeatureExtractor saved it
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ViTFeatureExtractor",
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "size": 32,
}
DEIT_PREPROCESSOR = {  # facebook/deit-base-distilled-patch16-224's (256 → 224) at 40 → 32
    "crop_size": {"height": 32, "width": 32},
    "do_center_crop": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": IMAGENET_MEAN,
    "image_processor_type": "DeiTImageProcessor",
    "image_std": IMAGENET_STD,
    "resample": 3,
    "rescale_factor": RESCALE,
    "size": {"height": 40, "width": 40},
}
DINOV2_PREPROCESSOR = {  # facebook/dinov2-small's (shortest edge 256, crop 224) at 40 → 28
    "crop_size": {"height": 28, "width": 28},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": IMAGENET_MEAN,
    "image_processor_type": "BitImageProcessor",
    "image_std": IMAGENET_STD,
    "resample": 3,
    "rescale_factor": RESCALE,
    "size": {"shortest_edge": 40},
}


# ---------------------------------------------------------------- configurations

def vit_config(**extra):
    from transformers import ViTConfig

    return ViTConfig(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS,
                     intermediate_size=INTERMEDIATE, hidden_act="gelu", image_size=32, patch_size=8,
                     encoder_stride=8, **extra)


def deit_config(**extra):
    from transformers import DeiTConfig

    return DeiTConfig(hidden_size=HIDDEN, num_hidden_layers=3, num_attention_heads=HEADS,
                      intermediate_size=INTERMEDIATE, hidden_act="gelu", image_size=32, patch_size=8,
                      encoder_stride=8, **extra)


def dinov2_config(**extra):
    from transformers import Dinov2Config

    return Dinov2Config(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, mlp_ratio=2,
                        hidden_act="gelu", image_size=56, patch_size=7, layerscale_value=1.0, **extra)


def dinov2_registers_config(**extra):
    from transformers import Dinov2WithRegistersConfig

    return Dinov2WithRegistersConfig(hidden_size=HIDDEN, num_hidden_layers=3, num_attention_heads=HEADS,
                                     mlp_ratio=2, hidden_act="gelu", image_size=56, patch_size=7,
                                     layerscale_value=1.0, num_register_tokens=2, **extra)


# name: (model class, config maker, config extras, preprocessor_config.json, seed)
MODELS = {
    "tiny-vit-cls": ("ViTForImageClassification", vit_config, labels, VIT_PREPROCESSOR, 1001),
    "tiny-vit-encoder": ("ViTModel", vit_config, dict, VIT_LEGACY_PREPROCESSOR, 1002),
    "tiny-deit-teacher": ("DeiTForImageClassificationWithTeacher", deit_config, labels, DEIT_PREPROCESSOR, 1003),
    "tiny-dinov2-cls": ("Dinov2ForImageClassification", dinov2_config, labels, DINOV2_PREPROCESSOR, 1004),
    "tiny-dinov2-registers-cls": ("Dinov2WithRegistersForImageClassification", dinov2_registers_config, labels,
                                  DINOV2_PREPROCESSOR, 1005),
    "tiny-dinov2-encoder": ("Dinov2Model", dinov2_config, dict, DINOV2_PREPROCESSOR, 1006),
}


# ---------------------------------------------------------------- weights

def init_spread(model, generator):
    """Redraw every parameter (in name order) from `generator`, by what it is."""
    def normal(p, std, mean=0.0):
        return mean + std * torch.randn(p.shape, generator=generator)

    with torch.no_grad():
        modules = dict(model.named_modules())
        for name, p in sorted(model.named_parameters(), key=lambda x: x[0]):
            owner, _, leaf = name.rpartition(".")
            module = modules[owner]
            if isinstance(module, torch.nn.LayerNorm):
                value = normal(p, 0.2, 1.0) if leaf == "weight" else normal(p, 0.1)
            elif leaf == "lambda1":  # DINOv2's layer scales
                value = 0.25 + 1.25 * torch.rand(p.shape, generator=generator)
            elif leaf in ("cls_token", "distillation_token", "register_tokens", "mask_token"):
                value = normal(p, 1.0)
            elif leaf == "position_embeddings":
                value = normal(p, 0.6)
            elif isinstance(module, torch.nn.Conv2d):  # the patch projection
                value = normal(p, 0.12) if leaf == "weight" else normal(p, 0.2)
            elif leaf == "bias":
                value = normal(p, 0.2)
            elif owner in HEADS_OUT:  # softer logits: probabilities well inside (0, 1)
                value = normal(p, 0.25)
            else:
                value = normal(p, 0.45)
            p.copy_(value)
        for name, p in model.named_parameters():
            if bool((p == 0).any()) or bool((p == 1).any()):
                raise SystemExit(f"{name}: an element is exactly 0 or 1 after init_spread")


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def make(name, out_root):
    import transformers

    model_class, make_config, extras, preprocessor, seed = MODELS[name]
    config = make_config(**extras())
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    init_spread(model, generator)
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
    write_json(os.path.join(out, "preprocessor_config.json"), preprocessor)
    return model, out


def probe_image():
    """A 45×38 test picture (not a fixture): a gradient with a disc and a bar."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:38, 0:45]
    rgb = np.stack([x * 5, y * 6, 255 - x * 3], axis=-1).astype(np.float64)
    disc = (x - 15) ** 2 + (y - 20) ** 2 < 81
    rgb[disc] = [240, 200, 40]
    rgb[5:12, 25:42] = [30, 60, 200]
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")


def check(name, out, model):
    """Reload with transformers: no missing/unexpected tensors, the Pillow backend, same outputs."""
    import transformers

    model_class = MODELS[name][0]
    loaded, info = getattr(transformers, model_class).from_pretrained(
        out, attn_implementation="eager", output_loading_info=True, dtype=torch.float32)
    loaded.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                                          "error_msgs")}
    if bad:
        raise SystemExit(f"{name}: loading problems: {bad}")
    processor = transformers.AutoImageProcessor.from_pretrained(out, backend="pil")
    if processor.backend != "pil":
        raise SystemExit(f"{name}: {type(processor).__name__} is not the Pillow backend")
    pixels = processor(probe_image(), return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        a = model(pixel_values=pixels, output_attentions=True)
        b = loaded(pixel_values=pixels, output_attentions=True)
    diff = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))
    att = torch.stack(b.attentions)[:, 0]
    line = (f"{name}: {folder_size(out) / 1e3:.0f} KB, {type(processor).__name__}, pixels "
            f"{tuple(pixels.shape[1:])}, {att.shape[0]} layers, {att.shape[-1]} tokens, "
            f"reload diff {diff:.1e}, mean largest attention per row {att.max(-1).values.mean():.3f} "
            f"(uniform {1 / att.shape[-1]:.3f})")
    if hasattr(b, "logits"):
        line += f", p {[round(float(x), 3) for x in torch.softmax(b.logits[0], -1)]}"
        assert (a.logits - b.logits).abs().max().item() < 1e-5
    print(line, file=sys.stderr)
    assert diff < 1e-6
    assert folder_size(out) < 300_000, f"{name} is larger than 300 KB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models"))
    ap.add_argument("--only", default=None, help="comma-separated model names")
    args = ap.parse_args()
    names = list(MODELS) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; the models are {list(MODELS)}")
    torch.set_num_threads(1)
    for name in names:
        model, out = make(name, args.out)
        check(name, out, model)


if __name__ == "__main__":
    main()
