"""vector_add in TileLang: out = a + b, added in f32 and rounded once.

`add` is the math; the kernels are the shared elementwise launches of
python/operator_runtime/tilelang/tiles.py around it: `flat` over dense
operands, `broadcast` over operands repeated along some dims. `<kernel>_eager`
is the kernel itself (tensors typed inside its body); `<kernel>_lazy` is a
factory returning the same kernel as a `T.prim_func`. The tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import broadcast_kernel, broadcast_shape, elementwise_kernel


@T.macro
def add(a, b):
    return T.Cast("float32", a) + T.Cast("float32", b)


@tilelang.jit
def flat_eager(a, b, out, dtype="float32"):
    n = T.dynamic("n")
    a: T.Tensor[[n], dtype]
    b: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, add, out, (a, b), ())


@tilelang.jit
def flat_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def flat_lazy(a: T.Tensor((n,), dtype), b: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):
        elementwise_kernel(n, add, out, (a, b), ())

    return flat_lazy


@tilelang.jit
def broadcast_eager(a, b, out, dtype="float32", vec=4, constant_inner=(False, False)):
    a: T.Tensor[broadcast_shape("a", vec, constant_inner[0]), dtype]
    b: T.Tensor[broadcast_shape("b", vec, constant_inner[1]), dtype]
    out: T.Tensor[broadcast_shape("out", vec, False), dtype]
    broadcast_kernel(add, out, (a, b), (), vec)


@tilelang.jit
def broadcast_lazy(dtype="float32", vec=4, constant_inner=(False, False)):
    @T.prim_func
    def broadcast_lazy(
        a: T.Tensor(broadcast_shape("a", vec, constant_inner[0]), dtype),
        b: T.Tensor(broadcast_shape("b", vec, constant_inner[1]), dtype),
        out: T.Tensor(broadcast_shape("out", vec, False), dtype),
    ):
        broadcast_kernel(add, out, (a, b), (), vec)

    return broadcast_lazy


register("vector_add", "flat", eager=flat_eager, lazy=flat_lazy)
register("vector_add", "broadcast", eager=broadcast_eager, lazy=broadcast_lazy)
