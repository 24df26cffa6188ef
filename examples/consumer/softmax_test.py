"""oprt used from another workspace: ort.softmax on a CPU tensor matches torch."""

import sys

import torch

import operator_runtime as ort


def main() -> int:
    x = torch.randn(64, 1000)
    ours = ort.softmax(x, dim=-1)
    expected = torch.softmax(x, dim=-1)
    if not torch.allclose(ours, expected, rtol=1e-5, atol=1e-6):
        print(f"consumer: softmax differs from torch by {(ours - expected).abs().max().item():.3g}")
        return 1
    print(f"consumer: ort.softmax of {tuple(x.shape)} from {ort.__file__} matches torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
