#!/usr/bin/env python3
"""Reference relevances for AttnLRP and CP-LRP on the vision transformers (ViT, DeiT with
teacher, DINOv2, DINOv2 with registers), computed with the authors' library LXT 2.1.

What it computes
----------------
For each case below, the relevance of every token for the explained logit s, with LXT's
"efficient" mode: the model's modules are monkey-patched with LXT's rules (which change the
backward pass only), and relevance is Gradient x Input at the tokens as they are before positions
are added:

    tokens  [CLS], then DeiT's distillation token [DIST] or DINOv2-with-registers' register tokens
            [REG1] [REG2] ... (transformers inserts registers right after [CLS]), then the patches
            row-major ("patch r{row} c{col}"); n tokens, in the order of the model's sequence
    e       n x d, each token before positions: the cls / distillation / register token
            parameters, each patch's projection (the patch convolution's output, bias included)
    s       the logit of the top label: argmax of the model's `logits` (DeiT with teacher: its
            `logits`, the mean of the class and distillation heads' logits)
    R_j     sum_d e[j, d] * d~s / d e[j, d]   (d~: the gradient with LXT's rules)

e is made a leaf by replacing the embeddings module's forward (of the model instance) with one
that takes e and builds what the first layer reads exactly as transformers does: positions added
(ViT, DeiT: position_embeddings as they are; DINOv2: interpolate_pos_encoding's bicubic resize of
the 8 x 8 position grid to the image's grid, antialias for dinov2_with_registers only), and the
register tokens inserted after [CLS] once positions are added (registers get no position).
The relevance that does not reach e went to the biases and the positions, so sum(R) is not s in
general; both are written so conservation can be inspected. The heads are linear (ViT: the
classifier on [CLS]; DINOv2: the classifier on concat([CLS], mean of the patches, registers left
out); DeiT with teacher: the mean of two linear heads on [CLS] and [DIST]), as are DINOv2's layer
scales (elementwise products with parameters): no rule there.

Rule sets. LXT 2.1 ships no map for transformers' ViT/DeiT/DINOv2: lxt.efficient.models has bert,
gpt2, llama, qwen2, qwen3, gemma3 and vit_torch, and vit_torch is torchvision's VisionTransformer
with a cp_LRP map only (nn.GELU identity rule, nn.LayerNorm, nn.MultiheadAttention with query and
key detached). The rules are applied with lxt.efficient.monkey_patch to transformers 4.52.4's
modules through the patch functions LXT's own maps use (patch_map below):

  attnlrp   torch.nn.LayerNorm -> patches.layer_norm_forward (normaliser detached: identity rule);
            transformers' activation classes (GELUActivation for "gelu") ->
            patches.non_linear_forward (identity rule, as vit_torch patches nn.GELU);
            the family's module (modeling_vit, ...) -> patches.patch_attention: its module-level
            eager_attention_forward, which the 4.52.4 ViT/DeiT/DINOv2 self-attention calls, wrapped
            by wrap_attention_forward (q and k gradient / 4, v / 2: the uniform rule on q.k^T and
            on A.v, each halved, as LXT's BertSelfAttention; powers of 2, so bit-identical);
            nn.Dropout -> dropout_forward (as LXT's maps; eval anyway).
  cp_lrp    the same with patches.patch_cp_attention: q and k detached (stop_gradient), so no
            relevance through the softmax, no uniform rule (vit_torch cp_LRP's
            cp_multi_head_attention_forward detaches the same two inputs); norms and GELU as above.

Every relevance is computed in float64 (model.double(), float64 e and pixel values) and once more
in float32; "float32_gap" is max|R64 - R32| / max|R64| (information only). transformers 4.52.4
takes the eager softmax in float32 and DINOv2's position interpolation in float32 even in a
float64 model; for the float64 run both are computed in float64 (float64_eager, positions64;
LXT's rules unchanged), so every float64 value is float64 throughout. The float32 run is LXT and
transformers as they are.

Checks (a failure stops the run; the numbers are printed):
  * 4.52.4 reads every tensor of the class from the checkpoint with its shape (no missing or
    mismatched key, every state-dict tensor equal to the file's: none left initialised);
  * if .venv-reference (transformers 5.x) exists: its float32 logits on the same pixel values
    equal 4.52.4's unpatched float32 logits (<= 1e-6), and its top label is the same;
  * the e-forward reproduces the unpatched model's logits (float32 and float64, <= 1e-6);
  * each rule set's forward logits equal the unpatched ones: float64 <= 1e-6 (with and without
    the float32 casts); float32 <= 1e-5, since LXT's layer_norm_forward, written out, rounds
    otherwise than torch's fused LayerNorm (~1e-6 on these logits);
  * plain Gradient x Input (no rules) differs from AttnLRP (> 1e-2 of max |R|);
  * float64 with transformers' float32 softmax and interpolation left in place is within 1e-5
    (relative) of float64 throughout ("islands": rounding only);
  * AttnLRP and CP-LRP recomputed by an independent float64 network written here from the
    safetensors alone (hand_relevance: patches by unfold, the rules as gradient rewrites, the
    uniform rule on the products rather than on q, k, v) agree with LXT's to 1e-9 of max |R|.

Cases: every case of tests/fixtures/methods/vision/cases.json whose model has a head (its
"target" does not matter here: s is the head's top label), on the vision fixture's own pixel
values (tests/fixtures/vision/<case>.pixels.npy, 3 x H x W float32, transformers' own; no
preprocessing here).

Writes tests/fixtures/lrp-vision/<name>.json: {"name", "model", "pixels" (repo-relative),
"tokens", "label_id", "label", "logit" (s, float64), "attnlrp" [n], "cp_lrp" [n], "attnlrp_sum",
"cp_lrp_sum", "float32_gap" {"attnlrp", "cp_lrp"}, "attnlrp_rules", "cp_lrp_rules" (one line
each: how the rules were applied), "reference" (versions)}, numbers rounded to 12 significant
digits; and cases.json: [{"name", "model", "pixels"}].

Usage (from the repo root; scripts/reference/setup.sh lxt makes the env):

    .venv-lxt/bin/python scripts/reference/vision_lrp_reference.py            # every fixture
    .venv-lxt/bin/python scripts/reference/vision_lrp_reference.py --only NAME[,NAME]
    .venv-lxt/bin/python scripts/reference/vision_lrp_reference.py --no-v5-check

monkey_patch is global and irreversible, so each (model, rule set) runs in its own subprocess of
this script (--worker); the parent assembles and checks the fixtures.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from lrp_reference import activation_classes, max_abs_diff, relative_gap  # noqa: E402

MODELS = os.path.join(REPO, "models")
OUT = os.path.join(REPO, "tests", "fixtures", "lrp-vision")
CASES_JSON = os.path.join(REPO, "tests", "fixtures", "methods", "vision", "cases.json")
V5_PYTHON = os.path.join(REPO, ".venv-reference", "bin", "python")

RULE_SETS = ("plain", "attnlrp", "cp_lrp")  # plain: no patches (checks only)
FORWARD_TOLERANCE = 1e-6  # patched / e-forward vs unpatched logits (float64; e-forward both)
FORWARD32_TOLERANCE = 1e-5  # patched vs unpatched float32 logits: LXT's LayerNorm rounds
V5_TOLERANCE = 1e-6       # 4.52.4 vs 5.x float32 logits
PLAIN_MIN_GAP = 1e-2      # plain Gradient x Input vs AttnLRP, relative to max |R|
ISLANDS_TOLERANCE = 1e-5  # float64 with vs without the float32 casts, relative
HAND_TOLERANCE = 1e-9     # LXT vs the hand network, relative to max |R|
DIGITS = 12

# config.json's model_type -> (transformers module, the base model's attribute / key prefix)
FAMILIES = {
    "vit": ("transformers.models.vit.modeling_vit", "vit"),
    "deit": ("transformers.models.deit.modeling_deit", "deit"),
    "dinov2": ("transformers.models.dinov2.modeling_dinov2", "dinov2"),
    "dinov2_with_registers": ("transformers.models.dinov2_with_registers."
                              "modeling_dinov2_with_registers", "dinov2_with_registers"),
}

_NO_MAP = ("LXT 2.1 has no map for transformers' {what} (lxt.efficient.models.vit_torch is "
           "torchvision's ViT, cp_LRP only): ")
_NORMS = "LayerNorm detached (patches.layer_norm_forward)"
_ACTS = ("identity rule on GELU (patches.non_linear_forward on transformers' activation classes, "
         "as vit_torch's nn.GELU)")
_ATTN = ("patches.patch_attention on {module} (its eager_attention_forward wrapped: q, k gradient "
         "/ 4, v / 2, i.e. q·kᵀ and A·v each halved as LXT's BertSelfAttention)")
_CP_ATTN = ("patches.patch_cp_attention on {module} (q and k detached, as vit_torch's "
            "cp_multi_head_attention_forward; no uniform rule)")
_HEADS = {"vit": "linear head on [CLS]",
          "deit": "linear heads on [CLS] and [DIST], their mean",
          "dinov2": "layer scales and the linear head on [CLS ; mean of patches] without rule",
          "dinov2_with_registers": "layer scales and the linear head on [CLS ; mean of patches] "
                                   "without rule"}
_WHAT = {"vit": "ViT", "deit": "DeiT", "dinov2": "DINOv2",
         "dinov2_with_registers": "DINOv2 with registers"}


def rule_notes(model_type):
    """(attnlrp_rules, cp_lrp_rules), one line each, for the fixtures."""
    module = FAMILIES[model_type][0].rsplit(".", 1)[1]
    head = _HEADS[model_type]
    no_map = _NO_MAP.format(what=_WHAT[model_type])
    return (f"{no_map}{_ATTN.format(module=module)}; {_NORMS}; {_ACTS}; {head}",
            f"{no_map}{_CP_ATTN.format(module=module)}; {_NORMS}; {_ACTS}; {head}")


# --------------------------------------------------------------------------------------------
# Cases and checkpoints
# --------------------------------------------------------------------------------------------

def read_config_json(model):
    with open(os.path.join(MODELS, model, "config.json")) as f:
        return json.load(f)


def has_head(model):
    return "ForImageClassification" in read_config_json(model)["architectures"][0]


def all_cases():
    """The vision methods cases whose model has a head: {name, model, pixels}."""
    with open(CASES_JSON) as f:
        cases = json.load(f)
    return [{"name": c["name"], "model": c["model"], "pixels": c["pixels"]}
            for c in cases if has_head(c["model"])]


def special_tokens(config):
    """[CLS], [DIST] (DeiT), [REG1]... (registers): the tokens before the patches."""
    specials = ["[CLS]"]
    if config["model_type"] == "deit":
        specials.append("[DIST]")
    specials += [f"[REG{k + 1}]" for k in range(config.get("num_register_tokens", 0) or 0)]
    return specials


def load_pixels(case):
    import numpy as np
    import torch
    pixels = np.load(os.path.join(REPO, case["pixels"]))
    assert pixels.dtype == np.float32 and pixels.ndim == 3 and pixels.shape[0] == 3, pixels.shape
    return torch.from_numpy(pixels)[None]


# --------------------------------------------------------------------------------------------
# Worker side: transformers 4.52.4 + LXT
# --------------------------------------------------------------------------------------------

# False (worker-global): transformers' own float32 casts (softmax, DINOv2's interpolation) in a
# float64 run, for the check that computing them in float64 changes nothing but rounding
EXACT_FLOAT64 = True


def exact(x):
    """Whether to compute without transformers' float32 casts (float64 input, EXACT_FLOAT64)."""
    import torch
    return EXACT_FLOAT64 and x.dtype == torch.float64


def float64_eager(module):
    """The family's eager attention with the softmax in the input's dtype for float64 inputs
    (4.52.4 takes it in float32 and casts back): scores = q kᵀ · scaling, softmax, @ v. It is
    installed before LXT's patch, so that LXT's wrapper wraps it."""
    import torch
    original = module.eager_attention_forward

    def attention_forward(mod, query, key, value, attention_mask, scaling, dropout=0.0,
                          **kwargs):
        if not exact(query):
            return original(mod, query, key, value, attention_mask, scaling=scaling,
                            dropout=dropout, **kwargs)
        assert attention_mask is None and not mod.training
        weights = torch.softmax(torch.matmul(query, key.transpose(-1, -2)) * scaling, dim=-1)
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    return attention_forward


def patch_map(module, rules):
    """The patch map (for lxt.efficient.monkey_patch) of a vision family: see the docstring."""
    import torch
    from functools import partial
    from lxt.efficient.patches import (dropout_forward, layer_norm_forward, non_linear_forward,
                                       patch_attention, patch_cp_attention, patch_method)

    mapping = {torch.nn.LayerNorm: partial(patch_method, layer_norm_forward),
               torch.nn.Dropout: partial(patch_method, dropout_forward)}
    for activation in activation_classes():
        mapping[activation] = partial(patch_method, non_linear_forward, keep_original=True)
    mapping[module] = patch_attention if rules == "attnlrp" else patch_cp_attention
    return mapping


def patch(model_type, rules):
    """Applies a rule set to the family's transformers module (globally, for this process) and
    returns the module."""
    import importlib

    module = importlib.import_module(FAMILIES[model_type][0])
    module.eager_attention_forward = float64_eager(module)
    if rules != "plain":
        from lxt.efficient import monkey_patch
        monkey_patch(module, patch_map(module, rules))
        assert module.eager_attention_forward.__module__ == "lxt.efficient.patches"
    return module


def load_model(model, module):
    """The checkpoint in models/<model> with 4.52.4's `architectures` class, float32, eval,
    eager attention; every tensor of the class read from the checkpoint (and equal to it)."""
    import torch
    from safetensors.torch import load_file

    d = read_config_json(model)
    cls = getattr(module, d["architectures"][0])
    folder = os.path.join(MODELS, model)
    net, info = cls.from_pretrained(folder, attn_implementation="eager",
                                    torch_dtype=torch.float32, output_loading_info=True)
    unread = {k: info[k] for k in ("missing_keys", "mismatched_keys", "error_msgs")
              if info.get(k)}
    if unread:
        raise SystemExit(f"{model}: 4.52.4's {cls.__name__} reads the checkpoint as {unread}")
    stored = load_file(os.path.join(folder, "model.safetensors"))
    for key, value in net.state_dict().items():
        if key not in stored or not torch.equal(stored[key], value):
            raise SystemExit(f"{model}: {key} is not the checkpoint's")
    net = net.float().eval()
    install_e_forward(net, d["model_type"])
    return net


def positions(emb, model_type, x, height, width):
    """What transformers adds to cat([CLS] (, [DIST]), patches): ViT and DeiT their
    position_embeddings (interpolate_pos_encoding is off by default), DINOv2 its
    interpolate_pos_encoding (in float64 for float64 runs: positions64)."""
    if model_type in ("vit", "deit"):
        return emb.position_embeddings
    if not exact(x):
        return emb.interpolate_pos_encoding(x, height, width)
    return positions64(emb, model_type, x, height, width)


def positions64(emb, model_type, x, height, width):
    """DINOv2's interpolate_pos_encoding (4.52.4 and 5.x) without the float32 cast: the grid of
    patch positions resized bicubically (align_corners False; antialias for registers) to the
    image's grid, unless the counts match and the image is square."""
    import torch
    import torch.nn.functional as F

    num_patches, num_positions = x.shape[1] - 1, emb.position_embeddings.shape[1] - 1
    if num_patches == num_positions and height == width:
        return emb.position_embeddings
    dim, side = x.shape[-1], int(round(num_positions ** 0.5))
    assert side * side == num_positions
    grid = emb.position_embeddings[:, 1:].reshape(1, side, side, dim).permute(0, 3, 1, 2)
    patch = emb.config.patch_size
    grid = F.interpolate(grid, size=(height // patch, width // patch), mode="bicubic",
                         align_corners=False, antialias=model_type == "dinov2_with_registers")
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, dim)
    return torch.cat((emb.position_embeddings[:, :1], grid), dim=1)


def install_e_forward(net, model_type):
    """Replaces the embeddings module's forward (this instance's) with one that, when
    `emb.lrp_e` (1 x n x d, model order) is set, builds the first layer's input from it as
    transformers does; with lrp_e None it is transformers' own forward."""
    import torch

    emb = net.base_model.embeddings
    original = type(emb).forward
    emb.lrp_e = None
    registers = getattr(net.config, "num_register_tokens", 0) or 0

    def forward(self, pixel_values, bool_masked_pos=None, interpolate_pos_encoding=False):
        if self.lrp_e is None:
            kwargs = {} if model_type.startswith("dinov2") else {
                "interpolate_pos_encoding": interpolate_pos_encoding}
            return original(self, pixel_values, bool_masked_pos=bool_masked_pos, **kwargs)
        assert bool_masked_pos is None and not interpolate_pos_encoding
        height, width = pixel_values.shape[-2:]
        e = self.lrp_e
        # [CLS] (+ [DIST]) and the patches get positions; registers are inserted after
        x = torch.cat((e[:, :1], e[:, 1 + registers:]), dim=1)
        x = x + positions(self, model_type, x, height, width)
        if registers:
            x = torch.cat((x[:, :1], e[:, 1:1 + registers], x[:, 1:]), dim=1)
        return self.dropout(x)

    emb.forward = types.MethodType(forward, emb)


def token_embeddings(net, model_type, pixels):
    """e (1 x n x d, model order, detached): the special tokens' parameters and the patch
    convolution's output (bias included), flattened row-major as transformers does."""
    import torch

    emb = net.base_model.embeddings
    with torch.no_grad():
        patches = emb.patch_embeddings.projection(pixels).flatten(2).transpose(1, 2)
        specials = [emb.cls_token]
        if model_type == "deit":
            specials.append(emb.distillation_token)
        if model_type == "dinov2_with_registers":
            specials.append(emb.register_tokens)
        return torch.cat([s.detach() for s in specials] + [patches], dim=1).detach()


def relevance(net, model_type, pixels, dtype, class_id):
    """Gradient x Input at e for the logit of class_id (None: the top one). Returns (class_id,
    logit, R, the head's logits)."""
    net.to(dtype)
    x = pixels.to(dtype)
    e = token_embeddings(net, model_type, x).requires_grad_()
    emb = net.base_model.embeddings
    emb.lrp_e = e
    try:
        logits = net(pixel_values=x).logits[0]
    finally:
        emb.lrp_e = None
    if class_id is None:
        class_id = int(logits.argmax())
    logits[class_id].backward()
    r = (e * e.grad).sum(-1)[0]
    return (class_id, float(logits[class_id]), [float(v) for v in r],
            [float(v) for v in logits.detach()])


def unpatched_logits(net, pixels, dtype):
    """transformers' own forward from the pixel values (the e-forward off)."""
    import torch
    net.to(dtype)
    with torch.no_grad():
        return [float(v) for v in net(pixel_values=pixels.to(dtype)).logits[0]]


def worker(model, rules, cases):
    """One (model, rule set): every case's class, logits and relevances in float64 and float32
    (and, without rules, the unpatched logits and the hand network's relevances)."""
    global EXACT_FLOAT64
    import torch

    torch.set_num_threads(1)
    model_type = read_config_json(model)["model_type"]
    module = patch(model_type, rules)
    net64 = load_model(model, module).double()
    net32 = load_model(model, module)
    results = {}
    for case in cases:
        pixels = load_pixels(case)
        class_id, logit, r64, logits64 = relevance(net64, model_type, pixels, torch.float64, None)
        class32, logit32, r32, logits32 = relevance(net32, model_type, pixels, torch.float32,
                                                    None)
        if class32 != class_id:
            raise SystemExit(f"{case['name']}: float32's top label {class32}, float64's "
                             f"{class_id}")
        EXACT_FLOAT64 = False
        _, _, r64_islands, logits64_islands = relevance(net64, model_type, pixels,
                                                        torch.float64, class_id)
        EXACT_FLOAT64 = True
        res = dict(class_id=class_id, logit=logit, logits=logits64, r64=r64, logit32=logit32,
                   logits32=logits32, r32=r32, r64_islands=r64_islands,
                   logits64_islands=logits64_islands, n=len(r64))
        if rules == "plain":
            res["unpatched32"] = unpatched_logits(net32, pixels, torch.float32)
            EXACT_FLOAT64 = False  # transformers' own float64 forward keeps its float32 casts
            res["unpatched64"] = unpatched_logits(net64, pixels, torch.float64)
            EXACT_FLOAT64 = True
            res["hand"] = {r: hand_relevance(model, pixels, class_id, cp=r == "cp_lrp")
                           for r in ("attnlrp", "cp_lrp")}
        results[case["name"]] = res
    return results


# --------------------------------------------------------------------------------------------
# Independent check: the vision networks with the LRP rules written out by hand (float64)
# --------------------------------------------------------------------------------------------

def hand_relevance(model, pixels, class_id, cp):
    """AttnLRP (cp=False) or CP-LRP (cp=True) relevances from the safetensors and config.json
    alone, in float64: the patches cut by unfold and projected by a matmul, positions (DINOv2:
    F.interpolate as transformers), registers inserted after [CLS], the pre-norm layers
    (DINOv2's layer scales), the final LayerNorm and the head, with each rule as a gradient
    rewrite that leaves the forward value as it is:
      scale(x, f)     gradient / f                      (uniform rule, LXT's divide_gradient)
      identity(f, x)  gradient * f(x) / (x + 1e-10)     (identity rule, as LXT's epsilon)
      LayerNorm       (x - mean) / std, std detached     (identity rule)
      attention       AttnLRP: q kᵀ and A v each scaled by 1/2 (not q, k, v as LXT's wrapper);
                      CP: q and k detached
    No transformers or LXT code runs here."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    c = read_config_json(model)
    model_type = c["model_type"]
    base = FAMILIES[model_type][1]
    sd = {k: v.double() for k, v in
          load_file(os.path.join(MODELS, model, "model.safetensors")).items()}
    d, heads, eps = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"]
    dh, patch = d // heads, c["patch_size"]
    dinov2 = model_type.startswith("dinov2")
    registers = c.get("num_register_tokens", 0) or 0

    def p(name):
        return sd[f"{base}.{name}"]

    def scale(x, f):
        return x.detach() + (x - x.detach()) / f

    def identity(fn, x):
        y = fn(x)
        return y.detach() + (x - x.detach()) * (y / (x + 1e-10)).detach()

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdim=True)
        std = ((x - mean) ** 2).mean(-1, keepdim=True).add(eps).sqrt()
        return (x - mean) / std.detach() * sd[prefix + ".weight"] + sd[prefix + ".bias"]

    def linear(x, prefix):
        return x @ sd[prefix + ".weight"].T + sd[prefix + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    x = pixels[0].double()  # 3 x H x W
    height, width = x.shape[1:]
    rows, cols = height // patch, width // patch
    cut = x[:, :rows * patch, :cols * patch].unfold(1, patch, patch).unfold(2, patch, patch)
    cut = cut.permute(1, 2, 0, 3, 4).reshape(rows * cols, -1)  # (channel, y, x) per patch
    w = p("embeddings.patch_embeddings.projection.weight").reshape(d, -1)
    patches = cut @ w.T + p("embeddings.patch_embeddings.projection.bias")
    specials = [p("embeddings.cls_token")[0]]
    if model_type == "deit":
        specials.append(p("embeddings.distillation_token")[0])
    if registers:
        specials.append(p("embeddings.register_tokens")[0])
    e = torch.cat(specials + [patches]).clone().requires_grad_()
    pos = p("embeddings.position_embeddings")[0]
    h = torch.cat((e[:1], e[1 + registers:]))
    if dinov2 and not (rows * cols == pos.shape[0] - 1 and height == width):
        side = int(round((pos.shape[0] - 1) ** 0.5))
        grid = pos[1:].reshape(1, side, side, d).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(rows, cols), mode="bicubic", align_corners=False,
                             antialias=registers > 0)
        pos = torch.cat((pos[:1], grid[0].permute(1, 2, 0).reshape(-1, d)))
    assert pos.shape == h.shape, (pos.shape, h.shape)
    h = h + pos
    h = torch.cat((h[:1], e[1:1 + registers], h[1:]))
    n = h.shape[0]
    for layer in range(c["num_hidden_layers"]):
        lp = f"{base}.encoder.layer.{layer}."
        norm1, norm2 = ("norm1", "norm2") if dinov2 else ("layernorm_before", "layernorm_after")
        xh = layer_norm(h, lp + norm1)
        q, k, v = (linear(xh, lp + "attention.attention." + m).view(n, heads, dh).transpose(0, 1)
                   for m in ("query", "key", "value"))
        if cp:
            scores = q.detach() @ k.detach().transpose(-1, -2)
        else:
            scores = scale(q @ k.transpose(-1, -2), 2)
        probs = torch.softmax(scores / math.sqrt(dh), -1)
        context = probs @ v if cp else scale(probs @ v, 2)
        out = linear(context.transpose(0, 1).reshape(n, d), lp + "attention.output.dense")
        if dinov2:
            out = out * sd[lp + "layer_scale1.lambda1"]
        h = h + out
        xh = layer_norm(h, lp + norm2)
        if dinov2:
            inner = identity(gelu, linear(xh, lp + "mlp.fc1"))
            out = linear(inner, lp + "mlp.fc2") * sd[lp + "layer_scale2.lambda1"]
        else:
            inner = identity(gelu, linear(xh, lp + "intermediate.dense"))
            out = linear(inner, lp + "output.dense")
        h = h + out
    h = layer_norm(h, f"{base}.layernorm")
    if model_type == "vit":
        logits = linear(h[0], "classifier")
    elif model_type == "deit":
        logits = (linear(h[0], "cls_classifier") + linear(h[1], "distillation_classifier")) / 2
    else:
        logits = linear(torch.cat((h[0], h[1 + registers:].mean(0))), "classifier")
    logits[class_id].backward()
    return {"r": [float(v) for v in (e * e.grad).sum(-1)],
            "logits": [float(v) for v in logits.detach()]}


# --------------------------------------------------------------------------------------------
# transformers 5.x cross-check (runs under .venv-reference's python)
# --------------------------------------------------------------------------------------------

def v5_worker(model, cases):
    """float32 logits from the pixel values with transformers 5.x's own class (eager)."""
    import torch
    import transformers

    torch.set_num_threads(1)
    d = read_config_json(model)
    cls = getattr(transformers, d["architectures"][0])
    net, info = cls.from_pretrained(os.path.join(MODELS, model), attn_implementation="eager",
                                    dtype=torch.float32, output_loading_info=True)
    unread = {k: sorted(v) for k, v in info.items() if v and k != "unexpected_keys"}
    if unread:
        raise SystemExit(f"{model}: 5.x reads the checkpoint as {unread}")
    net.eval()
    results = {}
    for case in cases:
        with torch.no_grad():
            logits = net(pixel_values=load_pixels(case)).logits[0]
        results[case["name"]] = {"logits": [float(v) for v in logits],
                                 "version": transformers.__version__}
    return results


# --------------------------------------------------------------------------------------------
# Parent: run the workers, check, write the fixtures
# --------------------------------------------------------------------------------------------

def run_worker(python, args, cases):
    proc = subprocess.run([python, os.path.abspath(__file__), *args], input=json.dumps(cases),
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"worker {args} failed")
    return json.loads(proc.stdout)


def check_case(name, runs, v5):
    """Consistency of one case across rule sets, with the hand network and with 5.x; returns the
    printable facts (maxima)."""
    plain = runs["plain"]
    facts = {}
    # the e-forward against transformers' own forward (no rules)
    facts["e_forward"] = max(max_abs_diff(plain["logits32"], plain["unpatched32"]),
                             max_abs_diff(plain["logits64_islands"], plain["unpatched64"]))
    if facts["e_forward"] > FORWARD_TOLERANCE:
        raise SystemExit(f"{name}: the e-forward changes the logits by {facts['e_forward']:.3g}")
    # each rule set's forward against the unpatched one
    forward, forward32 = 0.0, 0.0
    for rules in ("attnlrp", "cp_lrp"):
        r = runs[rules]
        if r["class_id"] != plain["class_id"] or r["n"] != plain["n"]:
            raise SystemExit(f"{name}: {rules} explains another label or token count")
        forward = max(forward, max_abs_diff(r["logits"], plain["logits"]),
                      max_abs_diff(r["logits64_islands"], plain["unpatched64"]))
        forward32 = max(forward32, max_abs_diff(r["logits32"], plain["unpatched32"]))
    facts["forward"], facts["forward32"] = forward, forward32
    if forward > FORWARD_TOLERANCE:
        raise SystemExit(f"{name}: a rule set changes the float64 logits by {forward:.3g}")
    if forward32 > FORWARD32_TOLERANCE:
        raise SystemExit(f"{name}: a rule set changes the float32 logits by {forward32:.3g}")
    facts["plain_vs_attnlrp"] = relative_gap(runs["attnlrp"]["r64"], plain["r64"])
    if facts["plain_vs_attnlrp"] < PLAIN_MIN_GAP:
        raise SystemExit(f"{name}: AttnLRP is plain Gradient x Input: are the rules applied?")
    facts["islands"] = max(relative_gap(runs[r]["r64"], runs[r]["r64_islands"])
                           for r in RULE_SETS)
    if facts["islands"] > ISLANDS_TOLERANCE:
        raise SystemExit(f"{name}: float64 with and without the float32 casts differ by "
                         f"{facts['islands']:.3g}")
    facts["hand_logits"] = max(max_abs_diff(plain["hand"][r]["logits"], plain["logits"])
                               for r in ("attnlrp", "cp_lrp"))
    if facts["hand_logits"] > 1e-9:
        raise SystemExit(f"{name}: the hand network's logits differ by "
                         f"{facts['hand_logits']:.3g}")
    for rules in ("attnlrp", "cp_lrp"):
        gap = relative_gap(runs[rules]["r64"], plain["hand"][rules]["r"])
        facts[f"hand_{rules}"] = gap
        if gap > HAND_TOLERANCE:
            raise SystemExit(f"{name}: LXT {rules} and the hand network differ by {gap:.3g}")
    if v5 is not None:
        diff = max_abs_diff(v5["logits"], plain["unpatched32"])
        top = max(range(len(v5["logits"])), key=v5["logits"].__getitem__)
        if diff > V5_TOLERANCE or top != plain["class_id"]:
            raise SystemExit(f"{name}: 5.x's float32 logits {v5['logits']}, 4.52.4's "
                             f"{plain['unpatched32']} (difference {diff:.3g})")
        facts["v5"] = diff
    facts["margin"] = plain["logits"][plain["class_id"]] - max(
        v for i, v in enumerate(plain["logits"]) if i != plain["class_id"])
    return facts


def short(x):
    return float(f"{float(x):.{DIGITS}g}")


def fixture(case, runs, versions):
    config = read_config_json(case["model"])
    attn, cp = runs["attnlrp"], runs["cp_lrp"]
    height, width = load_pixels(case).shape[-2:]
    rows, cols = height // config["patch_size"], width // config["patch_size"]
    assert rows * cols == attn["n"] - len(special_tokens(config)), (rows, cols, attn["n"])
    tokens = special_tokens(config) + [f"patch r{r} c{c}" for r in range(rows)
                                       for c in range(cols)]
    attnlrp_rules, cp_lrp_rules = rule_notes(config["model_type"])
    return {
        "name": case["name"],
        "model": case["model"],
        "pixels": case["pixels"],
        "tokens": tokens,
        "label_id": attn["class_id"],
        "label": config["id2label"][str(attn["class_id"])],
        "logit": short(attn["logit"]),
        "attnlrp": [short(v) for v in attn["r64"]],
        "cp_lrp": [short(v) for v in cp["r64"]],
        "attnlrp_sum": short(math.fsum(attn["r64"])),
        "cp_lrp_sum": short(math.fsum(cp["r64"])),
        "float32_gap": {"attnlrp": short(relative_gap(attn["r64"], attn["r32"])),
                        "cp_lrp": short(relative_gap(cp["r64"], cp["r32"]))},
        "attnlrp_rules": attnlrp_rules,
        "cp_lrp_rules": cp_lrp_rules,
        "reference": {"lxt": "2.1", **versions},
    }


def dump(doc):
    """JSON with one key a line (lists on one line)."""
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in doc.items()]
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == doc
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--no-v5-check", action="store_true",
                    help="skip the comparison with transformers 5.x (.venv-reference)")
    ap.add_argument("--jobs", type=int, default=2, help="workers at a time")
    ap.add_argument("--out", default=OUT, help=f"where the fixtures go (default: {OUT})")
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "RULES"), help=argparse.SUPPRESS)
    ap.add_argument("--v5-worker", metavar="MODEL", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        json.dump(worker(*args.worker, json.load(sys.stdin)), sys.stdout)
        return
    if args.v5_worker:
        json.dump(v5_worker(args.v5_worker, json.load(sys.stdin)), sys.stdout)
        return

    import torch
    import transformers
    versions = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    cases = all_cases()
    every_case = args.only is None
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c["name"] for c in cases}
        if unknown:
            raise SystemExit(f"unknown cases: {sorted(unknown)}")
        cases = [c for c in cases if c["name"] in wanted]
    models = sorted({c["model"] for c in cases})
    by_model = {m: [c for c in cases if c["model"] == m] for m in models}
    v5 = not args.no_v5_check and os.path.exists(V5_PYTHON)
    if not v5:
        print("not comparing with transformers 5.x", "(--no-v5-check)" if args.no_v5_check
              else f"({V5_PYTHON} missing)", file=sys.stderr)

    jobs = [(m, ("--worker", m, r), sys.executable) for m in models for r in RULE_SETS]
    if v5:
        jobs += [(m, ("--v5-worker", m), V5_PYTHON) for m in models]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {(m, a[-1] if a[0] == "--worker" else "v5"):
                   pool.submit(run_worker, py, list(a), by_model[m]) for m, a, py in jobs}
        results = {key: f.result() for key, f in futures.items()}

    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        m, name = case["model"], case["name"]
        runs = {r: results[(m, r)][name] for r in RULE_SETS}
        facts = check_case(name, runs, results[(m, "v5")][name] if v5 else None)
        fx = fixture(case, runs, versions)
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            f.write(dump(fx))
        print(f"{name:33s} {fx['label']:7s} logit {fx['logit']:+.6f}  sum attnlrp "
              f"{fx['attnlrp_sum']:+.6f}  cp {fx['cp_lrp_sum']:+.6f}  f32 gap "
              f"{fx['float32_gap']['attnlrp']:.1e}/{fx['float32_gap']['cp_lrp']:.1e}  "
              + " ".join(f"{k} {v:.1e}" for k, v in facts.items()))
    if every_case:
        with open(os.path.join(args.out, "cases.json"), "w") as f:
            f.write("[\n" + ",\n".join(
                " " + json.dumps({k: c[k] for k in ("name", "model", "pixels")})
                for c in cases) + "\n]\n")
    print(f"{len(cases)} fixtures in {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    main()
