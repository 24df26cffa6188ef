"""Smoke test of an installed oprt wheel: every operator on the cpu against torch.

Run it with the interpreter of a venv the wheel is installed in, outside the source
tree (CI: .ci/run), so that `import operator_runtime` finds the installed package.
"""

from __future__ import annotations

import sys

import torch

import operator_runtime as ort


def main() -> int:
    if "site-packages" not in ort.__file__:
        print(f"wheel smoke: operator_runtime comes from {ort.__file__}, not an installed wheel")
        return 1
    torch.manual_seed(0)
    x, y = torch.randn(64, 300), torch.randn(64, 300)
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
              if not torch.allclose(ours, expected, rtol=1e-5, atol=1e-5)]
    print(f"wheel smoke: {ort.__file__}; backends {', '.join(ort.available_backends())}; "
          f"{len(checks) - len(failed)}/{len(checks)} ops match torch on the cpu"
          + (f"; wrong: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
