"""backend="tilelang": oprt's operators as TileLang kernels, compiled on first use.

    import operator_runtime as ort
    ort.softmax(x, backend="tilelang")             # x on a CUDA device
    ort.tilelang.set_style("eager")                # or "lazy" (default); $OPRT_TILELANG_STYLE
    ort.tilelang.set_cache_dir("/tmp/tl-cache")    # or $OPRT_TILELANG_CACHE_DIR

Each operator's kernels live in ops/<op>/tilelang/<op>.py, which registers
them by name (registry.py), each in two styles: an eager kernel (`@tilelang.jit`
whose body is the kernel) and a lazy factory (`@tilelang.jit` returning a
`T.prim_func`); the style option picks which one a prepare compiles. TileLang itself is imported only when the backend is first
asked whether it is available on a machine with a CUDA device, or first used;
`import operator_runtime` never imports it. See docs/tilelang.md.
"""

from operator_runtime.backends import _install_python_backend
from operator_runtime.tilelang.backend import TileLangBackend, warm
from operator_runtime.tilelang.compiler import (
    CACHE_DIR_ENV,
    KERNELS,
    STYLE_ENV,
    STYLES,
    cache_dir,
    get_style,
    set_cache_dir,
    set_style,
)

# Not probed: asking whether TileLang can run imports it (at first use instead).
_install_python_backend("tilelang", TileLangBackend(), probe=False)

__all__ = [
    "CACHE_DIR_ENV",
    "KERNELS",
    "STYLE_ENV",
    "STYLES",
    "TileLangBackend",
    "cache_dir",
    "get_style",
    "set_cache_dir",
    "set_style",
    "warm",
]
