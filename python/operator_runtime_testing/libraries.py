"""Where the runtime's C libraries are, for tests that load them with ctypes.

Two layouts hold them: Bazel runfiles (`_main/<name>`, the root package's products, beside
this package's `_main/python/`) and the GPU-runner bundle (`oprt-bundle/lib/<name>`, next to its
`oprt-bundle/python/`).
"""

from __future__ import annotations

import os
from pathlib import Path

# Not resolved: in runfiles this file is a link into the source tree, which has no libraries.
_ROOT = Path(os.path.abspath(__file__)).parent.parent.parent
_LAYOUTS = (".", "lib")


def runtime_library(name: str) -> str:
    """The path of C library `name` ("liboperator_runtime.so") in whichever layout has it."""
    candidates = [_ROOT / layout / name for layout in _LAYOUTS]
    for path in candidates:
        if path.is_file():
            return str(path)
    raise FileNotFoundError(f"{name} is in neither {' nor '.join(map(str, candidates))}")
