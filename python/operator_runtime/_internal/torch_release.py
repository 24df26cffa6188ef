"""Refuses a torch release other than the one _C was built against, before _C loads.

_C's torch kernels (runtime/python/torch_kernels.cc) compile against one torch
release's C++ API; another release's libtorch may lack the symbols they bind to
(an undefined-symbol ImportError that names neither release) or lay out what they
share differently. The wheel requires that release (tools/wheel/make_wheel.py); a
process that got another one anyway (a --no-deps install, a source tree, a bundle)
is told which to install.
"""

from __future__ import annotations

import re

import torch

from operator_runtime import _build_info


def running_release(version: str) -> str:
    """The major.minor of a torch version string ("2.11.0+cu130" -> "2.11")."""
    found = re.match(r"\d+\.\d+", version)
    return found.group() if found else version


def check_torch_release() -> None:
    """Raises ImportError naming both releases when torch is not the one _C needs."""
    running = running_release(torch.__version__)
    if running != _build_info.TORCH_RELEASE:
        raise ImportError(
            f"operator_runtime's _C was built against torch {_build_info.TORCH_RELEASE} "
            f"and cannot run with torch {torch.__version__}: install torch=={_build_info.TORCH_RELEASE}.* "
            f"or an oprt built against torch {running} (README.md, Install)"
        )
