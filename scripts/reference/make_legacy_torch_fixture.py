"""Writes tests/fixtures/torch-legacy/: a small state dict saved in torch's legacy (not zip)
format, and the same values as JSON, for the Rust reader of that format.

The tensors cover what real legacy checkpoints hold: float32 weights, an int64 buffer,
float16, two tensors sharing one storage at different offsets (as tied or sliced weights
do), and a transposed (Fortran-order) matrix.

Usage: .venv-reference/bin/python scripts/reference/make_legacy_torch_fixture.py
"""

import json
import pathlib
from collections import OrderedDict

import torch

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "torch-legacy"


def main():
    generator = torch.Generator().manual_seed(7)
    shared = torch.randn(10, generator=generator)
    state = OrderedDict(
        [
            ("encoder.weight", torch.randn(3, 4, generator=generator)),
            ("encoder.bias", torch.randn(4, generator=generator)),
            ("embeddings.position_ids", torch.arange(6).unsqueeze(0)),
            ("half", torch.randn(2, 3, generator=generator).half()),
            ("shared.head", shared[:4]),
            ("shared.tail", shared[4:].view(2, 3)),
            ("transposed", torch.randn(3, 2, generator=generator).t()),
        ]
    )
    OUT.mkdir(parents=True, exist_ok=True)
    torch.save(state, OUT / "state.bin", _use_new_zipfile_serialization=False)
    values = {
        name: {
            "shape": list(t.shape),
            "dtype": str(t.dtype).removeprefix("torch."),
            "values": t.double().flatten().tolist(),
        }
        for name, t in state.items()
    }
    (OUT / "state.json").write_text(json.dumps(values, indent=1) + "\n")


if __name__ == "__main__":
    main()
