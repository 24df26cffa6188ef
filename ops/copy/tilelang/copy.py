"""copy in TileLang: dst[i] = src[i], moving storage (no f32 round trip, NaN payloads kept).

`copy_eager` is the kernel itself (tensors typed inside its body); `copy_lazy` is a
factory returning the same kernel as a `T.prim_func`. The tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import elementwise_kernel


@T.macro
def copy_element(i, src, dst):
    dst[i] = src[i]


@tilelang.jit
def copy_eager(src, dst, dtype="float32"):
    n = T.dynamic("n")
    src: T.Tensor[[n], dtype]
    dst: T.Tensor[[n], dtype]
    elementwise_kernel(n, copy_element, src, dst)


@tilelang.jit
def copy_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def copy_lazy(src: T.Tensor((n,), dtype), dst: T.Tensor((n,), dtype)):
        elementwise_kernel(n, copy_element, src, dst)

    return copy_lazy


register("copy", "flat", eager=copy_eager, lazy=copy_lazy)
