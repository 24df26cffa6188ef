"""relu in TileLang: x if x > 0 or NaN, else +0.0 (slope 0) or x * negative_slope, in f32.

`relu` is the math; the kernels are the shared elementwise launches of
python/operator_runtime/tilelang/tiles.py around it: `flat` over dense
operands, `broadcast` from an input repeated along some dims.
`negative_slope` is a runtime scalar argument, so one kernel serves every
slope. `<kernel>_eager` is the kernel itself (tensors typed inside its body);
`<kernel>_lazy` is a factory returning the same kernel as a `T.prim_func`. The
tilelang backend (python/operator_runtime/tilelang/) compiles the one the
style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import broadcast_kernel, broadcast_shape, elementwise_kernel


@T.macro
def relu(input, negative_slope):
    x = T.Cast("float32", input)
    below = T.if_then_else(negative_slope == 0, T.float32(0), x * negative_slope)
    # isnan is spelled out: the simplifier folds `x != x` to false.
    return T.if_then_else(x > 0 or T.isnan(x), x, below)


@tilelang.jit
def flat_eager(input, out, negative_slope: T.float32, dtype="float32"):
    n = T.dynamic("n")
    input: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, relu, out, (input,), (negative_slope,))


@tilelang.jit
def flat_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def flat_lazy(input: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype), negative_slope: T.float32):
        elementwise_kernel(n, relu, out, (input,), (negative_slope,))

    return flat_lazy


@tilelang.jit
def broadcast_eager(input, out, negative_slope: T.float32, dtype="float32", vec=4, constant_inner=(False,)):
    input: T.Tensor[broadcast_shape("input", vec, constant_inner[0]), dtype]
    out: T.Tensor[broadcast_shape("out", vec, False), dtype]
    broadcast_kernel(relu, out, (input,), (negative_slope,), vec)


@tilelang.jit
def broadcast_lazy(dtype="float32", vec=4, constant_inner=(False,)):
    @T.prim_func
    def broadcast_lazy(
        input: T.Tensor(broadcast_shape("input", vec, constant_inner[0]), dtype),
        out: T.Tensor(broadcast_shape("out", vec, False), dtype),
        negative_slope: T.float32,
    ):
        broadcast_kernel(relu, out, (input,), (negative_slope,), vec)

    return broadcast_lazy


register("relu", "flat", eager=flat_eager, lazy=flat_lazy)
register("relu", "broadcast", eager=broadcast_eager, lazy=broadcast_lazy)
