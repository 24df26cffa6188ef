"""relu_backward in TileLang: dy where x > 0; else, with slope 0, +0.0 (dy where x is
NaN), and with other slopes dy * negative_slope; in f32, as the functor does.

`negative_slope` is a runtime scalar argument, so one kernel serves every slope.
`relu_backward_eager` is the kernel itself (tensors typed inside its body);
`relu_backward_lazy` is a factory returning the same kernel as a `T.prim_func`. The
tilelang backend (python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import elementwise_kernel


@T.macro
def relu_backward_element(i, dy, x, out, negative_slope):
    gradient = T.Cast("float32", dy[i])
    value = T.Cast("float32", x[i])
    below = T.if_then_else(negative_slope == 0, T.float32(0), gradient * negative_slope)
    # Slope 0 passes dy where x is NaN (threshold_backward), other slopes scale it
    # (leaky_relu_backward). isnan is spelled out: the simplifier folds `x != x` to false.
    passes = value > 0 or (negative_slope == 0 and T.isnan(value))
    out[i] = T.Cast(out.dtype, T.if_then_else(passes, gradient, below))


@tilelang.jit
def relu_backward_eager(dy, x, out, negative_slope: T.float32, dtype="float32"):
    n = T.dynamic("n")
    dy: T.Tensor[[n], dtype]
    x: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, relu_backward_element, dy, x, out, negative_slope)


@tilelang.jit
def relu_backward_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def relu_backward_lazy(dy: T.Tensor((n,), dtype), x: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype), negative_slope: T.float32):
        elementwise_kernel(n, relu_backward_element, dy, x, out, negative_slope)

    return relu_backward_lazy


register("relu_backward", "flat", eager=relu_backward_eager, lazy=relu_backward_lazy)
