"""The operators as torch.library custom ops in the namespace ``oprt``.

For every operator of the C runtime's table this module defines, from the
table and never by hand, two ops (softmax shown; an elementwise op's
parameters are floats, and reductions' functional op adds ``bool keepdim``)::

    oprt::softmax(Tensor input, int dim=-1, str? backend=None) -> Tensor
    oprt::softmax_out(Tensor(a!) out, Tensor input, int dim=-1, str? backend=None) -> ()

Each has one C++ kernel for the CPU and CUDA dispatch keys
(runtime/python/torch_kernels.cc), which runs the op through the C runtime's
descriptor cache with no Python on the way, and a fake kernel (shapes only)
for FakeTensor, meta tensors, torch.compile and torch.export. Every call the
C++ fast path does not take (a tensor that requires grad, a dtype or layout
the runtime refuses, a Python backend such as tilelang, a failing C call) goes
to the op's Python implementation, ``oprt::_python_<op>[_out]`` (below),
which runs it through ``_C.run`` or raises the library's exception.
``ort.<op>`` and ``ort.<op>_`` call these ops, so torch sees every call: its
version counter, its tracers and its compilers.

Autograd: the functional ops of copy, vector_add, relu, reduce_sum and
softmax have gradients (``autograd``, on oprt's own ops). A call that would
need a gradient oprt does not have raises AutogradError naming the operator:
an input that requires grad (with grad mode on) of an op without one (the
backward ops: no double backward) or of an out= form (which, as torch's own
out= functions, has none), and an out that requires grad. Nothing is ever
silently detached. The out-variant bumps ``out``'s version counter, so
autograd notices when a tensor it saved is overwritten.

Streams: on CUDA tensors a call is enqueued on the current stream of the
tensors' device, like any torch op; it never synchronises.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.autograd import forward_ad

from operator_runtime import _C, autograd, backends
from operator_runtime._internal import tensors
from operator_runtime.errors import AutogradError, InvalidArgumentError, UnsupportedDtypeError, from_c_error
from operator_runtime.operator_table import (
    AXIS_PARAM,
    OPERATORS,
    Kind,
    OperatorInfo,
    normalize_axis,
    output_shape,
)

NAMESPACE = "oprt"
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
_DISPATCH_KEYS = ("CPU", "CUDA")
_QUANTIZED_DISPATCH_KEYS = ("QuantizedCPU", "QuantizedCUDA")

for _dtype, _code in tensors.DTYPE_CODES.items():
    _C.register_dtype(_dtype, _code)
# _C reads torch.Tensor objects without Python calls (a prepared run's checks, _C.run)
# once a probe reads the same both ways; False: every read goes through Python.
TENSOR_OBJECT_READS = _C.register_tensor_types(torch.Tensor, torch.nn.Parameter,
                                               torch.empty(2, 3)[:, 1:])


def out_variant_name(op: str) -> str:
    return op + "_out"


def python_op_name(op: str) -> str:
    """The internal op holding op's Python implementation."""
    return "_python_" + op


def _param_schema(info: OperatorInfo) -> list[str]:
    return [
        f"int {name}={int(info.default(name))}" if name == AXIS_PARAM
        else f"float {name}={float(info.default(name))!r}"
        for name in info.param_names
    ]


def schemas(info: OperatorInfo) -> tuple[str, str]:
    """The functional and out-variant schemas of info's op (without the namespace)."""
    inputs = [f"Tensor {name}" for name in info.input_names]
    params = _param_schema(info)
    keepdim = ["bool keepdim=False"] if info.kind == Kind.REDUCTION else []
    # backend is positional: a keyword argument costs torch's argument parser ~0.5 us a call.
    functional = ", ".join([*inputs, *params, *keepdim, "str? backend=None"])
    out = ", ".join(["Tensor(a!) out", *inputs, *params, "str? backend=None"])
    return f"{info.name}({functional}) -> Tensor", f"{out_variant_name(info.name)}({out}) -> ()"


def refuse_tangent(op: str, role: str) -> None:
    """Raises AutogradError for a tensor with a forward-mode AD tangent (also the
    Python kernel of oprt::_refuse_tangent, which the C++ autograd kernels call)."""
    raise AutogradError(
        f"{op}: {role} has a forward-mode AD tangent, but oprt has no forward-mode formula "
        f"for {op} (torch.func.jvp, jacfwd, forward_ad); use reverse mode (backward, "
        f"torch.autograd.grad)"
    )


def check_autograd(op: str, out: torch.Tensor | None, inputs: Sequence[torch.Tensor],
                   input_names: Sequence[str], out_form: bool) -> None:
    """AutogradError when a tensor of the call takes part in autograd, which the
    call cannot follow: reached only by calls the autograd formulas do not
    cover (out_form: an out= form or a prepared run, never differentiable), and
    for any tensor with a forward-mode AD tangent, which no form can follow."""
    if forward_ad._current_level >= 0:  # inside forward_ad.dual_level (torch.func.jvp too)
        for name, tensor in (("out", out), *zip(input_names, inputs)):
            if tensor is not None and torch._VF._unpack_dual(tensor, 0)[1] is not None:
                refuse_tangent(op, name)
    if out is not None and out.is_inference() and not torch.is_inference_mode_enabled():
        raise AutogradError(
            f"{op}: out is an inference tensor; writing into one is allowed only inside "
            f"torch.inference_mode(), as for torch's in-place operations"
        )
    if not torch.is_grad_enabled():
        return
    if out is not None and out.requires_grad:
        if out.is_leaf:
            raise AutogradError(
                f"{op}: out is a leaf tensor that requires grad; a leaf Variable that requires "
                f"grad is being used in an in-place operation"
            )
        raise AutogradError(
            f"{op}: out requires grad, but writing into out has no backward; write into a "
            f"tensor that does not require grad, or call it under torch.no_grad()"
        )
    for name, tensor in zip(input_names, inputs):
        if not tensor.requires_grad:
            continue
        if out_form and op in autograd.GRADIENTS:
            raise AutogradError(
                f"{op}: {name} requires grad, but the out= form of {op} has no backward (as "
                f"torch's out= functions); call ort.{op}(...) for gradients, or detach it"
            )
        raise AutogradError(
            f"{op}: {name} requires grad, but oprt has no backward for {op}; detach it or "
            f"call it under torch.no_grad()"
        )


def new_output(info: OperatorInfo, inputs: Sequence[torch.Tensor], params: Sequence[Any],
               keepdim: bool = False) -> torch.Tensor:
    """The contiguous output of info's op for inputs (a fake tensor for fake inputs),
    of their dtype: inputs of different dtypes are refused here, before an out of
    the first one's dtype would be blamed for the clash."""
    first = inputs[0]
    for role, tensor in zip(info.input_names[1:], inputs[1:]):
        # (An unsupported dtype is said as such, later.)
        if tensor.dtype != first.dtype and {tensor.dtype, first.dtype} <= tensors.DTYPE_CODES.keys():
            raise UnsupportedDtypeError(
                f"{info.name}: {role} has dtype {str(tensor.dtype).removeprefix('torch.')} but "
                f"{info.input_names[0]} has dtype {str(first.dtype).removeprefix('torch.')}; "
                f"the inputs must share one dtype"
            )
    if info.kind == Kind.NORMALIZATION or (
        info.kind == Kind.ELEMENTWISE and all(t.shape == first.shape for t in inputs)
    ):
        # empty_like costs a third of empty(shape, dtype=, device=) per call.
        return torch.empty_like(first, memory_format=torch.contiguous_format)
    if len(inputs) > 1:
        tensors.common_device(info.name, list(zip(info.input_names, inputs)))
    shape = output_shape(info, [t.shape for t in inputs], dict(zip(info.param_names, params)), keepdim)
    return first.new_empty(shape)


def check_axis(info: OperatorInfo, inputs: Sequence[torch.Tensor], params: Sequence[Any]) -> None:
    """Refuses a dim that is no axis of the first input here, with the dim as given:
    the C ABI takes params as doubles, which round a dim past 2^53 in its message."""
    if AXIS_PARAM in info.param_names:
        normalize_axis(info.name, params[info.param_names.index(AXIS_PARAM)], inputs[0].dim())


def execute(info: OperatorInfo, out: torch.Tensor, inputs: Sequence[torch.Tensor],
            params: Sequence[Any], backend: str | None, out_form: bool) -> None:
    """Runs info's op into out: the body of the Python implementations
    (oprt::_python_<op>[_out]), which take the calls the C++ kernels do not."""
    check_autograd(info.name, out, inputs, info.input_names, out_form)
    check_axis(info, inputs, params)
    name = backends.resolve(info.name, backend, out.device)
    code = backends.NATIVE_BACKEND_CODES.get(name)
    if code is None:
        from operator_runtime.ops import run_on_python_backend  # ops imports this module

        run_on_python_backend(info, out, inputs, params, name)
    elif out.is_cuda:
        with torch.cuda.device(out.device):
            _run(info, code, tensors.current_stream(out.get_device()), out, inputs, params)
    else:
        _run(info, code, 0, out, inputs, params)


def _run(info: OperatorInfo, code: int, stream: int, out: torch.Tensor,
         inputs: Sequence[torch.Tensor], params: Sequence[Any]) -> None:
    try:
        needed = _C.run(info.index, code, stream, 0, 0, params, out, *inputs)
        if needed:
            # Freed right after the launch: torch's caching allocator keeps it for
            # this stream until the work queued on it has passed.
            workspace = torch.empty(needed, dtype=torch.uint8, device=out.device)
            _C.run(info.index, code, stream, workspace.data_ptr(), needed, params, out, *inputs)
    except _C.Error as error:
        raise from_c_error(error) from None


def check_fake_call(info: OperatorInfo, out: torch.Tensor | None, inputs: Sequence[torch.Tensor],
                    params: Sequence[Any], backend: str | None) -> None:
    """What a fake kernel can check without data: autograd, dtypes, the inputs' shapes
    (normalizations), devices, the axis, the backend.
    Meta tensors are shape-only whatever backend runs real ones, except that a
    backend named explicitly refuses them, as it refuses any device it cannot run."""
    check_autograd(info.name, out, inputs, info.input_names, out_form=out is not None)
    named = ([("out", out)] if out is not None else []) + list(zip(info.input_names, inputs))
    for role, tensor in named:
        tensors.dtype_code(info.name, role, tensor)  # an unsupported dtype, said as a real call says it
    if info.kind == Kind.NORMALIZATION:
        first_role, first = info.input_names[0], inputs[0]
        for role, tensor in zip(info.input_names[1:], inputs[1:]):
            if tensor.shape != first.shape:
                raise InvalidArgumentError(f"{info.name}: {role} shape {list(tensor.shape)} must equal "
                                           f"{first_role} shape {list(first.shape)}")
    device = tensors.common_device(info.name, named)
    check_axis(info, inputs, params)
    if backend is not None:
        backends.check_name(backend)
        if device.type == "meta":
            backends.resolve(info.name, backend, device)


def _argument_filler(info: OperatorInfo, functional: bool):
    """Completes a kernel's positional arguments after the inputs: the dispatcher
    leaves out trailing arguments that equal their schema defaults."""
    defaults = tuple(info.default(name) for name in info.param_names)
    if functional and info.kind == Kind.REDUCTION:
        defaults += (False,)  # keepdim
    defaults += (None,)  # backend
    count = len(info.input_names) + len(defaults)

    def fill(args: tuple) -> tuple:
        missing = count - len(args)
        return args + defaults[len(defaults) - missing :] if missing else args

    return fill


def _functional_kernel(info: OperatorInfo, fake: bool = False):
    num_inputs, num_params = len(info.input_names), len(info.param_names)
    fill = _argument_filler(info, functional=True)

    def kernel(*args: Any) -> torch.Tensor:
        args = fill(args)
        inputs, params = args[:num_inputs], args[num_inputs : num_inputs + num_params]
        backend = args[-1]
        if fake:
            check_fake_call(info, None, inputs, params, backend)
        out = new_output(info, inputs, params, *args[num_inputs + num_params : -1])
        if not fake:
            execute(info, out, inputs, params, backend, out_form=False)
        return out

    return kernel


def _out_kernel(info: OperatorInfo, fake: bool = False):
    num_inputs = len(info.input_names)
    fill = _argument_filler(info, functional=False)

    def kernel(out: torch.Tensor, *args: Any) -> None:
        args = fill(args)
        inputs, params, backend = args[:num_inputs], args[num_inputs:-1], args[-1]
        if fake:
            # out's shape is checked when the real kernel runs (the C runtime's rules).
            check_fake_call(info, out, inputs, params, backend)
            return
        execute(info, out, inputs, params, backend, out_form=True)
        torch.autograd.graph.increment_version(out)

    return kernel


def _register(info: OperatorInfo) -> tuple[Any, Any]:
    out_name = out_variant_name(info.name)
    for name, schema, kernel in zip(
        (info.name, out_name), schemas(info), (_functional_kernel(info), _out_kernel(info))
    ):
        _LIBRARY.define(schema)
        _LIBRARY.define(python_op_name(name) + schema[len(name):])
        for key in _DISPATCH_KEYS:
            _LIBRARY.impl(python_op_name(name), kernel, key)
        # Quantized tensors reach the Python kernel, which names their dtype, rather
        # than the dispatcher's "could not run with arguments from QuantizedCPU".
        for key in _QUANTIZED_DISPATCH_KEYS:
            _LIBRARY.impl(name, kernel, key)
    torch.library.register_fake(
        f"{NAMESPACE}::{info.name}", _functional_kernel(info, fake=True), lib=_LIBRARY
    )
    torch.library.register_fake(f"{NAMESPACE}::{out_name}", _out_kernel(info, fake=True), lib=_LIBRARY)
    namespace = getattr(torch.ops, NAMESPACE)
    return getattr(namespace, info.name).default, getattr(namespace, out_name).default


# op name -> (functional OpOverload, out-variant OpOverload)
TORCH_OPS: dict[str, tuple[Any, Any]] = {name: _register(info) for name, info in OPERATORS.items()}
_LIBRARY.define("_refuse_tangent(str op, str role) -> ()")
_LIBRARY.impl(
    "_refuse_tangent",
    lambda op, role: refuse_tangent(op.removesuffix(out_variant_name("")), role),  # softmax_out: softmax
    "CompositeExplicitAutograd",
)
autograd.register(
    NAMESPACE, _LIBRARY, [name for op in OPERATORS for name in (op, out_variant_name(op))],
    "_refuse_tangent",
)
# A prepared descriptor's run (ops.Prepared.run), served by a C++ kernel that gets the
# at::Tensors from torch's dispatcher: 0 once run, 1 when Prepared's Python path must
# run it and say what is wrong. Eager only; never traced.
_LIBRARY.define(
    "_prepared_run(Tensor(a!) out, Tensor[] inputs, int prepared, int workspace, "
    "int workspace_size) -> int"
)
PREPARED_RUN = torch.ops.oprt._prepared_run.default
_C.register_torch_kernels(NAMESPACE, [
    (name, info.index, out_variant, python_op_name(name))
    for info in OPERATORS.values()
    for name, out_variant in ((info.name, False), (out_variant_name(info.name), True))
])
