"""Building a case's tensors: seeded values placed in their layouts.

Storage a view does not cover (padding, skipped slices) holds NaN, so a kernel
that reads it shows NaN in its output, and one that writes it is caught by
``gaps_untouched``.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import torch

from operator_runtime_testing.cases import Layout, TensorSpec, Values

SENTINEL = float("nan")


def generator_for(name: str) -> torch.Generator:
    """A CPU generator seeded from a case name, so every run sees the same values."""
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def placed(shape: Sequence[int], layout: Layout, dtype: torch.dtype, device) -> torch.Tensor:
    """A view of `shape` laid out by `layout` over NaN-filled storage."""
    shape = tuple(shape)
    placement = layout.place(shape)
    storage = torch.full((placement.storage,), SENTINEL, dtype=dtype, device=device)
    return storage.as_strided(shape, placement.strides, placement.offset)


def _unique_elements(view: torch.Tensor) -> torch.Tensor:
    """The sub-view holding each distinct memory element once (stride-0 dims cut to 1)."""
    index = tuple(
        slice(0, 1) if stride == 0 and extent > 1 else slice(None)
        for extent, stride in zip(view.shape, view.stride())
    )
    return view[index]


def make_input(
    spec: TensorSpec, dtype: torch.dtype, device, values: Values, generator: torch.Generator
) -> torch.Tensor:
    view = placed(spec.shape, spec.layout, dtype, device)
    unique = _unique_elements(view)
    unique.copy_(values.generate(unique.shape, generator).to(dtype))
    return view


def gaps_untouched(view: torch.Tensor) -> bool:
    """True when every storage element outside the view still holds the sentinel."""
    storage = torch.as_strided(view, (view.untyped_storage().nbytes() // view.element_size(),), (1,), 0)
    covered = torch.zeros(storage.shape, dtype=torch.bool, device=view.device)
    if view.numel():
        covered.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    return bool(torch.isnan(storage[~covered].float()).all())
