"""relu_backward in TileLang: dy where x > 0; else, with slope 0, +0.0 (dy where x is
NaN), and with other slopes dy * negative_slope; in f32, as the functor does.

`relu_backward` is the math; the kernels are the shared elementwise launches of
python/operator_runtime/tilelang/tiles.py around it: `flat` over dense
operands, `broadcast` over operands repeated along some dims.
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
def relu_backward(dy, x, negative_slope):
    gradient = T.Cast("float32", dy)
    value = T.Cast("float32", x)
    below = T.if_then_else(negative_slope == 0, T.float32(0), gradient * negative_slope)
    # Slope 0 passes dy where x is NaN (threshold_backward), other slopes scale it
    # (leaky_relu_backward). isnan is spelled out: the simplifier folds `x != x` to false.
    passes = value > 0 or (negative_slope == 0 and T.isnan(value))
    return T.if_then_else(passes, gradient, below)


@tilelang.jit
def flat_eager(dy, x, out, negative_slope: T.float32, dtype="float32"):
    n = T.dynamic("n")
    dy: T.Tensor[[n], dtype]
    x: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, relu_backward, out, (dy, x), (negative_slope,))


@tilelang.jit
def flat_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def flat_lazy(
        dy: T.Tensor((n,), dtype), x: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype), negative_slope: T.float32
    ):
        elementwise_kernel(n, relu_backward, out, (dy, x), (negative_slope,))

    return flat_lazy


@tilelang.jit
def broadcast_eager(dy, x, out, negative_slope: T.float32, dtype="float32", vec=4, constant_inner=(False, False)):
    dy: T.Tensor[broadcast_shape("dy", vec, constant_inner[0]), dtype]
    x: T.Tensor[broadcast_shape("x", vec, constant_inner[1]), dtype]
    out: T.Tensor[broadcast_shape("out", vec, False), dtype]
    broadcast_kernel(relu_backward, out, (dy, x), (negative_slope,), vec)


@tilelang.jit
def broadcast_lazy(dtype="float32", vec=4, constant_inner=(False, False)):
    @T.prim_func
    def broadcast_lazy(
        dy: T.Tensor(broadcast_shape("dy", vec, constant_inner[0]), dtype),
        x: T.Tensor(broadcast_shape("x", vec, constant_inner[1]), dtype),
        out: T.Tensor(broadcast_shape("out", vec, False), dtype),
        negative_slope: T.float32,
    ):
        broadcast_kernel(relu_backward, out, (dy, x), (negative_slope,), vec)

    return broadcast_lazy


register("relu_backward", "flat", eager=flat_eager, lazy=flat_lazy)
register("relu_backward", "broadcast", eager=broadcast_eager, lazy=broadcast_lazy)
