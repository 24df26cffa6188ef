"""Gradients of the functional ops ``oprt::<op>``, registered with
``torch.library.register_autograd``.

Each backward runs on oprt's own ops (through ``torch.ops.oprt``, on the
backend the forward call named), so torch.compile traces it like the forward:

- copy: the gradient passes through (the output is the input's values);
- vector_add: each input's gradient is the output's, summed with oprt's
  reduce_sum over the dimensions the input was broadcast along;
- relu: relu_backward(grad, input, negative_slope);
- reduce_sum: the output's gradient expanded back over the reduced axis (a view);
- softmax: softmax_backward(grad, output, dim), from the saved output.

The backward operators themselves have no gradient (no double backward): a
call that needs one raises AutogradError. So do the out= forms (``op_out``,
``ort.<op>_``), as torch's own out= functions do.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from operator_runtime import _C
from operator_runtime.operator_table import normalize_axis

_OPS = torch.ops.oprt


def sum_to_shape(grad: torch.Tensor, shape: Sequence[int], backend: str | None) -> torch.Tensor:
    """grad summed over the dimensions along which a tensor of `shape` was
    broadcast to grad's shape (numpy rules), with oprt's reduce_sum."""
    shape = tuple(shape)
    while grad.dim() > len(shape):
        grad = _OPS.reduce_sum(grad, 0, False, backend)
    for dim, extent in enumerate(shape):
        if extent == 1 and grad.shape[dim] != 1:
            grad = _OPS.reduce_sum(grad, dim, True, backend)
    return grad


def _copy_setup(ctx, inputs: tuple, output: torch.Tensor) -> None:
    pass


def _copy_backward(ctx, grad: torch.Tensor) -> tuple:
    return grad, None


def _vector_add_setup(ctx, inputs: tuple, output: torch.Tensor) -> None:
    a, b, backend = inputs
    ctx.shapes, ctx.backend = (a.shape, b.shape), backend


def _vector_add_backward(ctx, grad: torch.Tensor) -> tuple:
    grads = [
        sum_to_shape(grad, shape, ctx.backend) if needed else None
        for shape, needed in zip(ctx.shapes, ctx.needs_input_grad)
    ]
    return (*grads, None)


def _relu_setup(ctx, inputs: tuple, output: torch.Tensor) -> None:
    x, negative_slope, backend = inputs
    ctx.save_for_backward(x)
    ctx.negative_slope, ctx.backend = negative_slope, backend


def _relu_backward(ctx, grad: torch.Tensor) -> tuple:
    (x,) = ctx.saved_tensors
    return _OPS.relu_backward(grad, x, ctx.negative_slope, ctx.backend), None, None


def _reduce_sum_setup(ctx, inputs: tuple, output: torch.Tensor) -> None:
    x, dim, keepdim, _backend = inputs
    ctx.shape, ctx.keepdim = x.shape, keepdim
    ctx.dim = normalize_axis("reduce_sum", dim, x.dim())


def _reduce_sum_backward(ctx, grad: torch.Tensor) -> tuple:
    if not ctx.keepdim:
        grad = grad.unsqueeze(ctx.dim)
    return grad.expand(ctx.shape), None, None, None


def _softmax_setup(ctx, inputs: tuple, output: torch.Tensor) -> None:
    _x, dim, backend = inputs
    ctx.save_for_backward(output)
    ctx.dim, ctx.backend = dim, backend


def _softmax_backward(ctx, grad: torch.Tensor) -> tuple:
    (y,) = ctx.saved_tensors
    return _OPS.softmax_backward(grad, y, ctx.dim, ctx.backend), None, None


# op name -> (setup_context, backward), for register_autograd.
GRADIENTS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "copy": (_copy_setup, _copy_backward),
    "vector_add": (_vector_add_setup, _vector_add_backward),
    "relu": (_relu_setup, _relu_backward),
    "reduce_sum": (_reduce_sum_setup, _reduce_sum_backward),
    "softmax": (_softmax_setup, _softmax_backward),
}


def register(namespace: str, library: torch.library.Library, ops: Sequence[str],
             refuse_tangent: str) -> None:
    """The formulas for the Autograd alias key, then _C's C++ autograd kernel of every
    op for CPU and CUDA tensors: it refuses forward-mode tangents (calling the op
    refuse_tangent, which raises), sends the calls that need a gradient to these
    formulas and every other straight below autograd."""
    for name, (setup_context, backward) in GRADIENTS.items():
        torch.library.register_autograd(
            f"{namespace}::{name}", backward, setup_context=setup_context, lib=library
        )
    _C.register_autograd_kernels(namespace, [(op, op in GRADIENTS) for op in ops], refuse_tangent)
