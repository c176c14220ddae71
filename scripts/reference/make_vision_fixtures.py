#!/usr/bin/env python3
"""Regenerate tests/fixtures/vision/ (SPEC §10): the test images, cases.json, and one reference
report per case from vision_reference.py; optionally compare bert-explain's output with them.

Images (tests/fixtures/vision/images/, drawn with numpy from fixed seeds, written by Pillow):

  shapes.png   48×40 RGB   diagonal gradient, a disc, a bar, a triangle, noise
  tall.png     37×61 RGB   coloured stripes over a vertical gradient, an ellipse, noise (narrower
                           than DINOv2's shortest edge 40: bicubic upsampling with overshoot)
  square.png   64×64 RGB   checkerboard under a radial gradient, a diagonal line, noise
  grey.png     45×33 L     greyscale: gradient, a bright disc, a dark bar, noise
  alpha.png    52×44 RGBA  colour pattern with an alpha ramp and a fully transparent hole over
                           bright colours: load_image's convert("RGB") drops the alpha channel, so
                           the hidden colours count (compositing onto white would differ)

Cases (cases.json rows {"name", "model", "image", "target"}; "model" is a folder under models/
from make_tiny_vision.py, "image" a path relative to the repository): every model on at least two
images with the default target ([CLS]), one patch target per model (the last patch unless said),
and the distillation / register tokens as targets where the model has them.

Writes tests/fixtures/vision/<name>.json (the report, model given as models/<folder>) and
<name>.pixels.npy (the processor's pixel_values, 3×H×W float32; numpy.save). Every case is also
run through vision_reference.py's spelled-out second path (--check), which must agree.

Usage (with the reference venv's python, one torch thread so reruns give the same bytes):
  make_vision_fixtures.py                      images, cases.json and every case
  make_vision_fixtures.py --only NAME[,NAME]   some cases (images and cases.json rewritten too)
  make_vision_fixtures.py --check BINARY       run `BINARY --json --model models/M [--target I]
                                               IMAGE` on every case (SPEC §10: the input names the
                                               image file) and compare tokens, target, sizes,
                                               image, prediction and every relevance (1e-5);
                                               exit 1 on a difference
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "vision")
IMAGES = os.path.join(FIXTURES, "images")
sys.path.insert(0, HERE)

TOLERANCE = 1e-5

# image name: (width, height, mode, seed)
IMAGE_SPECS = {
    "shapes": (48, 40, "RGB", 7001),
    "tall": (37, 61, "RGB", 7002),
    "square": (64, 64, "RGB", 7003),
    "grey": (45, 33, "L", 7004),
    "alpha": (52, 44, "RGBA", 7005),
}

# model folder: (case prefix, [images with the default target], [(suffix, image, target)])
# Tokens: ViT 1 + 16, DeiT 2 + 16 ([DIST] = 1), DINOv2 1 + 16, with registers 3 + 16 ([REG1] = 1,
# [REG2] = 2); the last patch is n - 1.
MODEL_CASES = {
    "tiny-vit-cls": ("vit-cls", ["shapes", "tall", "grey", "alpha"], [("shapes-patch", "shapes", 16)]),
    "tiny-vit-encoder": ("vit-encoder", ["square", "alpha"], [("square-patch", "square", 6)]),
    "tiny-deit-teacher": ("deit-teacher", ["shapes", "tall", "square"],
                          [("shapes-dist", "shapes", 1), ("tall-patch", "tall", 17)]),
    "tiny-dinov2-cls": ("dinov2-cls", ["shapes", "tall", "grey", "alpha"], [("square-patch", "square", 16)]),
    "tiny-dinov2-registers-cls": ("dinov2-registers-cls", ["shapes", "tall", "square", "alpha"],
                                  [("alpha-patch", "alpha", 18), ("shapes-reg1", "shapes", 1),
                                   ("grey-reg2", "grey", 2)]),
    "tiny-dinov2-encoder": ("dinov2-encoder", ["grey", "square"], [("tall-patch", "tall", 9)]),
}


def image_path(name):
    return os.path.join("tests", "fixtures", "vision", "images", name + ".png")


def cases():
    rows = []
    for model, (prefix, defaults, extra) in MODEL_CASES.items():
        for image in defaults:
            rows.append({"name": f"{prefix}-{image}", "model": model, "image": image_path(image), "target": None})
        for suffix, image, target in extra:
            rows.append({"name": f"{prefix}-{suffix}", "model": model, "image": image_path(image), "target": target})
    return rows


# ---------------------------------------------------------------- images

def draw(name):
    """One test image as a PIL image: structured content plus a little noise."""
    import numpy as np
    from PIL import Image

    width, height, mode, seed = IMAGE_SPECS[name]
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / (width - 1), y / (height - 1)

    def noisy(rgb, sigma):
        return np.clip(np.rint(rgb + rng.normal(0.0, sigma, rgb.shape)), 0, 255).astype(np.uint8)

    if name == "shapes":
        rgb = np.stack([40 + 180 * u, 30 + 150 * v, 200 - 120 * (u + v) / 2], axis=-1)
        rgb[(x - 14) ** 2 + (y - 13) ** 2 < 9.5 ** 2] = [235, 60, 40]
        rgb[24:33, 20:44] = [30, 90, 220]
        rgb[(y > 4) & (y < 20) & (x > 28) & (x - 28 < (y - 4) * 1.2)] = [60, 210, 80]
        return Image.fromarray(noisy(rgb, 10.0), "RGB")
    if name == "tall":
        stripe = (x // 6).astype(int) % 3
        palette = np.array([[200, 60, 60], [60, 170, 90], [70, 80, 200]], dtype=np.float64)
        rgb = palette[stripe] * (0.45 + 0.55 * v)[..., None]
        rgb[((x - 20) / 11) ** 2 + ((y - 38) / 16) ** 2 < 1] = [250, 230, 70]
        return Image.fromarray(noisy(rgb, 12.0), "RGB")
    if name == "square":
        checker = ((x // 8).astype(int) + (y // 8).astype(int)) % 2
        r = np.sqrt((u - 0.6) ** 2 + (v - 0.4) ** 2)
        rgb = np.where(checker[..., None] == 1, [220.0, 200.0, 160.0], [50.0, 70.0, 110.0])
        rgb = rgb * (1.1 - 0.8 * r)[..., None]
        rgb[np.abs(x - y - 5) < 1.5] = [250, 20, 150]
        return Image.fromarray(noisy(rgb, 8.0), "RGB")
    if name == "grey":
        g = 30 + 140 * u + 50 * v
        g[(x - 30) ** 2 + (y - 14) ** 2 < 8 ** 2] = 245
        g[22:28, 5:25] = 15
        return Image.fromarray(noisy(g, 9.0), "L")
    if name == "alpha":
        rgb = np.stack([220 * u, 120 + 100 * np.sin(6 * v), 255 * (1 - u) * v], axis=-1)
        rgb[(x - 38) ** 2 + (y - 30) ** 2 < 10 ** 2] = [250, 250, 30]
        alpha = 255 * (1 - 0.85 * u)
        alpha[(x - 38) ** 2 + (y - 30) ** 2 < 7 ** 2] = 0  # a hole over the bright disc
        alpha[2:10, 3:15] = 0
        rgba = np.concatenate([noisy(rgb, 10.0), np.clip(np.rint(alpha), 0, 255).astype(np.uint8)[..., None]], -1)
        return Image.fromarray(rgba, "RGBA")
    raise KeyError(name)


def write_images():
    os.makedirs(IMAGES, exist_ok=True)
    for name, (width, height, mode, _) in IMAGE_SPECS.items():
        image = draw(name)
        assert image.size == (width, height) and image.mode == mode
        image.save(os.path.join(IMAGES, name + ".png"), format="PNG", optimize=False)


# ---------------------------------------------------------------- fixtures

def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def generate(case, checkpoints):
    import vision_reference as vis

    model = os.path.join("models", case["model"])
    if case["model"] not in checkpoints:
        checkpoints[case["model"]] = vis.Checkpoint(model)
    report = vis.run(model, case["image"], case["target"], checkpoints[case["model"]],
                     pixels_out=os.path.join(FIXTURES, case["name"] + ".pixels.npy"), check=True)
    write(os.path.join(FIXTURES, case["name"] + ".json"), report)
    probs = [round(x["probability"], 3) for x in (report["prediction"] or {}).get("labels", [])]
    print(f"{case['name']}: {len(report['tokens'])} tokens, target {report['target']}, "
          f"p {probs}, last-layer rollout max {max(report['relevance']['rollout'][-1]):.3f}",
          file=sys.stderr, flush=True)


def differences(want, got, tolerance, path=""):
    """Every place where two JSON values differ (numbers: by more than tolerance)."""
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None:
        return [] if want == got else [f"{path}: {got!r} vs reference {want!r}"]
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return [] if abs(want - got) <= tolerance else [f"{path}: {got!r} vs reference {want!r} ({abs(want - got):.1e})"]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: length {len(got)} vs reference {len(want)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, tolerance, f"{path}[{i}]")]
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in want:
            if key not in got:
                out.append(f"{path}.{key}: missing")
            else:
                out += differences(want[key], got[key], tolerance, f"{path}.{key}")
        return out
    return [] if want == got else [f"{path}: {got!r} vs reference {want!r}"]


def check(binary, case):
    cmd = [binary, "--json", "--model", os.path.join("models", case["model"])]
    if case["target"] is not None:
        cmd += ["--target", str(case["target"])]
    proc = subprocess.run(cmd + [case["image"]], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"exit {proc.returncode}: {proc.stderr.strip()}"]
    got = json.loads(proc.stdout)
    with open(os.path.join(FIXTURES, case["name"] + ".json")) as f:
        want = json.load(f)
    problems = []
    for key in ("family", "task", "tokens", "target", "prediction", "layers", "heads", "relevance", "image"):
        problems += differences(want.get(key), got.get(key), TOLERANCE, key)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="case name(s)")
    ap.add_argument("--check", metavar="BINARY", default=None, help="compare bert-explain's output (no regeneration)")
    args = ap.parse_args()
    rows = cases()
    names = [c["name"] for c in rows]
    if len(set(names)) != len(names):
        sys.exit("duplicate case names")
    only = {n.strip() for group in args.only for n in group.split(",") if n.strip()}
    if only - set(names):
        sys.exit(f"unknown case(s) {sorted(only - set(names))}")
    selected = [c for c in rows if not only or c["name"] in only]

    if args.check:
        binary = os.path.abspath(args.check)
        failed = 0
        for case in selected:
            problems = check(binary, case)
            print(f"{case['name']}: {'ok' if not problems else f'{len(problems)} difference(s)'}")
            for p in problems[:8]:
                print(f"    {p}")
            failed += bool(problems)
        print(f"{len(selected) - failed}/{len(selected)} cases agree")
        sys.exit(1 if failed else 0)

    import torch

    torch.set_num_threads(1)
    os.chdir(REPO)  # the reports name models/… and tests/… relative to the repository
    write_images()
    write(os.path.join(FIXTURES, "cases.json"), rows)
    checkpoints = {}
    for case in selected:
        generate(case, checkpoints)


if __name__ == "__main__":
    main()
