"""relu_backward in TileLang: relu_backward_element computes one output element; the tilelang
backend (python/operator_runtime/tilelang/) compiles `relu_backward_eager` (the kernel
itself) or `relu_backward_lazy` (a factory returning it as a `T.prim_func`), whichever
the style option picks (docs/tilelang.md).
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.tiles import elementwise_kernel


@T.macro
def relu_backward_element(i, dy, x, out, negative_slope):
    # ====== Write relu_backward here: out[i] from one element of each input. ======
    # Compute in f32 and round once, e.g. `out[i] = T.Cast(out.dtype, T.Cast("float32", dy[i]))`
    # (ops/relu/tilelang/relu.py has one with a parameter). Then delete the raise.
    raise NotImplementedError("relu_backward: not implemented: write its TileLang element in ops/relu_backward/tilelang/relu_backward.py")


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
