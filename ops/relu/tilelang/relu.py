"""relu in TileLang: x if x > 0 or NaN, else +0.0 (slope 0) or x * negative_slope, in f32.

`negative_slope` is a runtime scalar argument, so one kernel serves every
slope. `relu_eager` is the kernel itself (tensors typed inside its body); `relu_lazy` is
a factory returning the same kernel as a `T.prim_func`. The tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import elementwise_kernel


@T.macro
def relu_element(i, input, out, negative_slope):
    x = T.Cast("float32", input[i])
    below = T.if_then_else(negative_slope == 0, T.float32(0), x * negative_slope)
    # isnan is spelled out: the simplifier folds `x != x` to false.
    out[i] = T.Cast(out.dtype, T.if_then_else(x > 0 or T.isnan(x), x, below))


@tilelang.jit
def relu_eager(input, out, negative_slope: T.float32, dtype="float32"):
    n = T.dynamic("n")
    input: T.Tensor[[n], dtype]
    out: T.Tensor[[n], dtype]
    elementwise_kernel(n, relu_element, input, out, negative_slope)


@tilelang.jit
def relu_lazy(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def relu_lazy(input: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype), negative_slope: T.float32):
        elementwise_kernel(n, relu_element, input, out, negative_slope)

    return relu_lazy


register("relu", "flat", eager=relu_eager, lazy=relu_lazy)
