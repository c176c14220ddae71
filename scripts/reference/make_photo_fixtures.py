#!/usr/bin/env python3
"""Reference reports of the tiny vision checkpoints on real photographs (scikit-image's
sample images, fetched by `scripts/fetch-real-models.sh skimage-photos`): PNG photographs,
whose decoding and preprocessing bert-explain matches bit for bit, and JPEG ones, where
Pillow's libjpeg-turbo and bert-explain's decoder differ by a few 8-bit levels.

Each report is vision_reference.py's (transformers' Pillow backend, eager attention, the
paper's rollout, networkx's flow) for one (model, photograph). Writes
tests/fixtures/vision/photos/<model>-<photo>.json and cases.json (model, photo, jpeg).
Never uses any Rust code.

Usage: .venv-reference/bin/python scripts/reference/make_photo_fixtures.py [PHOTOS_DIR]
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(REPO, "tests", "fixtures", "vision", "photos")
MODELS = ["tiny-vit-cls", "tiny-deit-teacher", "tiny-dinov2-cls", "tiny-dinov2-registers-cls"]
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "retina.jpg", "hubble_deep_field.jpg"]


def main():
    photos = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "models", "downloaded", "skimage-photos")
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for model in MODELS:
        for photo in PHOTOS:
            name = f"{model.removeprefix('tiny-')}-{os.path.splitext(photo)[0]}"
            out = os.path.join(OUT, f"{name}.json")
            subprocess.run([sys.executable, os.path.join(HERE, "vision_reference.py"),
                            "--model", os.path.join(REPO, "models", model),
                            "--image", os.path.join(photos, photo), "--out", out], check=True)
            cases.append({"name": name, "model": model, "photo": photo, "jpeg": photo.endswith(".jpg")})
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"wrote {len(cases)} reports to {os.path.relpath(OUT, REPO)}")


if __name__ == "__main__":
    main()
