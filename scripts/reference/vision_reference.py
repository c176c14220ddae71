#!/usr/bin/env python3
"""Independent reference for bert-explain on images (SPEC §10): one (model, image, target) report.

Never uses any Rust code. Steps, all transformers' own:

  image       PIL.Image.open(path), ImageOps.exif_transpose, .convert("RGB"): exactly what
              transformers.image_utils.load_image does (so an alpha channel is dropped, not
              composited onto white; a greyscale image is replicated into R = G = B)
  processor   AutoImageProcessor.from_pretrained(model, backend="pil"): the checkpoint's
              preprocessor_config.json with the Pillow backend (ViTImageProcessorPil,
              DeiTImageProcessorPil, BitImageProcessorPil; torchvision is not installed, and
              backend="pil" makes that choice explicit). pixel_values are float32, 1×3×H×W
  model       the class named in config.json's `architectures`, float32, eval, eager attention,
              output_attentions=True

Report = SPEC §4 + §7 + §10:

  model       the folder as given on the command line
  family      config.json's model_type (vit, deit, dinov2, dinov2_with_registers)
  task        image-classification (a *ForImageClassification* head), encoder (no head)
  tokens      [CLS], [DIST] (DeiT), [REG1] … (registers), then `patch r{row} c{col}` row-major
  special     true for the tokens before the patches
  target      --target (default 0, [CLS]) and its token
  prediction  {"labels": every id2label entry with softmax(logits) in float32, most probable
              first (ties by id)}; DeiT with teacher: the softmax of its `logits`, the mean of the
              class and distillation heads' logits; null without a head
  layers, heads, relevance
              raw, rollout and flow (L × n) from reference.py's functions on the float32
              attention probabilities, in float64: head mean, residual α = 0.5, networkx
              Edmonds-Karp flow, as family_reference.py
  image       {"width", "height"} of the loaded (upright) image before preprocessing,
              "grid": [rows, cols] of the patches the processed pixels give, "patch": P

With --check (make_vision_fixtures.py always passes it), a second path written out by hand is
asserted to agree: preprocessor_config.json applied with numpy alone, including Pillow 13's
fixed-point resampling (pillow_resize: pixels within 1e-6, in practice identical), and the
network computed in float64 from config.json and model.safetensors alone (attention
probabilities within 5e-5, logits within 1e-4, and the report's raw, rollout, flow and
probabilities recomputed from it within 1e-5); see spelled_out_pixels / spelled_out_forward.

Usage: vision_reference.py --model DIR --image PNG [--target I] [--out FILE]
                           [--pixels-out FILE.npy] [--attention-out FILE.npy] [--check]
--pixels-out saves the processor's pixel_values (3×H×W float32), --attention-out the attention
probabilities (L×H×n×n float32), both with numpy.save.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import reference as ref  # noqa: E402

FAMILIES = ("vit", "deit", "dinov2", "dinov2_with_registers")


def task_of(architecture):
    return "image-classification" if "ForImageClassification" in architecture else "encoder"


def load_image(path):
    """transformers.image_utils.load_image for a local file."""
    from PIL import Image, ImageOps

    if not os.path.isfile(path):
        ref.fail(f"{path}: no such image file")
    image = Image.open(path)
    image = ImageOps.exif_transpose(image)
    return image.convert("RGB")


class Checkpoint:
    """A loaded vision folder: image processor (Pillow backend), model, family and task."""

    def __init__(self, folder):
        import torch
        import transformers

        self.folder = folder
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        self.family = config.get("model_type")
        if self.family not in FAMILIES:
            ref.fail(f"{folder}: model_type {self.family!r} is not a vision family {FAMILIES}")
        self.architecture = (config.get("architectures") or ["AutoModel"])[0]
        self.task = task_of(self.architecture)
        self.processor = transformers.AutoImageProcessor.from_pretrained(folder, backend="pil")
        if self.processor.backend != "pil":
            ref.fail(f"{folder}: {type(self.processor).__name__} is not the Pillow backend")
        cls = getattr(transformers, self.architecture)
        self.model, info = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32,
                                               output_loading_info=True)
        problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                                  "mismatched_keys")}
        if problems:
            ref.fail(f"{folder}: {problems}")
        self.model = self.model.float().eval()
        cfg = self.model.config
        patch = cfg.patch_size
        self.patch = patch if isinstance(patch, int) else int(patch[0])
        if not isinstance(patch, int) and len(set(patch)) != 1:
            ref.fail(f"{folder}: non-square patches {patch}")
        self.specials = ["[CLS]"]
        if self.family == "deit":
            self.specials.append("[DIST]")
        self.specials += [f"[REG{k + 1}]" for k in range(getattr(cfg, "num_register_tokens", 0) or 0)]

    def pixels(self, image):
        pixel_values = self.processor(images=image, return_tensors="pt")["pixel_values"]
        if pixel_values.dtype.is_floating_point and pixel_values.dtype.itemsize != 4:
            ref.fail(f"the processor gave {pixel_values.dtype} pixels")
        return pixel_values

    def label_names(self, count):
        id2label = self.model.config.id2label or {}
        return [id2label.get(i, f"LABEL_{i}") for i in range(count)]


# ---------------------------------------------------------------- a spelled-out second path

PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed point for 8-bit images


def pillow_filter(resample):
    """(support, kernel) of Pillow's BILINEAR (2) and BICUBIC (3, a = -0.5) filters."""
    if resample == 2:
        return 1.0, lambda x: max(0.0, 1.0 - abs(x))

    def bicubic(x, a=-0.5):
        x = abs(x)
        if x < 1.0:
            return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
        if x < 2.0:
            return (((x - 5) * x + 8) * x - 4) * a
        return 0.0

    if resample == 3:
        return 2.0, bicubic
    ref.fail(f"resample {resample} is not bilinear (2) or bicubic (3)")


def pillow_pass(pixels, size, resample):
    """One Pillow resampling pass along axis 1 of an H×W×C uint8 array (precompute_coeffs,
    normalize_coeffs_8bpc and ImagingResampleHorizontal_8bpc of src/libImaging/Resample.c):
    coefficients in double over the support scaled by max(scale, 1), normalised to sum 1, rounded
    half away from zero to 22-bit fixed point; each output = clip((2^21 + Σ k·p) >> 22, 0, 255)."""
    import numpy as np

    support0, kernel = pillow_filter(resample)
    n_in = pixels.shape[1]
    scale = n_in / size
    filterscale = max(scale, 1.0)
    support = support0 * filterscale
    out = np.empty((pixels.shape[0], size, pixels.shape[2]), dtype=np.int64)
    wide = pixels.astype(np.int64)
    for i in range(size):
        center = (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        weights = [kernel((j - center + 0.5) / filterscale) for j in range(lo, hi)]
        total = sum(weights)
        acc = np.full((pixels.shape[0], pixels.shape[2]), 1 << (PRECISION_BITS - 1), dtype=np.int64)
        for j, w in zip(range(lo, hi), weights):
            w = w / total if total != 0.0 else w
            fixed = int(-0.5 + w * (1 << PRECISION_BITS)) if w < 0 else int(0.5 + w * (1 << PRECISION_BITS))
            acc += wide[:, j, :] * fixed
        out[:, i, :] = np.clip(acc >> PRECISION_BITS, 0, 255)
    return out.astype(np.uint8)


def pillow_resize(rgb, width, height, resample):
    """Image.resize((width, height), resample) of an H×W×3 uint8 array, as Pillow 13.0.0 does it
    (src/libImaging/Resample.c, ImagingResampleInner): the same size is a copy; otherwise a
    horizontal and a vertical pass with an 8-bit image between them, the vertical one first when
    the height shrinks by more than twice as many pixels as the width does
    ((H - h) > 0 and (H - h) > 2·(W - w)); Pillow 12 and older always go horizontal first."""
    in_height, in_width = rgb.shape[:2]
    horizontal = lambda a: pillow_pass(a, width, resample) if a.shape[1] != width else a  # noqa: E731
    vertical = lambda a: (pillow_pass(a.transpose(1, 0, 2), height, resample).transpose(1, 0, 2)  # noqa: E731
                          if a.shape[0] != height else a)
    if (in_height - height) > 0 and (in_height - height) > 2 * (in_width - width):
        return horizontal(vertical(rgb))
    return vertical(horizontal(rgb))


def spelled_out_pixels(folder, image):
    """preprocessor_config.json applied by hand: pillow_resize (Pillow's fixed-point resampling,
    written out), an integer centre crop, the rescale in float64 cast to float32, and the
    normalisation in float32; as a check on the image processor."""
    import numpy as np

    with open(os.path.join(folder, "preprocessor_config.json")) as f:
        pre = json.load(f)
    kind = pre.get("image_processor_type") or pre["feature_extractor_type"].replace("FeatureExtractor",
                                                                                   "ImageProcessor")
    square_ints = kind != "BitImageProcessor"  # ViT/DeiT read an integer size as a square
    rgb = np.asarray(image, dtype=np.uint8)  # H×W×3
    width, height = image.size
    if pre.get("do_resize", True):
        size = pre["size"]
        if isinstance(size, int):
            size = {"height": size, "width": size} if square_ints else {"shortest_edge": size}
        if "shortest_edge" in size:
            s = size["shortest_edge"]
            short, long = min(width, height), max(width, height)
            new_long = int(s * long / short)
            width, height = (s, new_long) if width <= height else (new_long, s)
        else:
            width, height = size["width"], size["height"]
        rgb = pillow_resize(rgb, width, height, pre.get("resample", 2))
    if pre.get("do_center_crop", False):
        crop = pre["crop_size"]
        crop = {"height": crop, "width": crop} if isinstance(crop, int) else crop
        top, left = (height - crop["height"]) // 2, (width - crop["width"]) // 2
        assert top >= 0 and left >= 0, "an image smaller than the crop would be padded"
        rgb = rgb[top:top + crop["height"], left:left + crop["width"]]
    x = rgb.astype(np.float64)
    if pre.get("do_rescale", True):
        x = x * pre.get("rescale_factor", 1 / 255)
    x = x.astype(np.float32)
    if pre.get("do_normalize", True):
        mean = np.array(pre["image_mean"], dtype=np.float32)
        std = np.array(pre["image_std"], dtype=np.float32)
        x = (x - mean) / std
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def spelled_out_forward(folder, pixels):
    """The network written out from config.json and model.safetensors alone, in float64:
    (attention L×H×n×n, logits or None). Pre-norm blocks; DINOv2's layer scales; position
    embeddings resized to the patch grid with bicubic interpolation (align_corners False, with
    antialias for dinov2_with_registers), registers inserted after the positions are added."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    family = cfg["model_type"]
    w = {k: v.double() for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    prefix = next(p for p in ("vit.", "deit.", "dinov2.", "dinov2_with_registers.", "")
                  if f"{p}embeddings.cls_token" in w)
    g = lambda name: w[prefix + name]  # noqa: E731
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    patch = cfg["patch_size"]
    x = torch.as_tensor(pixels, dtype=torch.float64)[None]
    emb = F.conv2d(x, g("embeddings.patch_embeddings.projection.weight"),
                   g("embeddings.patch_embeddings.projection.bias"), stride=patch)
    rows, cols = emb.shape[-2:]
    emb = emb.flatten(2).transpose(1, 2)[0]  # (rows·cols) × hidden, row-major
    specials = [g("embeddings.cls_token")[0]]
    if family == "deit":
        specials.append(g("embeddings.distillation_token")[0])
    pos = g("embeddings.position_embeddings")[0]
    k = len(specials)
    side = int(round((pos.shape[0] - k) ** 0.5))
    patch_pos = pos[k:]
    if (side, side) != (rows, cols):
        if family not in ("dinov2", "dinov2_with_registers"):
            ref.fail(f"{folder}: {rows}×{cols} patches but positions for {side}×{side}")
        grid = patch_pos.reshape(1, side, side, hidden).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(rows, cols), mode="bicubic", align_corners=False,
                             antialias=family == "dinov2_with_registers")
        patch_pos = grid.permute(0, 2, 3, 1).reshape(rows * cols, hidden)
    h = torch.cat(specials + [emb]) + torch.cat([pos[:k], patch_pos])
    if family == "dinov2_with_registers":
        h = torch.cat([h[:1], g("embeddings.register_tokens")[0], h[1:]])

    def ln(v, name):
        return F.layer_norm(v, (hidden,), w[name + ".weight"], w[name + ".bias"], eps)

    def lin(v, name):
        return v @ w[name + ".weight"].T + w[name + ".bias"]

    dinov2 = family.startswith("dinov2")
    n, d = h.shape[0], hidden // heads
    attentions = []
    for layer in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layer.{layer}."
        a = ln(h, p + ("norm1" if dinov2 else "layernorm_before"))
        q, kk, v = (lin(a, p + f"attention.attention.{m}").reshape(n, heads, d).transpose(0, 1)
                    for m in ("query", "key", "value"))
        probs = torch.softmax(q @ kk.transpose(1, 2) / d ** 0.5, dim=-1)
        attentions.append(probs)
        ctx = (probs @ v).transpose(0, 1).reshape(n, hidden)
        out = lin(ctx, p + "attention.output.dense")
        h = h + (out * w[p + "layer_scale1.lambda1"] if dinov2 else out)
        a = ln(h, p + ("norm2" if dinov2 else "layernorm_after"))
        if dinov2:
            out = lin(F.gelu(lin(a, p + "mlp.fc1")), p + "mlp.fc2") * w[p + "layer_scale2.lambda1"]
        else:
            out = lin(F.gelu(lin(a, p + "intermediate.dense")), p + "output.dense")
        h = h + out
    h = ln(h, prefix + "layernorm")
    logits = None
    if "classifier.weight" in w:
        if dinov2:
            registers = cfg.get("num_register_tokens", 0) if family == "dinov2_with_registers" else 0
            logits = lin(torch.cat([h[0], h[1 + registers:].mean(0)]), "classifier")
        else:
            logits = lin(h[0], "classifier")
    elif "cls_classifier.weight" in w:
        logits = (lin(h[0], "cls_classifier") + lin(h[1], "distillation_classifier")) / 2
    return torch.stack(attentions), logits


def verify(folder, image_path, pixel_values, report, att32, logits32):
    """Asserts that the spelled-out path agrees with transformers: pixels within float32
    rounding (1e-6); single attention probabilities within 5e-5 and logits within 1e-4 (float64
    against float32 with peaked attention); the report's raw, rollout, flow and probabilities,
    recomputed from the float64 path, within 1e-5 (the Rust tests' tolerance)."""
    import numpy as np
    import torch

    mine = spelled_out_pixels(folder, load_image(image_path))
    theirs = pixel_values[0].numpy()
    if mine.shape != theirs.shape or np.abs(mine - theirs).max() > 1e-6:
        ref.fail(f"{folder}: spelled-out pixels disagree with the image processor")
    att, logits = spelled_out_forward(folder, theirs)
    diffs = {"pixels": float(np.abs(mine - theirs).max()),
             "attention": (att - att32.double()).abs().max().item(),
             "logits": 0.0 if logits is None else (logits - logits32.double()).abs().max().item()}
    t = report["target"]["index"]
    mean, aug = ref.fuse_and_augment(att.numpy())
    again = {"raw": mean[:, t], "rollout": ref.rollout_rows(aug, t), "flow": ref.flow_rows(aug, t)}
    for key, rows in again.items():
        diffs[key] = float(np.abs(np.array(report["relevance"][key]) - rows).max())
    if logits is not None:
        probs = torch.softmax(logits, -1)
        diffs["probabilities"] = max(abs(x["probability"] - float(probs[x["id"]]))
                                     for x in report["prediction"]["labels"])
    bounds = {"attention": 5e-5, "logits": 1e-4}
    bad = {k: v for k, v in diffs.items() if k != "pixels" and v > bounds.get(k, 1e-5)}
    if bad or (logits is None) != (logits32 is None):
        ref.fail(f"{folder}: the spelled-out path disagrees: " + ", ".join(f"{k} {v:.1e}" for k, v in bad.items()))
    return diffs


def run(model_dir, image_path, target=None, checkpoint=None, pixels_out=None, attention_out=None,
        check=False):
    import numpy as np
    import torch

    torch.set_grad_enabled(False)
    ck = checkpoint or Checkpoint(model_dir)
    image = load_image(image_path)
    pixel_values = ck.pixels(image)
    _, channels, height, width = pixel_values.shape
    if channels != 3 or height % ck.patch or width % ck.patch:
        ref.fail(f"pixel_values {tuple(pixel_values.shape)} do not tile into {ck.patch}-pixel patches")
    rows, cols = height // ck.patch, width // ck.patch
    tokens = ck.specials + [f"patch r{r} c{c}" for r in range(rows) for c in range(cols)]
    n = len(tokens)
    t = 0 if target is None else target
    if not 0 <= t < n:
        ref.fail(f"--target {t} is out of range (0..{n - 1})")

    out = ck.model(pixel_values=pixel_values, output_attentions=True)
    att32 = torch.stack([a[0] for a in out.attentions])
    if att32.dtype != torch.float32 or att32.shape[-1] != n:
        ref.fail(f"attention {att32.dtype} {tuple(att32.shape)} does not match {n} tokens")
    ref.log(f"{ck.family} {ck.task}: {image.size[0]}×{image.size[1]} image → pixels {height}×{width}, "
            f"{rows}×{cols} patches, {n} tokens, target {t} {tokens[t]}")
    att = att32.double().numpy()
    mean, aug = ref.fuse_and_augment(att)

    prediction = None
    if ck.task == "image-classification":
        probs = torch.softmax(out.logits[0].float(), dim=-1)
        names = ck.label_names(probs.shape[0])
        order = sorted(range(probs.shape[0]), key=lambda i: (-float(probs[i]), i))
        prediction = {"labels": [{"label": names[i], "id": i, "probability": float(probs[i])} for i in order]}

    report = {
        "model": model_dir,
        "family": ck.family,
        "task": ck.task,
        "device": "cpu",
        "tokens": tokens,
        "special": [i < len(ck.specials) for i in range(n)],
        "target": {"index": t, "token": tokens[t]},
        "prediction": prediction,
        "layers": att.shape[0],
        "heads": att.shape[1],
        "relevance": {
            "raw": mean[:, t, :].tolist(),
            "rollout": ref.rollout_rows(aug, t).tolist(),
            "flow": ref.flow_rows(aug, t).tolist(),
        },
        "image": {"width": image.size[0], "height": image.size[1], "grid": [rows, cols], "patch": ck.patch},
    }
    if pixels_out:
        np.save(pixels_out, pixel_values[0].numpy().astype(np.float32))
    if attention_out:
        np.save(attention_out, att32.numpy())
    if check:
        diffs = verify(model_dir, image_path, pixel_values, report, att32,
                       out.logits[0] if ck.task == "image-classification" else None)
        ref.log("spelled-out path agrees: " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="local checkpoint folder")
    ap.add_argument("--image", required=True, help="image file (PNG, JPEG, ...)")
    ap.add_argument("--target", type=int, default=None, help="token to explain (default 0, [CLS])")
    ap.add_argument("--out", default=None, help="write the report here (default: stdout)")
    ap.add_argument("--pixels-out", default=None, help="save the processor's pixel_values (3×H×W float32 .npy)")
    ap.add_argument("--attention-out", default=None, help="save the attention probabilities (L×H×n×n float32 .npy)")
    ap.add_argument("--check", action="store_true", help="also verify against the spelled-out second path")
    args = ap.parse_args()
    try:
        report = run(args.model, args.image, args.target, pixels_out=args.pixels_out,
                     attention_out=args.attention_out, check=args.check)
    except ref.ReferenceError as e:
        print(f"vision_reference: error: {e}", file=sys.stderr)
        sys.exit(1)
    text = json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
