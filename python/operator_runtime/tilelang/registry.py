"""The TileLang kernels the tilelang backend can launch, registered by name.

Each operator's module ops/<op>/tilelang/<op>.py registers its kernels when it
is imported, with `register(op, kernel, eager=..., lazy=...)`: both styles of
one kernel under one name ("rows", "columns", "chunk_stats", ...). The backend
only looks kernels up here; it never imports an operator's module itself. The
kernel set that registers every operator is ops/tilelang_kernels.py, which the
backend imports once, on first use (`load`), so `import operator_runtime`
never imports TileLang.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, NamedTuple

from operator_runtime.errors import InvalidArgumentError, NotSupportedError

STYLES = ("eager", "lazy")
# The module that imports (and so registers) every operator's kernels.
KERNEL_SET = "ops.tilelang_kernels"


class Definition(NamedTuple):
    """One kernel in both styles: `eager` (`@tilelang.jit` whose body is the
    kernel) and `lazy` (`@tilelang.jit` returning a `T.prim_func`); both take
    the dtype and the tile shape as keyword arguments."""

    eager: Any
    lazy: Any


_definitions: dict[tuple[str, str], Definition] = {}
_load_lock = threading.Lock()
_loaded = False


def register(op: str, kernel: str, *, eager: Any, lazy: Any) -> None:
    """Makes op's `kernel` launchable by the tilelang backend."""
    _definitions[(op, kernel)] = Definition(eager, lazy)


def load() -> None:
    """Imports the kernel set once (each of its modules registers its kernels)."""
    global _loaded
    with _load_lock:
        if not _loaded:
            try:
                importlib.import_module(KERNEL_SET)
            except ImportError as error:
                raise NotSupportedError(
                    f"tilelang backend: the kernel set {KERNEL_SET} cannot be imported: {error}"
                ) from None
            _loaded = True


def check_style(style: str) -> str:
    if style not in STYLES:
        raise InvalidArgumentError(f"unknown tilelang style {style!r}; expected one of {', '.join(STYLES)}")
    return style


def definition(op: str, kernel: str, style: str) -> Any:
    """The `style` definition of op's `kernel`."""
    load()
    found = _definitions.get((op, kernel))
    if found is None:
        raise NotSupportedError(f"{op}: no TileLang kernel {kernel!r} is registered")
    return getattr(found, check_style(style))


def kernels(op: str) -> list[str]:
    """The names of op's registered kernels."""
    load()
    return sorted(kernel for registered_op, kernel in _definitions if registered_op == op)
