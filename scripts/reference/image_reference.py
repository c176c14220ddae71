"""Reference for tests/image_preprocessing.rs: transformers' image processors, Pillow backend.

For each (photograph, processor) case it runs what a transformers pipeline runs on a file:
`load_image` (Pillow decodes, `exif_transpose`, `convert("RGB")`) then
`AutoImageProcessor.from_pretrained(folder, backend="pil")` (transformers 5 picks torchvision
unless told `backend="pil"`). It writes to tests/fixtures/images/:

  cases.json     per case: the output size, sha256 of the 8-bit view (the picture after resize
                 and centre crop, before rescale: HWC bytes) and of pixel_values[0] (CHW,
                 float32 little-endian), and a few spot values of pixel_values
  views/*.png    for the JPEG cases only, the reference view itself (our JPEG decoder is not
                 libjpeg-turbo, so those cases are compared within a bound, not by hash)
  decode/        small made-up files (PNG modes and bit depths, EXIF orientations, GIF, WebP)
                 with decode.json: Pillow's `load_image` pixels of each

The processors' configs are tests/fixtures/images/processors/*/preprocessor_config.json
(written by hand: three as their checkpoints have them, the others odd on purpose).

Usage (the reference env has transformers 5.23 and Pillow 13):
  scripts/fetch-real-models.sh skimage-photos
  PY=.venv-reference/bin/python
  $PY scripts/reference/image_reference.py                    # writes the fixtures
  $PY scripts/reference/image_reference.py --measure DUMP     # JPEG differences, see below

--measure DUMP reads what `BERT_EXPLAIN_IMAGE_DUMP=DUMP cargo test --test image_preprocessing`
wrote (our decoded photographs and views as PNG, pixel_values as raw float32) and prints the
differences from Pillow and transformers, per photograph and per case.
"""

import argparse
import hashlib
import io
import json
import os
import struct
import sys
import zlib

import numpy as np
import PIL
from PIL import Image
import transformers
from transformers import AutoImageProcessor
from transformers.image_utils import load_image

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "tests", "fixtures", "images")
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "camera.png",
          "rocket.jpg", "retina.jpg", "hubble_deep_field.jpg"]
MAIN = ["vit-base-patch16-224", "deit-base-distilled-patch16-224", "dinov2-small"]
# The odd processors run on a square and an oblong PNG.
ODD = {
    "shortest-edge-37": ["chelsea.png", "camera.png"],
    "dinov2-518": ["astronaut.png", "chelsea.png", "coffee.png"],
    "nearest-up": ["chelsea.png", "camera.png"],
    "nearest-down": ["coffee.png", "astronaut.png"],
    "lanczos": ["coffee.png", "camera.png"],
    "box": ["chelsea.png", "astronaut.png"],
    "hamming": ["coffee.png", "chelsea.png"],
    "crop-pads": ["chelsea.png", "coffee.png"],
    "shortest-longest": ["chelsea.png", "astronaut.png"],
    "no-rescale": ["coffee.png"],
    "rescale-only": ["chelsea.png"],
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def processor(name):
    proc = AutoImageProcessor.from_pretrained(os.path.join(OUT, "processors", name), backend="pil")
    assert type(proc).__name__.endswith("Pil"), type(proc).__name__
    return proc


def run(proc, image):
    """The 8-bit view (HWC uint8) and pixel_values[0] (CHW float32) of one image."""
    view = proc(image, do_rescale=False, do_normalize=False, return_tensors="np")["pixel_values"][0]
    assert view.dtype == np.uint8, view.dtype
    pixels = proc(image, return_tensors="pt")["pixel_values"][0].numpy()
    assert pixels.dtype == np.float32, pixels.dtype
    return np.ascontiguousarray(view.transpose(1, 2, 0)), np.ascontiguousarray(pixels)


def spots(pixels, count=12):
    c, h, w = pixels.shape
    rng = np.random.default_rng(0)
    where = [(0, 0, 0), (1, h // 2, w // 2), (2, h - 1, w - 1)]
    where += [(int(rng.integers(c)), int(rng.integers(h)), int(rng.integers(w))) for _ in range(count - 3)]
    return [[ci, y, x, float(pixels[ci, y, x])] for ci, y, x in where]


def make_cases(photos_dir):
    os.makedirs(os.path.join(OUT, "views"), exist_ok=True)
    pairs = [(photo, name) for name in MAIN for photo in PHOTOS]
    pairs += [(photo, name) for name, photos in ODD.items() for photo in photos]
    cases = []
    images = {photo: load_image(os.path.join(photos_dir, photo)) for photo in PHOTOS}
    procs = {}
    for photo, name in pairs:
        proc = procs.setdefault(name, processor(name))
        view, pixels = run(proc, images[photo])
        case = {
            "name": f"{os.path.splitext(photo)[0]}--{name}",
            "photo": photo,
            "processor": name,
            "height": int(pixels.shape[1]),
            "width": int(pixels.shape[2]),
            "view_sha256": sha256(view.tobytes()),
            "pixels_sha256": sha256(pixels.astype("<f4").tobytes()),
            "spots": spots(pixels),
        }
        if photo.endswith(".jpg"):
            case["view_png"] = f"views/{case['name']}.png"
            Image.fromarray(view).save(os.path.join(OUT, case["view_png"]), optimize=True)
        cases.append(case)
        print(f"{case['name']}: {case['height']}x{case['width']}", file=sys.stderr)
    meta = {
        "written_by": "scripts/reference/image_reference.py",
        "transformers": transformers.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "photos": "scikit-image 0.25.2 wheel, skimage/data/ (scripts/fetch-real-models.sh skimage-photos)",
        "photo_sha256": {p: sha256(open(os.path.join(photos_dir, p), "rb").read()) for p in PHOTOS},
    }
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=1)
        f.write("\n")


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(width, height, colour_type, depth, rows, extra=b""):
    """A PNG written by hand, for the bit depths and modes Pillow does not write."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
    data = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra
            + png_chunk(b"IDAT", zlib.compress(data)) + png_chunk(b"IEND", b""))


def pack_bits(values, depth):
    out, acc, n = bytearray(), 0, 0
    for v in values:
        acc = (acc << depth) | v
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def gradient(width=7, height=5):
    """A small picture whose every pixel differs, so that any flip or turn shows."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 36 + 3, y * 60 + 5, (x * 7 + y * 29) % 256], -1).astype(np.uint8)


def make_decode_cases(photos_dir):
    folder = os.path.join(OUT, "decode")
    os.makedirs(folder, exist_ok=True)
    files = {}
    base = Image.fromarray(gradient())
    for k in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = k
        out = io.BytesIO()
        base.save(out, "PNG", exif=exif)
        files[f"orientation-{k}.png"] = out.getvalue()
    for k in (3, 6, 8):
        exif = Image.Exif()
        exif[0x0112] = k
        out = io.BytesIO()
        Image.fromarray(gradient(16, 9)).save(out, "JPEG", exif=exif, quality=95, subsampling=0)
        files[f"orientation-{k}.jpg"] = out.getvalue()
    w = 6
    values16 = [0, 1, 255, 256, 0x1234, 65535]
    files["grey16.png"] = raw_png(w, 1, 0, 16, [b"".join(struct.pack(">H", v) for v in values16)])
    files["grey-alpha16.png"] = raw_png(w, 1, 4, 16, [b"".join(struct.pack(">HH", v, 40000) for v in values16)])
    files["rgb16.png"] = raw_png(w, 1, 2, 16, [b"".join(struct.pack(">HHH", v, 65535 - v, v ^ 0x5a5a) for v in values16)])
    files["rgba16.png"] = raw_png(w, 1, 6, 16, [b"".join(struct.pack(">HHHH", v, 65535 - v, v ^ 0x5a5a, 7) for v in values16)])
    for depth in (1, 2, 4):
        top = (1 << depth) - 1
        rows = [pack_bits([(x + y) % (top + 1) for x in range(5)], depth) for y in range(3)]
        files[f"grey{depth}.png"] = raw_png(5, 3, 0, depth, rows)
    g = gradient()
    rgba = np.concatenate([g, (np.arange(35).reshape(5, 7, 1) * 7).astype(np.uint8)], -1)
    for name, image in [
        ("rgba.png", Image.fromarray(rgba, "RGBA")),
        ("grey-alpha.png", Image.fromarray(rgba[..., [0, 3]], "LA")),
        ("grey.png", Image.fromarray(g[..., 1], "L")),
    ]:
        out = io.BytesIO()
        image.save(out, "PNG")
        files[name] = out.getvalue()
    palette = Image.fromarray(g).quantize(12)
    out = io.BytesIO()
    palette.save(out, "PNG")
    files["palette.png"] = out.getvalue()
    out = io.BytesIO()
    palette.save(out, "GIF")
    files["palette.gif"] = out.getvalue()
    out = io.BytesIO()
    Image.fromarray(g).save(out, "WEBP", lossless=True)
    files["lossless.webp"] = out.getvalue()
    # Lossy WebP (libwebp under Pillow, image-webp here), from a corner of a photograph.
    out = io.BytesIO()
    load_image(os.path.join(photos_dir, "chelsea.png")).crop((200, 80, 264, 128)).save(out, "WEBP", quality=80)
    files["lossy.webp"] = out.getvalue()
    # Transparency that Pillow keeps as a colour after convert("RGB") (and that a processor
    # with do_convert_rgb paints white), or drops.
    key = tuple(int(v) for v in g[2, 3])
    for name, image, options in [
        ("key-rgb.png", Image.fromarray(g), {"transparency": key}),
        ("key-grey.png", Image.fromarray(g[..., 1], "L"), {"transparency": int(g[2, 3, 1])}),
        ("key-palette.png", palette, {"transparency": 3}),
        ("alphas-palette.png", palette, {"transparency": bytes([255, 0, 128] + [255] * 9)}),
        ("key.gif", palette, {"transparency": 3}),
    ]:
        out = io.BytesIO()
        image.save(out, name.rsplit(".", 1)[1].upper(), **options)
        files[name] = out.getvalue()
    files["offset.gif"] = offset_gif(palette, None)
    files["offset-key.gif"] = offset_gif(palette, 5)
    frames = [palette, Image.fromarray(255 - g).quantize(12)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    files["animated.gif"] = out.getvalue()
    expected = []
    for name, data in sorted(files.items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        image = load_image(os.path.join(folder, name))
        rgb = np.asarray(image)
        key = image.info.get("transparency")
        case = {
            "file": name,
            "mode": Image.open(io.BytesIO(data)).mode,
            "width": image.width,
            "height": image.height,
            "rgb": rgb.reshape(-1).tolist(),
            "transparent": list(key) if isinstance(key, tuple) else None,
            "exact": not name.endswith(".jpg"),
        }
        if case["exact"]:
            case["processed"] = {}
            for proc_name in ("vit-base-patch16-224", "dinov2-small"):
                view, pixels = run(processor(proc_name), image)
                case["processed"][proc_name] = {
                    "view_sha256": sha256(view.tobytes()),
                    "pixels_sha256": sha256(pixels.astype("<f4").tobytes()),
                }
        expected.append(case)
    with open(os.path.join(folder, "decode.json"), "w") as f:
        json.dump({"written_by": "scripts/reference/image_reference.py", "pillow": PIL.__version__,
                   "cases": expected}, f, separators=(",", ":"))
        f.write("\n")


def offset_gif(palette, transparency):
    """A GIF whose first (only) frame covers part of its screen: Pillow fills the rest."""
    small = palette.crop((1, 1, 4, 3))
    out = io.BytesIO()
    small.save(out, "GIF", **({} if transparency is None else {"transparency": transparency}))
    data = bytearray(out.getvalue())
    data[6:10] = struct.pack("<HH", 7, 5)
    at = data.index(0x2C, 13)
    data[at + 1:at + 5] = struct.pack("<HH", 2, 1)
    return bytes(data)


def read_png(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.int16)


def measure(dump, photos_dir):
    """Our decoded photographs, views and pixel_values (from the Rust test) against Pillow's."""
    print("decoded photographs (8-bit levels): max, mean |ours - Pillow|, share of values that differ")
    for photo in PHOTOS:
        ours = os.path.join(dump, "decoded", photo + ".png")
        if not os.path.exists(ours):
            continue
        want = np.asarray(load_image(os.path.join(photos_dir, photo)), dtype=np.int16)
        d = np.abs(read_png(ours) - want)
        print(f"  {photo:24} max {d.max():3d}  mean {d.mean():.4f}  differ {np.mean(d > 0):.3f}")
    with open(os.path.join(OUT, "cases.json")) as f:
        cases = json.load(f)["cases"]
    images = {}
    print("cases: view max, mean |diff| (8-bit); pixel_values max, mean |diff|")
    for case in cases:
        ours = os.path.join(dump, "views", case["name"] + ".png")
        if not os.path.exists(ours):
            continue
        photo = case["photo"]
        image = images.setdefault(photo, load_image(os.path.join(photos_dir, photo)))
        view, pixels = run(processor(case["processor"]), image)
        d = np.abs(read_png(ours) - view.astype(np.int16))
        got = np.fromfile(os.path.join(dump, "pixels", case["name"] + ".f32"), dtype="<f4")
        p = np.abs(got.reshape(pixels.shape).astype(np.float64) - pixels)
        print(f"  {case['name']:52} view max {d.max():2d} mean {d.mean():.4f}   "
              f"pixel_values max {p.max():.6f} mean {p.mean():.6f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default=os.path.join(REPO, "models", "downloaded", "skimage-photos"))
    parser.add_argument("--measure", metavar="DUMP")
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.photos)
        return
    make_cases(args.photos)
    make_decode_cases(args.photos)


if __name__ == "__main__":
    main()
