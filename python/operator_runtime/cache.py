"""The descriptor cache behind ``ort.<op>`` and ``ort.<op>_``.

Every call looks up a descriptor by (operator, backend, device, dtypes,
shapes, strides, parameters) and creates one on a miss; the cache keeps the
most recently used ``capacity`` of them (256 unless set) and destroys the
rest. It is thread-safe, and safe across ``fork()``. Prepared descriptors
(``prepare_<op>``) are not in it: they live until destroyed. Calls on a Python
backend (tilelang) keep their own descriptor and kernel per call signature
(``ops.PYTHON_BACKEND_CALLS``); clearing empties both.
"""

from __future__ import annotations

from operator_runtime import _C, ops
from operator_runtime.errors import InvalidArgumentError


def descriptor_cache_info() -> dict[str, int]:
    """{"size", "capacity", "hits", "misses"} of the cache, counted since import."""
    return dict(_C.cache_info())


def clear_descriptor_cache() -> None:
    """Destroys every cached descriptor, and every kernel kept for a Python
    backend's calls (one executing now, once it finishes)."""
    _C.cache_clear()
    ops.PYTHON_BACKEND_CALLS.clear()


def set_descriptor_cache_capacity(capacity: int) -> None:
    """Keeps at most capacity descriptors (0: none, each call creates its own)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 0 <= capacity < 2**63:
        raise InvalidArgumentError(
            f"descriptor cache capacity must be an int from 0 to 2^63 - 1, got {capacity!r}"
        )
    _C.cache_set_capacity(capacity)
