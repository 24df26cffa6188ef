"""vector_add in TileLang: out[i] = a[i] + b[i], added in f32 and rounded once.

`vector_add_eager` is the kernel itself (tensors typed inside its body); `vector_add_lazy` is a
factory returning the same kernel as a `T.prim_func`. The tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import elementwise_kernel


@T.macro
def add_element(i, a, b, out):
    out[i] = T.Cast(out.dtype, T.Cast("float32", a[i]) + T.Cast("float32", b[i]))


@tilelang.jit
def vector_add_eager(a, b, out, dtype="float32"):
    n = T.dynamic("n")
    a: T.Tensor[[n], dtype]
    b: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, add_element, a, b, out)


@tilelang.jit
def vector_add_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def vector_add_lazy(a: T.Tensor((n,), dtype), b: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):
        elementwise_kernel(n, add_element, a, b, out)

    return vector_add_lazy


register("vector_add", "flat", eager=vector_add_eager, lazy=vector_add_lazy)
