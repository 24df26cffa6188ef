"""copy in TileLang: dst = src, moving storage (no f32 round trip, NaN payloads kept).

`same` is the math; the kernels are the shared elementwise launches of
python/operator_runtime/tilelang/tiles.py around it: `flat` over dense
operands, `broadcast` from a source repeated along some dims. `<kernel>_eager`
is the kernel itself (tensors typed inside its body); `<kernel>_lazy` is a
factory returning the same kernel as a `T.prim_func`. The tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import broadcast_kernel, broadcast_shape, elementwise_kernel


@T.macro
def same(src):
    return src


@tilelang.jit
def flat_eager(src, dst, dtype="float32"):
    n = T.dynamic("n")
    src: T.Tensor[[n], dtype]
    dst: T.Tensor[[n], dtype]
    elementwise_kernel(n, same, dst, (src,), ())


@tilelang.jit
def flat_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def flat_lazy(src: T.Tensor((n,), dtype), dst: T.Tensor((n,), dtype)):
        elementwise_kernel(n, same, dst, (src,), ())

    return flat_lazy


@tilelang.jit
def broadcast_eager(src, dst, dtype="float32", vec=4, constant_inner=(False,)):
    src: T.Tensor[broadcast_shape("src", vec, constant_inner[0]), dtype]
    dst: T.Tensor[broadcast_shape("dst", vec, False), dtype]
    broadcast_kernel(same, dst, (src,), (), vec)


@tilelang.jit
def broadcast_lazy(dtype="float32", vec=4, constant_inner=(False,)):
    @T.prim_func
    def broadcast_lazy(
        src: T.Tensor(broadcast_shape("src", vec, constant_inner[0]), dtype),
        dst: T.Tensor(broadcast_shape("dst", vec, False), dtype),
    ):
        broadcast_kernel(same, dst, (src,), (), vec)

    return broadcast_lazy


register("copy", "flat", eager=flat_eager, lazy=flat_lazy)
register("copy", "broadcast", eager=broadcast_eager, lazy=broadcast_lazy)
