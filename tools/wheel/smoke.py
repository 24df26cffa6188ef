"""Smoke test of an installed oprt wheel: every operator against torch.

usage: smoke.py [cpu|cuda]   (default cpu)

Run it with the interpreter of a venv the wheel is installed in, outside the source
tree (CI: .ci/run, on the cpu; the GPU machine, on cuda), so that `import
operator_runtime` finds the installed package.
"""

from __future__ import annotations

import sys

import torch

import operator_runtime as ort


# On cuda the sums run in another order and exponentials are __expf: a few f32 ulps.
TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}


def main(device: str) -> int:
    if device not in TOLERANCE:
        print(f"wheel smoke: usage: smoke.py [{'|'.join(TOLERANCE)}], got {device!r}")
        return 2
    if "site-packages" not in ort.__file__:
        print(f"wheel smoke: operator_runtime comes from {ort.__file__}, not an installed wheel")
        return 1
    torch.manual_seed(0)
    x, y = torch.randn(64, 300, device=device), torch.randn(64, 300, device=device)
    checks = {
        "copy": (ort.copy(x), x),
        "vector_add": (ort.vector_add(x, y), x + y),
        "relu": (ort.relu(x), torch.relu(x)),
        "reduce_sum": (ort.reduce_sum(x, dim=1), x.sum(dim=1)),
        "softmax": (ort.softmax(x, dim=-1), torch.softmax(x, dim=-1)),
        "relu_backward": (ort.relu_backward(y, x), torch.ops.aten.threshold_backward(y, x, 0)),
        "softmax_backward": (ort.softmax_backward(y, torch.softmax(x, -1)),
                             torch._softmax_backward_data(y, torch.softmax(x, -1), -1, x.dtype)),
    }
    missing = sorted(set(ort.OPERATORS) - set(checks))
    if missing:
        print(f"wheel smoke: no check for {', '.join(missing)}")
        return 1
    failed = [name for name, (ours, expected) in checks.items()
              if not torch.allclose(ours, expected, rtol=TOLERANCE[device], atol=TOLERANCE[device])]
    print(f"wheel smoke: {ort.__file__}; backends {', '.join(ort.available_backends())}; "
          f"{len(checks) - len(failed)}/{len(checks)} ops match torch on {device}"
          + (f"; wrong: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
