"""Which contiguous kernels liboperator_runtime.so holds, read from its SASS without a GPU.

usage: cute_kernels_test.py VARIANT_FILE LIBRARY CUOBJDUMP

VARIANT_FILE is //tools/cuda:cute_kernels.variant: `cute` when --@//tools/cuda:cute
built the CuTe kernels, `cuda` otherwise. With `cute`, the library must hold
cute_contiguous_kernel for copy and vector_add on every GPU architecture it embeds, and
not for relu (which keeps the plain CUDA kernels); with `cuda`, no CuTe kernel at all.
The function names come from the hermetic `cuobjdump --list-text`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

_SECTION = re.compile(r"^SASS text section \d+ : x-(\S+)\.(sm_\d+[af]?)\.elf\.bin$")
_CUTE_KERNEL = "cute_contiguous_kernel"


def _kernels(library: str, cuobjdump: str) -> dict[str, set[str]]:
    """Mangled kernel names per embedded architecture."""
    listing = subprocess.run([cuobjdump, "--list-text", library], check=True, capture_output=True,
                             text=True).stdout
    kernels: dict[str, set[str]] = {}
    for line in listing.splitlines():
        match = _SECTION.match(line.strip())
        if match:
            kernels.setdefault(match.group(2), set()).add(match.group(1))
    assert kernels, f"cuobjdump --list-text {library} listed no SASS functions:\n{listing}"
    return kernels


def _cute_kernels_of(names: set[str], functor: str) -> list[str]:
    return sorted(name for name in names if _CUTE_KERNEL in name and f"{len(functor)}{functor}" in name)


@pytest.fixture(scope="module")
def setup() -> tuple[str, dict[str, set[str]]]:
    variant_file, library, cuobjdump = sys.argv[1:4]
    return Path(variant_file).read_text().strip(), _kernels(library, cuobjdump)


def test_cute_kernels_match_the_setting(setup):
    variant, kernels = setup
    assert variant in ("cute", "cuda")
    for arch, names in sorted(kernels.items()):
        if variant == "cute":
            # Three dtypes, each at every vector width from 16 bytes down to one element.
            assert len(_cute_kernels_of(names, "CopyFunctor")) == 3 + 4 + 4, arch
            assert len(_cute_kernels_of(names, "VectorAddFunctor")) == 3 + 4 + 4, arch
            assert _cute_kernels_of(names, "ReluFunctor") == [], arch
        else:
            assert [name for name in names if _CUTE_KERNEL in name] == [], arch


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
