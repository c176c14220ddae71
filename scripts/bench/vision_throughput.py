#!/usr/bin/env python3
"""Vision transformers at the real shapes against torch on the CPU, side by side in one run
(issue 65).

Models (--models), each made once with random weights (torch.manual_seed(0), transformers'
own initialisation) into --models-dir (default target/bench-models/, git-ignored) and reused
while its stamp matches:
- vit-base: ViTForImageClassification of google/vit-base-patch16-224's shape (hidden 768, 12
  layers, 12 heads, MLP 3072, patch 16, image 224, 1,000 labels), with that checkpoint's
  preprocessor_config.json (ViTImageProcessor: resize to 224×224 bilinear, rescale 1/255,
  mean = std = 0.5): 14 × 14 patches + [CLS] = 197 tokens;
- dinov2-base: Dinov2ForImageClassification of DINOv2-B/14's shape (hidden 768, 12 layers, 12
  heads, MLP ratio 4, patch 14, image_size 518, 1,000 labels on [CLS ; mean of the patches]),
  with a BitImageProcessor config (shortest edge 518 bicubic, centre crop 518×518, rescale
  1/255, ImageNet mean/std, do_convert_rgb): 37 × 37 patches + [CLS] = 1,370 tokens (the
  position embeddings' own grid: no interpolation);
- any other value: a folder holding an image checkpoint with its preprocessor_config.json.
Random weights at transformers' initialisation (std 0.02) give nearly uniform attention rows
(the report gives the mean largest attention per row); real checkpoints' rows are more peaked,
and RESULTS.md measured peaked rows costing flow several times more. Flow's share here is that
of diffuse attention.

Images (the "folder"): --images N (default 16) files made once under target/bench-images/:
scikit-image's seven sample photographs as they are (astronaut, camera (greyscale), chelsea,
coffee: PNG; hubble_deep_field, retina, rocket: JPEG; 451×300 to 1411×1411), then resized
copies of them (Pillow LANCZOS, saved as PNG) at 0.5×, then 1.5×, ... of their size, to N
files. The photographs come from `bash scripts/fetch-real-models.sh skimage-photos` (run when
they are missing).

For each model, on the same images and thread count T:
1. One image, whole process (the first image, astronaut.png, 512×512): `bert-explain --model M
   IMAGE --json` with flow (vit-base: no flag, flow being computed up to 1,024 tokens;
   dinov2-base: --flow) and with --no-flow, and the load alone (batch mode on an empty input
   file: the process, the model's load, no image); --single-runs rounds (default 3) of the
   three, interleaved; the medians, and the image less the load (median whole − median load).
   Flow's share = (flow − no-flow) / (flow − load). Every report checked (n tokens, raw and
   rollout, flow as asked, a map per layer of n entries).
2. Batch mode on the folder, `--input FILE --output FILE` (lines {"image": "/abs/path"}) with
   flow as in 1 and with --no-flow, at each --ours batch size (default 1, 8), timed as
   batch_throughput.py times it: the whole process on the N images, and on a 1-image input
   (the first image) before and after; per image = (t_N − mean(t_1)) / (N − 1): the load, the
   process and the first image subtracted. bert-explain's per image INCLUDES its own decoding
   and preprocessing of the image file. Its own summary ("in S s", from after the load to the
   last report) is shown as S / N with its parts (forward passes, reports). Every report
   checked: N records, each n tokens, the image's width and height, raw + rollout, flow
   present exactly when asked, a map per layer of n entries; and its top-5 labels'
   probabilities against torch's logits for the same image (the largest difference is shown).
3. torch: transformers' forward with output_attentions=True (eager attention, torch.no_grad(),
   torch.set_num_threads(T)) on the same images' pixel_values, at batch 1 and each of
   --batch-sizes (default 2, 4, 8, 16), each configuration in a process of its own (--python,
   the reference venv). The images are opened (PIL.Image.open, ImageOps.exif_transpose,
   convert("RGB")) and preprocessed by the checkpoint's image processor (Pillow backend)
   before the timing starts; that preprocessing's own time per image is shown apart (it is
   NOT in torch's per-image times). One untimed batch-1 forward, then whole batches timed with
   time.perf_counter. A batch whose attention alone (layers × b × heads × n² × 4 bytes) would
   pass --max-attention-gib (default 10) is skipped and said so. "Best batch": the least time
   per image, batch 1 included.

Peak resident memory: torch's is ru_maxrss of its process (the header gives a process that only
imports torch and transformers); bert-explain's is /usr/bin/time -v's. Beside each measured
process, how busy the rest of the machine was (as batch_throughput.py does); the report says
when another process took more than 0.1 of a core. Before each timed process (torch's and
bert-explain's) the script waits until no rustc or cargo has run for --quiet-seconds (default
5) and the machine's busy CPU stayed under --disturbed cores for that long, and runs a process again (up to --retries, default 3) when other processes kept more than
--disturbed (default 0.25) cores busy during it; the header counts those reruns.
--even-while-compiling times regardless.

Threads: OMP/MKL/OPENBLAS/RAYON_NUM_THREADS = T for every process, taskset where T is less
than the usable cores (batch_throughput.py's env_for and pin).

Usage: python3 scripts/bench/vision_throughput.py [--threads T] [--models vit-base,dinov2-base]
           [--images 16] [--batch-sizes 2,4,8,16] [--ours 1,8] [--single-runs 3]
           [--bert-explain PATH] [--python PATH] [--json FILE] [--prepare] [--quick]
--prepare: make the models and images, time nothing (safe while a build runs).
--quick: a smoke run on the tiny vision models (models/tiny-vit-cls, models/tiny-dinov2-cls),
3 images, batch sizes 1 and 2; numbers meaningless.
Prints the Markdown report on stdout, progress on stderr; exits 1 when a bert-explain run or
check failed (the tables say how). Needs only the system python3 (torch runs in --python).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batch_throughput as bt  # noqa: E402  (its helpers: time_v, env_for, pin, ms, mib, ...)

REPO = bt.REPO
BIN = bt.BIN
PYTHON = bt.PYTHON
MODELS_DIR = bt.MODELS_DIR
IMAGES_DIR = os.path.join(REPO, "target", "bench-images")
PHOTOS = os.path.join(REPO, "models", "downloaded", "skimage-photos")
FIRST_IMAGE = "astronaut.png"
SEED = 0
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
RESCALE = 0.00392156862745098
SCALES = [0.5, 1.5, 0.75, 1.25]
PROB_TOLERANCE = 1e-4  # the largest |p − torch's p| over a report's top labels

SHAPES = {
    "vit-base": {
        "class": "ViTForImageClassification",
        "config": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, hidden_act="gelu", image_size=224, patch_size=16,
                       num_channels=3, qkv_bias=True, num_labels=1000),
        "preprocessor": {  # google/vit-base-patch16-224's
            "do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "image_processor_type": "ViTImageProcessor", "resample": 2,
            "rescale_factor": RESCALE, "size": {"height": 224, "width": 224}},
        "tokens": 197,
        "desc": "ViT-B/16 shape (ViTForImageClassification, hidden 768, 12 layers, 12 heads, 1,000 labels), "
                "224 px, ViTImageProcessor (224×224 bilinear, mean = std = 0.5): 197 tokens",
    },
    "dinov2-base": {
        "class": "Dinov2ForImageClassification",
        "config": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4,
                       hidden_act="gelu", image_size=518, patch_size=14, num_channels=3,
                       layerscale_value=1.0, num_labels=1000),
        "preprocessor": {  # facebook/dinov2-base's layout at DINOv2's own 518 px
            "crop_size": {"height": 518, "width": 518}, "do_center_crop": True, "do_convert_rgb": True,
            "do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": IMAGENET_MEAN, "image_std": IMAGENET_STD,
            "image_processor_type": "BitImageProcessor", "resample": 3,
            "rescale_factor": RESCALE, "size": {"shortest_edge": 518}},
        "tokens": 1370,
        "desc": "DINOv2-B/14 shape (Dinov2ForImageClassification, hidden 768, 12 layers, 12 heads, 1,000 labels), "
                "518 px, BitImageProcessor (shortest edge 518 bicubic, centre crop 518×518, ImageNet mean/std): "
                "1,370 tokens",
    },
}
QUICK_MODELS = {"vit-tiny": os.path.join(REPO, "models", "tiny-vit-cls"),
                "dinov2-tiny": os.path.join(REPO, "models", "tiny-dinov2-cls")}
T0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the torch side
# Runs in --python (the venv with torch, transformers and Pillow): `--worker SPEC`.

def open_image(path):
    from PIL import Image, ImageOps

    image = Image.open(path)
    image = ImageOps.exif_transpose(image)
    return image.convert("RGB")


def make_model(spec):
    import torch
    import transformers

    shape = SHAPES[spec["shape"]]
    folder = spec["folder"]
    torch.manual_seed(SEED)
    config_class = getattr(transformers, shape["class"]).config_class
    model = getattr(transformers, shape["class"])(config_class(**shape["config"]))
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(shape["preprocessor"], f, indent=2, sort_keys=True)
        f.write("\n")
    return {"parameters": sum(p.numel() for p in model.parameters())}


def make_images(spec):
    from PIL import Image

    sources = sorted(os.listdir(spec["photos"]))
    sources = [s for s in sources if s.lower().endswith((".png", ".jpg", ".jpeg"))]
    # astronaut.png first: the single-image runs and the 1-image runs use the first file.
    sources.sort(key=lambda s: (s != FIRST_IMAGE, s))
    folder = spec["folder"]
    os.makedirs(folder, exist_ok=True)
    made = []
    for k in range(spec["count"]):
        src = sources[k % len(sources)]
        stem, ext = os.path.splitext(src)
        if k < len(sources):
            name = f"{k:02d}-{src}"
            shutil.copyfile(os.path.join(spec["photos"], src), os.path.join(folder, name))
        else:
            scale = SCALES[(k // len(sources) - 1) % len(SCALES)]
            image = Image.open(os.path.join(spec["photos"], src))
            image.load()
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            name = f"{k:02d}-{stem}-x{scale:g}.png"
            image.resize(size, Image.LANCZOS).save(os.path.join(folder, name))
        with Image.open(os.path.join(folder, name)) as im:
            made.append({"path": os.path.join(folder, name), "width": im.width, "height": im.height,
                         "mode": im.mode})
    return {"images": made}


def torch_run(spec):
    import resource

    import numpy
    import PIL
    import torch
    import transformers

    torch.set_num_threads(spec["threads"])
    folder, batch = spec["model"], spec["batch"]
    with open(os.path.join(folder, "config.json")) as f:
        arch = (json.load(f).get("architectures") or ["AutoModel"])[0]
    processor = transformers.AutoImageProcessor.from_pretrained(folder, backend="pil")
    if processor.backend != "pil":
        raise SystemExit(f"{type(processor).__name__} is not the Pillow backend")
    model = getattr(transformers, arch).from_pretrained(folder, attn_implementation="eager",
                                                       dtype=torch.float32).float().eval()
    # Preprocessing, outside the timing (its own time kept apart).
    pixels, pre = [], []
    for path in spec["images"]:
        start = time.perf_counter()
        pv = processor(images=open_image(path), return_tensors="pt")["pixel_values"]
        pre.append(time.perf_counter() - start)
        if pv.dtype != torch.float32 or pv.shape[0] != 1:
            raise SystemExit(f"{path}: the processor gave {pv.dtype} {tuple(pv.shape)}")
        pixels.append(pv)
    shapes = {tuple(p.shape) for p in pixels}
    if len(shapes) != 1:
        raise SystemExit(f"pixel_values of different shapes {shapes}")
    batches = [torch.cat(pixels[i:i + batch]) for i in range(0, len(pixels), batch)]
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    with torch.no_grad():
        out = model(pixel_values=pixels[0], output_attentions=True)
        if out.attentions is None or len(out.attentions) != layers:
            raise SystemExit("no attentions came back")
        n = out.attentions[0].shape[-1]
        att = torch.stack(out.attentions)[:, 0]
        peak = float(att.max(-1).values.mean())
        times, logits = [], []
        for x in batches:
            start = time.perf_counter()
            out = model(pixel_values=x, output_attentions=True)
            times.append(time.perf_counter() - start)
            if tuple(out.attentions[0].shape) != (x.shape[0], heads, n, n):
                raise SystemExit(f"attention of shape {tuple(out.attentions[0].shape)}")
            if getattr(out, "logits", None) is not None:
                logits.append(out.logits)
    probs = None
    if logits:
        probs = torch.softmax(torch.cat(logits).double(), -1)[:len(spec["images"])].tolist()
    return {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "numpy": numpy.__version__, "pillow": PIL.__version__},
            "torch_threads": torch.get_num_threads(), "class": type(model).__name__,
            "processor": type(processor).__name__, "pixel_shape": list(pixels[0].shape[1:]),
            "tokens": n, "layers": layers, "heads": heads, "mean_row_max": peak,
            "images": len(spec["images"]), "seconds": sum(times),
            "per_image": sum(times) / len(spec["images"]), "batch_seconds": times,
            "preprocess_per_image": sum(pre) / len(pre), "probabilities": probs if spec.get("probs") else None,
            "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def worker(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    if spec["task"] == "make-model":
        result = make_model(spec)
    elif spec["task"] == "make-images":
        result = make_images(spec)
    elif spec["task"] == "baseline":
        import resource

        import torch  # noqa: F401
        import transformers  # noqa: F401
        from transformers import AutoImageProcessor  # noqa: F401

        result = {"max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    else:
        result = torch_run(spec)
    print("RESULT " + json.dumps(result), flush=True)


# ------------------------------------------------------------------------------- the driver

def run_worker(args, spec, work, label):
    """A process of --python running this file's worker (batch_throughput.py's run_worker, for
    this file)."""
    path = os.path.join(work, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    threads = spec.get("threads", args.threads)
    cmd = bt.pin(threads) + [args.python, os.path.abspath(__file__), "--worker", path]
    if spec["task"] == "torch":
        _, p, _, others = timed(args, cmd, bt.env_for(threads), 24 * 3600, use_time=False)
    else:
        _, p, _, others = bt.time_v(cmd, bt.env_for(threads), 24 * 3600, use_time=False)
    results = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not results:
        raise RuntimeError(f"{label}: the torch process failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    return dict(json.loads(results[-1][len("RESULT "):]), others=others)


def ensure_model(args, name, work):
    if args.quick:
        return QUICK_MODELS[name], os.path.relpath(QUICK_MODELS[name], REPO)
    if name not in SHAPES:
        return os.path.abspath(name), name
    folder = os.path.join(args.models_dir, f"{name}-random-seed{SEED}")
    shape = SHAPES[name]
    stamp = {"class": shape["class"], "config": shape["config"], "preprocessor": shape["preprocessor"],
             "seed": SEED, "recipe": 1}
    stamp_path = folder + ".stamp.json"
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp and os.path.exists(os.path.join(folder, "preprocessor_config.json")):
                return folder, shape["desc"] + f", random weights (seed {SEED})"
    except (OSError, ValueError):
        pass
    log(f"making {folder} (random weights, seed {SEED})")
    shutil.rmtree(folder, ignore_errors=True)
    run_worker(args, {"task": "make-model", "shape": name, "folder": folder, "threads": args.threads},
               work, f"making {name}")
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return folder, shape["desc"] + f", random weights (seed {SEED})"


def ensure_images(args, work):
    if not os.path.exists(os.path.join(PHOTOS, FIRST_IMAGE)):
        log("fetching scikit-image's photographs")
        subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-real-models.sh"), "skimage-photos"],
                       check=True)
    folder = os.path.join(IMAGES_DIR, f"photos-{args.images}")
    stamp = {"count": args.images, "scales": SCALES, "first": FIRST_IMAGE,
             "sources": sorted(os.listdir(PHOTOS)), "recipe": 1}
    stamp_path = folder + ".stamp.json"
    try:
        with open(stamp_path) as f:
            saved = json.load(f)
        if saved["stamp"] == stamp and all(os.path.exists(i["path"]) for i in saved["images"]):
            return saved["images"]
    except (OSError, ValueError, KeyError):
        pass
    log(f"making {args.images} images under {folder}")
    shutil.rmtree(folder, ignore_errors=True)
    made = run_worker(args, {"task": "make-images", "photos": PHOTOS, "folder": folder,
                             "count": args.images, "threads": args.threads}, work, "making images")["images"]
    with open(stamp_path, "w") as f:
        json.dump({"stamp": stamp, "images": made}, f)
    return made


def compiling():
    """Process ids of any rustc or cargo running on this machine."""
    found = []
    for name in ("rustc", "cargo"):
        p = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
        found += p.stdout.split()
    return found


def timed(args, cmd, env, timeout, use_time=True):
    """bt.time_v, on a quiet machine: waits while a rustc or cargo runs, and runs the command
    again (up to --retries times) when other processes kept more than --disturbed cores busy
    meanwhile (where it ran for half a second or more); the last try is kept either way, its `others` saying how disturbed it was."""
    for attempt in range(args.retries + 1):
        wait_quiet(args)
        result = bt.time_v(cmd, env, timeout, use_time=use_time)
        others = result[3]
        # Under half a second, /proc/stat's 10 ms ticks make `others` too coarse to judge.
        if (args.even_while_compiling or others is None or others["wall"] < 0.5
                or others["cores"] <= args.disturbed):
            break
        args.reruns += 1
        log(f"other processes kept {others['cores']:.2f} cores busy: running it again")
    return result


def wait_quiet(args):
    """Waits until, for --quiet-seconds, no rustc or cargo ran and the machine's busy CPU time
    (/proc/stat) stayed under --disturbed cores: other sessions' builds and tests share it."""
    if args.even_while_compiling:
        return
    window = args.quiet_seconds
    since, busy0, announced = time.perf_counter(), bt.busy_seconds()[0], False
    while True:
        time.sleep(1.0)
        now, busy = time.perf_counter(), bt.busy_seconds()[0]
        if compiling() or (busy is not None and busy0 is not None
                           and (busy - busy0) / (now - since) > args.disturbed):
            if not announced:
                log("the machine is busy (a rustc or cargo, or other processes' CPU): waiting")
                announced = True
            since, busy0 = now, busy
        elif now - since >= window:
            if announced:
                log("quiet again")
            return


def check_report(r, n, layers, flow, image=None):
    """What is wrong with one report, or None."""
    if "error" in r:
        return f"error: {r['error']}"
    problems = []
    if len(r.get("tokens", [])) != n:
        problems.append(f"{len(r.get('tokens', []))} tokens, {n} expected")
    rel = r.get("relevance") or {}
    for key in ("raw", "rollout"):
        if not rel.get(key):
            problems.append(f"no {key}")
    if flow and not rel.get("flow"):
        problems.append("no flow")
    if not flow and rel.get("flow"):
        problems.append("flow where --no-flow or auto left it out")
    for key in ("raw", "rollout", "flow"):
        maps = rel.get(key)
        if maps and (len(maps) != layers or any(len(m) != n for m in maps)):
            problems.append(f"{key}: {len(maps)} maps of {sorted({len(m) for m in maps})} entries, "
                            f"{layers} of {n} expected")
    if image is not None:
        got = r.get("image") or {}
        if (got.get("width"), got.get("height")) != (image["width"], image["height"]):
            problems.append(f"image {got.get('width')}×{got.get('height')}, the file is "
                            f"{image['width']}×{image['height']}")
    return "; ".join(problems) or None


def prob_diff(report, probs):
    """The largest |p − torch's p| over the report's labels (None without a prediction)."""
    labels = (report.get("prediction") or {}).get("labels") or []
    if not labels or probs is None:
        return None
    return max(abs(l["probability"] - probs[l["id"]]) for l in labels)


SUMMARY = re.compile(r"(\d+) (?:sentences|images) \((\d+) failed\) in ([\d.]+) s.*?forward passes ([\d.]+) s.*?"
                     r"the model ([\d.]+) s, attention to the host ([\d.]+) s; reports ([\d.]+) s")


def be_batch(args, folder, images, flags, work, tag, n, layers, flow, probs=None):
    path = os.path.join(work, f"{tag}.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps({"image": i["path"]}) + "\n" for i in images))
    out = os.path.join(work, f"{tag}-out.jsonl")
    if os.path.exists(out):
        os.remove(out)
    cmd = bt.pin(args.threads) + [args.bert_explain, "--model", folder, "--input", path, "--output", out] + flags
    try:
        wall, p, rss, others = timed(args, cmd, bt.env_for(args.threads), args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {args.timeout} s", "images": len(images)}
    res = {"wall": wall, "rss_kib": rss, "images": len(images), "others": others,
           "stdout": p.stdout.strip()[-600:], "stderr": p.stderr.strip()[-600:]}
    if p.returncode != 0:
        res["error"] = f"exit {p.returncode}: {p.stderr.strip()[-600:]}"
        return res
    m = SUMMARY.search(p.stdout + p.stderr)
    if m:
        res.update(summary_seconds=float(m.group(3)), forward_seconds=float(m.group(4)),
                   model_seconds=float(m.group(5)), to_host_seconds=float(m.group(6)),
                   reports_seconds=float(m.group(7)))
    if not images:
        return res
    reports = [json.loads(l) for l in open(out)]
    problems = []
    if len(reports) != len(images):
        problems.append(f"{len(reports)} records for {len(images)} images")
    diffs = []
    for i, (r, image) in enumerate(zip(reports, images)):
        bad = check_report(r, n, layers, flow, image)
        if bad:
            problems.append(f"image {i + 1}: {bad}")
        if probs is not None and "error" not in r:
            d = prob_diff(r, probs[i])
            if d is not None:
                diffs.append(d)
    if diffs:
        res["prob_diff"] = max(diffs)
        if res["prob_diff"] > PROB_TOLERANCE:
            problems.append(f"a probability {res['prob_diff']:.1e} from torch's")
    if problems:
        res["error"] = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
    return res


def be_single(args, folder, image, flags, n, layers, flow):
    cmd = bt.pin(args.threads) + [args.bert_explain, "--model", folder, image["path"], "--json"] + flags
    try:
        wall, p, rss, others = timed(args, cmd, bt.env_for(args.threads), args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {args.timeout} s"}
    res = {"wall": wall, "rss_kib": rss, "others": others, "stderr": p.stderr.strip()[-600:]}
    if p.returncode != 0:
        res["error"] = f"exit {p.returncode}: {p.stderr.strip()[-600:]}"
        return res
    try:
        report = json.loads(p.stdout)
    except ValueError:
        res["error"] = f"no JSON report on stdout: {p.stdout[:200]!r}"
        return res
    bad = check_report(report, n, layers, flow, image)
    if bad:
        res["error"] = bad
    res["flow_present"] = bool((report.get("relevance") or {}).get("flow"))
    return res


def median_of(runs, key="wall"):
    vals = [r[key] for r in runs if r.get(key) is not None and not r.get("error")]
    return statistics.median(vals) if vals else None


def others_max(entries):
    found = [e["others"] for e in entries if isinstance(e, dict) and e.get("others") and e["others"]["wall"] >= 1.0]
    if not found:
        return None, None
    return max(o["cores"] for o in found), max(o["steal"] for o in found)


def measure(args, name, images, work):
    folder, desc = ensure_model(args, name, work)
    label = name
    row = {"model": name, "desc": desc, "folder": folder, "torch": {}, "single": {}, "batch": {}, "errors": []}

    # torch first: its batch-1 run gives n, the layers and the probabilities for the checks.
    paths = [i["path"] for i in images]
    sizes = [1] + [b for b in args.batch_sizes if b != 1]
    base = None
    for b in sizes:
        k = -(-len(paths) // b) * b
        run_paths = (paths * (k // len(paths) + 1))[:k]
        if base is not None:
            gib = base["layers"] * b * base["heads"] * base["tokens"] ** 2 * 4 / 2 ** 30
            if gib > args.max_attention_gib:
                row["torch"][f"b{b}"] = {"skipped": f"its attention alone would take {gib:.1f} GiB"}
                log(f"{label}: torch b{b} skipped ({gib:.1f} GiB of attention)")
                continue
        log(f"{label}: torch b{b}, {k} images")
        res = run_worker(args, {"task": "torch", "model": folder, "threads": args.threads, "batch": b,
                                "images": run_paths, "probs": b == 1}, work, f"{label}, torch b{b}")
        row["torch"][f"b{b}"] = res
        if base is None:
            base = res
            row.update(versions=res["versions"], tokens=res["tokens"], layers=res["layers"], heads=res["heads"],
                       torch_class=res["class"], processor=res["processor"], pixel_shape=res["pixel_shape"],
                       mean_row_max=res["mean_row_max"], torch_threads=res["torch_threads"])
        log(f"{label}: torch b{b}: {bt.ms(res['per_image'])} an image, peak RSS {bt.mib(res['max_rss_kib'])}")
    n, layers = row["tokens"], row["layers"]
    if name in SHAPES and n != SHAPES[name]["tokens"]:
        raise SystemExit(f"{name}: torch gives {n} tokens, {SHAPES[name]['tokens']} expected")
    probs = base.get("probabilities")
    auto_flow = n <= 1024
    flow_flags = [] if auto_flow else ["--flow"]
    row["flow_flags"] = flow_flags
    configs = [("flow", flow_flags, True), ("no-flow", ["--no-flow"], False)]

    # One image, whole process; the load alone (batch mode, empty input).
    first = images[0]
    single = row["single"]
    for key in ("load", "flow", "no-flow"):
        single[key] = []
    for i in range(args.single_runs):
        log(f"{label}: one image, round {i + 1} of {args.single_runs}")
        single["load"].append(be_batch(args, folder, [], [], work, f"{name}-empty", n, layers, False))
        for key, flags, flow in configs:
            single[key].append(be_single(args, folder, first, flags, n, layers, flow))
    for key, runs in single.items():
        for r in runs:
            if r.get("error"):
                row["errors"].append(f"one image, {key}: {r['error']}")
    log(f"{label}: one image: load {median_of(single['load'])}, flow {median_of(single['flow'])}, "
        f"no-flow {median_of(single['no-flow'])}")

    # Batch mode on the folder.
    for key, flags, flow in configs:
        for b in args.ours:
            tag = f"{name}-{key}-bs{b}"
            fl = flags + ["--batch-size", str(b)]
            entry = {}
            log(f"{label}: bert-explain {key}, --batch-size {b}: 1 image")
            entry["one_before"] = be_batch(args, folder, images[:1], fl, work, tag + "-1", n, layers, flow)
            log(f"{label}: bert-explain {key}, --batch-size {b}: {len(images)} images")
            entry["all"] = be_batch(args, folder, images, fl, work, tag, n, layers, flow, probs)
            log(f"{label}: bert-explain {key}, --batch-size {b}: 1 image again")
            entry["one_after"] = be_batch(args, folder, images[:1], fl, work, tag + "-1", n, layers, flow)
            errors = [f"{k}: {v['error']}" for k, v in entry.items() if v.get("error")]
            if errors:
                entry["error"] = "; ".join(errors)
                row["errors"].append(f"batch {key} --batch-size {b}: {entry['error']}")
                log(f"{label}: bert-explain FAILED: {entry['error']}")
            elif len(images) > 1:
                load = (entry["one_before"]["wall"] + entry["one_after"]["wall"]) / 2
                entry["per_image"] = (entry["all"]["wall"] - load) / (len(images) - 1)
                log(f"{label}: bert-explain {key} --batch-size {b}: {bt.ms(entry['per_image'])} an image "
                    f"(whole {entry['all']['wall']:.2f} s, 1 image {entry['one_before']['wall']:.2f} / "
                    f"{entry['one_after']['wall']:.2f} s), peak RSS {bt.mib(entry['all']['rss_kib'])}")
            row["batch"][(key, b)] = entry
    return row


def best_torch(row):
    sizes = [(v["per_image"], int(k[1:])) for k, v in row["torch"].items() if "per_image" in v]
    return min(sizes) if sizes else (None, None)


def best_ours(row, key):
    got = [(e["per_image"], b) for (k, b), e in row["batch"].items() if k == key and e.get("per_image") is not None]
    return min(got) if got else (None, None)


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}×"


def report(args, rows, meta):
    out = []
    p = out.append
    p(f"Vision transformers against torch on the CPU ({meta['date']}; `scripts/bench/vision_throughput.py`"
      f"{' --quick: a smoke run, numbers meaningless' if args.quick else ''})")
    p("")
    p(f"- machine: {meta['cpu']}, {meta['cores']} cores usable, {meta['threads']} threads for each side"
      f"{' (taskset)' if meta['pinned'] else ''}; {meta['mem']}; load average {meta['load_before']} before, "
      f"{meta['load_after']} after")
    p(f"- bert-explain: {meta['bert_explain']}")
    v = meta["versions"]
    p(f"- torch {v.get('torch', '?')}, transformers {v.get('transformers', '?')}, Pillow {v.get('pillow', '?')} "
      f"({args.python}); a process that only imports torch and transformers peaks at {bt.mib(meta['torch_baseline_kib'])}")
    p(f"- command: `{meta['command']}`; {meta['minutes']:.1f} minutes; processes run again (other processes above "
      f"{args.disturbed} cores meanwhile): {meta['reruns']}; "
      + ("--even-while-compiling: timed without waiting for a quiet machine" if args.even_while_compiling else
         f"before each timed process the script waited for {args.quiet_seconds:g} s without rustc or cargo "
         f"and under {args.disturbed} cores busy"))
    p(f"- images: {meta['images_desc']}")
    for r in rows:
        p(f"- {r['model']}: {r['desc']}; torch: {r.get('torch_class')}, {r.get('processor')} (Pillow backend), "
          f"pixel_values {r.get('pixel_shape')}, {r.get('tokens')} tokens; mean largest attention per row "
          f"{r.get('mean_row_max', float('nan')):.4f} on the first image (uniform: {1 / r.get('tokens', 1):.4f}); "
          f"flow: {'`' + ' '.join(r['flow_flags']) + '`' if r.get('flow_flags') else 'no flag (auto, ≤ 1,024 tokens)'}")
    worst = max((others_max(all_entries(r))[0] or 0.0 for r in rows), default=0.0)
    if worst > 0.1:
        p(f"- **disturbed**: other processes kept up to {worst:.2f} cores busy during a measured process; "
          "those numbers are not clean")
    p("")
    p("One image (the first, whole process, median of "
      f"{args.single_runs}; load alone = batch mode on an empty input):")
    p("")
    p("| model | n | load alone | whole: --no-flow / flow | the image less the load: --no-flow / flow "
      "| flow's share | peak RSS: --no-flow / flow |")
    p("|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["single"]
        load, nf, fl = median_of(s["load"]), median_of(s["no-flow"]), median_of(s["flow"])
        less = "-"
        share = "-"
        if None not in (load, nf, fl):
            less = f"{bt.ms(nf - load)} / {bt.ms(fl - load)}"
            share = f"{(fl - nf) / (fl - load):.0%}" if fl > load else "-"
        rss = f"{bt.mib(median_of(s['no-flow'], 'rss_kib'))} / {bt.mib(median_of(s['flow'], 'rss_kib'))}"
        p(f"| {r['model']} | {r.get('tokens')} | {bt.ms(load)} | {bt.ms(nf)} / {bt.ms(fl)} | {less} | {share} | {rss} |")
    p("")
    p("Batch mode on the folder, per image (bert-explain's includes decoding and preprocessing the file; "
      "torch's does not: its preprocessing, Pillow backend, is the column after its forward):")
    p("")
    p("| model | n | images | torch b1 | torch best (size) | torch's preprocessing | "
      + " | ".join(f"bert-explain --batch-size {b}: flow / --no-flow" for b in args.ours)
      + " | ratio, flow: b1 to b1 / best to best | ratio, --no-flow: b1 to b1 / best to best "
      "| peak RSS: torch b1 / best / bert-explain flow, best |")
    p("|---|---|---|---|---|---|" + "---|" * len(args.ours) + "---|---|---|")
    for r in rows:
        t = r["torch"]
        b1 = t.get("b1", {}).get("per_image")
        best, best_b = best_torch(r)
        cells = []
        for b in args.ours:
            f = r["batch"].get(("flow", b), {})
            nfl = r["batch"].get(("no-flow", b), {})
            cells.append(f"{'FAILED' if f.get('error') else bt.ms(f.get('per_image'))} / "
                         f"{'FAILED' if nfl.get('error') else bt.ms(nfl.get('per_image'))}")
        ratios = []
        for key in ("flow", "no-flow"):
            ours_b1 = r["batch"].get((key, 1), {}).get("per_image")
            ours_best, _ = best_ours(r, key)
            ratios.append(f"{ratio(ours_b1, b1)} / {ratio(ours_best, best)}")
        ob, obb = best_ours(r, "flow")
        be_rss = r["batch"].get(("flow", obb), {}).get("all", {}).get("rss_kib") if obb else None
        p(f"| {r['model']} | {r.get('tokens')} | {len(meta['images'])} | {bt.ms(b1)} | {bt.ms(best)} ({best_b}) | "
          f"{bt.ms(t.get('b1', {}).get('preprocess_per_image'))} | " + " | ".join(cells)
          + f" | {ratios[0]} | {ratios[1]} | {bt.mib(t.get('b1', {}).get('max_rss_kib'))} / "
          f"{bt.mib(t.get(f'b{best_b}', {}).get('max_rss_kib'))} / {bt.mib(be_rss)} |")
    p("")
    p("Every configuration (torch: per image, peak RSS; bert-explain: per image, the whole process on "
      "1 / N / 1 images, its own summary per image (forward passes; reports), peak RSS of the N-image process, "
      "the largest |p − torch's p| over its top-5 labels):")
    p("")
    p("| model | configuration | per image | detail | peak RSS | others' CPU (steal) |")
    p("|---|---|---|---|---|---|")
    for r in rows:
        for k, v in r["torch"].items():
            if "skipped" in v:
                p(f"| {r['model']} | torch {k} | skipped | {v['skipped']} | - | - |")
                continue
            o = others_max([v])
            p(f"| {r['model']} | torch {k} | {bt.ms(v['per_image'])} | {v['images']} images timed; "
              f"preprocessing {bt.ms(v['preprocess_per_image'])} an image apart | {bt.mib(v['max_rss_kib'])} | "
              f"{'-' if o[0] is None else f'{o[0]:.2f} ({o[1]:.2f})'} |")
        for (key, b), e in r["batch"].items():
            walls = " / ".join(f"{e[k]['wall']:.2f} s" if e.get(k, {}).get("wall") is not None else "-"
                               for k in ("one_before", "all", "one_after"))
            a = e.get("all", {})
            count = a.get("images") or 1
            summ = "-"
            if a.get("summary_seconds") is not None:
                summ = (f"{bt.ms(a['summary_seconds'] / count)} ({bt.ms(a['forward_seconds'] / count)}; "
                        f"{bt.ms(a['reports_seconds'] / count)})")
            pd = f"{a['prob_diff']:.1e}" if a.get("prob_diff") is not None else "-"
            o = others_max([e.get("one_before"), e.get("all"), e.get("one_after")])
            per = f"FAILED: {e['error'][:300]}" if e.get("error") else bt.ms(e.get("per_image"))
            p(f"| {r['model']} | bert-explain {' '.join((r['flow_flags'] if key == 'flow' else ['--no-flow']) + ['--batch-size', str(b)])} | {per} | whole {walls}; summary {summ}; Δp {pd} | {bt.mib(a.get('rss_kib'))} | "
              f"{'-' if o[0] is None else f'{o[0]:.2f} ({o[1]:.2f})'} |")
        s = r["single"]
        for key in ("load", "no-flow", "flow"):
            walls = ", ".join(f"{x['wall']:.2f}" for x in s[key] if x.get("wall") is not None)
            o = others_max(s[key])
            p(f"| {r['model']} | one image, {key} | {bt.ms(median_of(s[key]))} (median) | runs: {walls} s | "
              f"{bt.mib(median_of(s[key], 'rss_kib'))} | {'-' if o[0] is None else f'{o[0]:.2f} ({o[1]:.2f})'} |")
    failures = [f"{r['model']}: {e}" for r in rows for e in r["errors"]]
    if failures:
        p("")
        p("**Failures**: " + "; ".join(failures))
    return "\n".join(out)


def all_entries(r):
    out = [v for v in r["torch"].values()]
    for e in r["batch"].values():
        out += [e.get("one_before"), e.get("all"), e.get("one_after")]
    for runs in r["single"].values():
        out += runs
    return [x for x in out if isinstance(x, dict)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None, help="threads for each side (default: the usable cores)")
    ap.add_argument("--models", default=None, help="vit-base, dinov2-base or a folder, comma-separated")
    ap.add_argument("--images", type=int, default=None, help="images in the folder (default 16)")
    ap.add_argument("--batch-sizes", default=None, help="torch batch sizes beside 1 (default 2,4,8,16)")
    ap.add_argument("--ours", default=None, help="bert-explain --batch-size values (default 1,8)")
    ap.add_argument("--single-runs", type=int, default=3, help="rounds of the one-image runs")
    ap.add_argument("--max-attention-gib", type=float, default=10.0,
                    help="skip a torch batch whose attention alone would take more")
    ap.add_argument("--bert-explain", default=BIN)
    ap.add_argument("--python", default=PYTHON, help="python with torch, transformers and Pillow")
    ap.add_argument("--models-dir", default=MODELS_DIR)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one bert-explain process")
    ap.add_argument("--json", help="also write every measurement here")
    ap.add_argument("--prepare", action="store_true", help="make the models and images, time nothing")
    ap.add_argument("--even-while-compiling", action="store_true", help="time even while rustc or cargo runs")
    ap.add_argument("--quick", action="store_true", help="a smoke run on the tiny vision models")
    ap.add_argument("--quiet-seconds", type=float, default=5.0,
                    help="before each timed process, wait until no rustc or cargo ran and the machine's CPU stayed "
                         "under --disturbed cores for this long")
    ap.add_argument("--disturbed", type=float, default=0.25,
                    help="run a timed process again when other processes kept more cores busy")
    ap.add_argument("--retries", type=int, default=3, help="the most times a disturbed process runs again")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    args.reruns = 0

    command = "python3 scripts/bench/vision_throughput.py " + " ".join(sys.argv[1:])
    cores = len(os.sched_getaffinity(0))
    args.threads = args.threads or cores
    if args.quick:
        args.models = args.models or "vit-tiny,dinov2-tiny"
        args.images = args.images or 3
        args.batch_sizes = args.batch_sizes or "2"
        args.ours = args.ours or "1,2"
        args.single_runs = 1
    models = [m.strip() for m in (args.models or "vit-base,dinov2-base").split(",") if m.strip()]
    args.images = args.images or 16
    args.batch_sizes = sorted({int(b) for b in (args.batch_sizes or "2,4,8,16").split(",")} - {1})
    args.ours = sorted({int(b) for b in (args.ours or "1,8").split(",")})
    args.bert_explain = os.path.abspath(args.bert_explain)
    if not os.access(args.python, os.X_OK):
        raise SystemExit(f"no python at {args.python}: scripts/setup-python.sh makes .venv-reference, or pass --python")
    os.makedirs(args.models_dir, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="vision-throughput-") as work:
        images = ensure_images(args, work)
        for name in models:
            ensure_model(args, name, work)
        if args.prepare:
            log("models and images ready")
            return 0
        if not os.access(args.bert_explain, os.X_OK):
            raise SystemExit(f"no bert-explain at {args.bert_explain}: cargo build --release, or pass --bert-explain")
        version = subprocess.run([args.bert_explain, "--version"], capture_output=True, text=True).stdout.strip()
        built = os.path.getmtime(args.bert_explain)
        stale = "; OLDER than the newest file under src/" if bt.newest_under(os.path.join(REPO, "src")) > built else ""
        dirty = " (tree with changes)" if bt.git("status", "--porcelain", "--untracked-files=no", "src") else ""
        be_desc = (f"{version}, {os.path.relpath(args.bert_explain, REPO)} built "
                   f"{datetime.datetime.fromtimestamp(built, datetime.timezone.utc):%Y-%m-%d %H:%M} UTC{stale}; "
                   f"HEAD {bt.git('rev-parse', '--short', 'HEAD')}{dirty}")
        with open("/proc/loadavg") as f:
            load_before = " ".join(f.read().split()[:3])
        mem = "?"
        try:
            with open("/proc/meminfo") as f:
                kib = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
            mem = f"{kib / 1024 / 1024:.0f} GiB memory"
        except (OSError, AttributeError):
            pass
        baseline = run_worker(args, {"task": "baseline", "threads": args.threads}, work, "baseline")["max_rss_kib"]
        # An untimed run per model first, so that every timed process reads the model from the page cache.
        rows = []
        for name in models:
            folder, _ = ensure_model(args, name, work)
            be_batch(args, folder, [], [], work, "warm", 0, 0, False)
            rows.append(measure(args, name, images, work))
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    desc = ", ".join(f"{os.path.basename(i['path'])} {i['width']}×{i['height']}" for i in images)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": bt.cpu_model(), "cores": cores, "threads": args.threads, "pinned": bool(bt.pin(args.threads)),
            "mem": mem, "load_before": load_before, "load_after": load_after, "bert_explain": be_desc,
            "versions": rows[0].get("versions", {}) if rows else {}, "command": command,
            "minutes": (time.perf_counter() - T0) / 60, "torch_baseline_kib": baseline, "reruns": args.reruns,
            "images": images, "images_desc": f"{len(images)} under {os.path.relpath(os.path.dirname(images[0]['path']), REPO)}: {desc}"}
    print(report(args, rows, meta))
    if args.json:
        for r in rows:
            r["batch"] = {f"{k}-bs{b}": v for (k, b), v in r["batch"].items()}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
