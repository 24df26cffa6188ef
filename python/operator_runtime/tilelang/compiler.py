"""Compiling the registered TileLang kernels once per process and key.

TileLang is imported here on first use (about 4 s), never at `import
operator_runtime`. A compiled kernel is kept in memory under
(op, kernel, style, compile-time arguments, arch); below that, TileLang's own
disk cache (one directory, `cache_dir()`) keeps the cubins and host wrappers
across processes, so a second process compiles nothing.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import threading
from typing import Any, NamedTuple

import torch

from operator_runtime.errors import NotSupportedError
from operator_runtime.tilelang.registry import STYLES, check_style, definition

STYLE_ENV = "OPRT_TILELANG_STYLE"
CACHE_DIR_ENV = "OPRT_TILELANG_CACHE_DIR"
# An nvcc to compile with: CUDA_HOME becomes its toolkit before TileLang is imported.
NVCC_ENV = "OPRT_TILELANG_NVCC"
DEFAULT_STYLE = "lazy"

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
# Target "c" (the CPU) has no bfloat16 type: TileLang cannot emit C for it.
C_TARGET_DTYPES = ("float32", "float16")

_style: str | None = None
_cache_dir: str | None = None


def set_style(style: str | None) -> None:
    """Kernels prepared from now on use the eager kernels ("eager") or the lazy
    factories ("lazy"); None goes back to $OPRT_TILELANG_STYLE, else "lazy"."""
    global _style
    _style = None if style is None else check_style(style)


def get_style() -> str:
    return _style or check_style(os.environ.get(STYLE_ENV) or DEFAULT_STYLE)


def set_cache_dir(path: str | None) -> None:
    """Directory of the compiled-kernel disk cache; None goes back to
    $OPRT_TILELANG_CACHE_DIR, else TileLang's own ($TILELANG_CACHE_DIR or ~/.tilelang/cache)."""
    global _cache_dir
    _cache_dir = path


def cache_dir() -> str:
    chosen = _cache_dir or os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return chosen
    return os.environ.get("TILELANG_CACHE_DIR") or os.path.expanduser("~/.tilelang/cache")


_import_lock = threading.Lock()
_trace_lock = threading.Lock()
_tilelang: Any = None
_import_error: str | None = None


def import_tilelang() -> Any:
    """The tilelang module, imported once; NotSupportedError saying why when it cannot be."""
    global _tilelang, _import_error
    with _import_lock:
        if _tilelang is None and _import_error is None:
            nvcc = os.environ.get(NVCC_ENV)
            if nvcc:
                os.environ["CUDA_HOME"] = str(pathlib.Path(nvcc).resolve().parent.parent)
            try:
                _tilelang = importlib.import_module("tilelang")
            except Exception as error:  # an ImportError, or a missing native library
                _import_error = f"importing tilelang failed: {type(error).__name__}: {error}"
    if _import_error:
        raise NotSupportedError(f"tilelang backend is not available: {_import_error}")
    return _tilelang


def cuda_target(device: torch.device) -> dict:
    """TileLang's target for a CUDA device: SASS for its exact architecture."""
    major, minor = torch.cuda.get_device_capability(device)
    return {"kind": "cuda", "arch": f"sm_{major}{minor}"}


def target_arch(target: dict | str) -> str:
    return target if isinstance(target, str) else target["arch"]


def compile_kernel(op: str, kernel: str, style: str, consts: dict, target: dict | str):
    """Lowers and compiles op's `kernel` of `style` with compile-time arguments
    `consts` (dtype, tile shape) to `target` ({"kind": "cuda", "arch": "sm_90"},
    or "c" for the CPU)."""
    tilelang = import_tilelang()
    os.environ["TILELANG_CACHE_DIR"] = cache_dir()
    # TileLang's C code generator cannot emit vector casts (f16 -> f32 x 4).
    pass_configs = {"tirx.disable_vectorize": True} if target == "c" else None
    try:
        return tilelang.compile(_trace(op, kernel, style, consts), target=target, pass_configs=pass_configs)
    except Exception as error:  # TVM raises its own error types from lowering
        # `batch` (reductions sharing one barrier pair) must divide the outputs
        # each thread holds, which TileLang's layout inference decides: the
        # backend's estimate is corrected once by the count lowering reports.
        found = _PER_THREAD_OUTPUTS.search(str(error))
        if "batch" not in consts or found is None:
            raise
        consts = {**consts, "batch": int(found.group(1))}
        return tilelang.compile(_trace(op, kernel, style, consts), target=target, pass_configs=pass_configs)


_PER_THREAD_OUTPUTS = re.compile(r"per-thread output element count N=(\d+)")


def _trace(op: str, kernel: str, style: str, consts: dict):
    # Tracing a definition mutates its JIT object's caches: one at a time (milliseconds);
    # lowering and nvcc, the seconds, run concurrently as in TileLang's own par_compile.
    with _trace_lock:
        return definition(op, kernel, style).get_tir(**consts)


def launcher(compiled: Any) -> Any:
    """What the backend calls to launch a compiled kernel: its TVM-FFI function
    itself, which checks its arguments and launches on torch's current stream.
    TileLang's Python wrapper around it (the kernel object's __call__) re-derives
    outputs and devices on every call, several microseconds of host time."""
    executable = getattr(compiled.adapter, "_get_executable", None)
    return executable() if executable is not None else compiled


class CacheKey(NamedTuple):
    op: str
    kernel: str
    style: str
    consts: tuple
    arch: str


class KernelCache:
    """Compiled kernels by CacheKey, each compiled once per process; different
    keys compile concurrently (TileLang releases the GIL, nvcc is a subprocess)."""

    def __init__(self) -> None:
        self._kernels: dict[CacheKey, Any] = {}
        self._key_locks: dict[CacheKey, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, op: str, kernel: str, style: str, consts: dict, target: dict | str):
        key = CacheKey(op, kernel, style, tuple(sorted(consts.items())), target_arch(target))
        compiled = self._kernels.get(key)
        if compiled is not None:
            return compiled
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._kernels:
                self._kernels[key] = launcher(compile_kernel(op, kernel, style, consts, target))
        return self._kernels[key]

    def keys(self) -> list[CacheKey]:
        return list(self._kernels)

    def clear(self) -> None:
        self._kernels.clear()


KERNELS = KernelCache()

