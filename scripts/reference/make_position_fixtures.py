#!/usr/bin/env python3
"""torch's bicubic interpolation of a grid of position embeddings, as transformers' DINOv2
files call it (`dinov2`: antialias off; `dinov2_with_registers`: on), for
src/model/vision/positions.rs: a random `[rows, cols, width]` grid (fixed seed) resized to
several grids, shrinking and growing, square and not.

Writes tests/fixtures/position-interpolation.json. Never uses any Rust code.
"""

import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "position-interpolation.json")


def main():
    torch.manual_seed(0)
    grids, cases = [], []
    for source, width in (((8, 8), 3), ((37, 37), 1), ((5, 7), 2)):
        grid = torch.randn(*source, width)
        grids.append({"rows": source[0], "cols": source[1], "width": width,
                      "values": [round(v, 6) for v in grid.flatten().tolist()]})
        grid = torch.tensor(grids[-1]["values"]).reshape(*source, width)
        for target in ((4, 4), (16, 16), (3, 5), (8, 8), (11, 6)):
            for antialias in (False, True):
                resized = F.interpolate(
                    grid.permute(2, 0, 1).unsqueeze(0).to(torch.float32),
                    size=target,
                    mode="bicubic",
                    align_corners=False,
                    antialias=antialias,
                )
                cases.append({
                    "grid": len(grids) - 1,
                    "to": list(target),
                    "antialias": antialias,
                    "expected": resized.squeeze(0).permute(1, 2, 0).flatten().tolist(),
                })
    with open(OUT, "w") as f:
        json.dump({"torch": torch.__version__, "grids": grids, "cases": cases}, f)
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
