"""The shared operator tests, parametrised by plugin.py from ops/<op>/cases.py.

Run through op_test_main.py (``--op=<op> --backend=<backend>``). Besides the
case tables (test_correctness, test_api_error) every operator gets the same
lifecycle tests: descriptors own copies of their views, prepared runs repeat
and rebind, the workspace contract, concurrent execution, and on GPU backends
CUDA-graph capture, two streams, and a tensor of more than 2^31 elements.
Tests marked native_only exercise C descriptors directly and are deselected
for Python backends (plugin.py).
"""

from __future__ import annotations

import gc
import threading
from dataclasses import replace

import pytest
import torch

import operator_runtime as ort
from operator_runtime import _C
from operator_runtime._internal.tensors import view as tensor_view
from operator_runtime.backends import NATIVE_BACKEND_CODES
from operator_runtime.ops import Kind
from operator_runtime_testing.cases import (
    CONTIGUOUS,
    CorrectnessCase,
    ErrorContext,
    OpSpec,
    Padded,
    Tolerance,
    Values,
    spec,
)
from operator_runtime_testing.tensors import (
    gaps_untouched,
    generator_for,
    make_input,
    placed,
)


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance, what=""):
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(
        actual.detach().double(),
        expected.detach().to(actual.device).double(),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
        equal_nan=True,
        msg=lambda message: f"{what}\n{message}",
    )
    if tolerance.signed_zeros:
        expected = expected.detach().to(actual.device)
        zeros = (actual == 0) & (expected == 0)
        flipped = zeros & (actual.signbit() != expected.signbit())
        assert not flipped.any(), f"{what}: {int(flipped.sum())} zeros have the other sign than the reference's"


def op_params(op: OpSpec, params) -> dict:
    """params without the Python-only ones (keepdim) that the out variant does not take."""
    return {name: value for name, value in params.items() if name in op.info.param_names}


def build_inputs(op: OpSpec, case: CorrectnessCase, device) -> list[torch.Tensor]:
    generator = generator_for(case.name)
    return [make_input(spec, case.dtype, device, case.values, generator) for spec in case.inputs]


def expected_output(op: OpSpec, case: CorrectnessCase, inputs) -> torch.Tensor:
    return op.reference(*[tensor.clone() for tensor in inputs], **case.params)


def sample_case(op: OpSpec, name: str, shape=(5, 33), layout=CONTIGUOUS, dtype=torch.float32):
    """A small ordinary problem of op, for the lifecycle tests."""
    return CorrectnessCase(
        name, tuple(spec(shape, layout) for _ in op.info.input_names), dtype, {}
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def test_correctness(correctness_case: CorrectnessCase, op_spec: OpSpec, backend, device):
    case, op = correctness_case, op_spec
    inputs = build_inputs(op, case, device)
    originals = [tensor.clone() for tensor in inputs]
    expected = expected_output(op, case, inputs)
    if case.out_shape is not None:
        expected = expected.expand(case.out_shape)
    tolerance = op.tolerance(case)
    if case.in_place is not None:
        out = inputs[case.in_place]
    else:
        out = placed(expected.shape, case.out, case.dtype, device)

    result = getattr(ort, op.name + "_")(out, *inputs, **op_params(op, case.params), backend=backend)

    synchronize(device)
    assert result is out
    assert_matches(out, expected, tolerance, f"{op.name}_ into out")
    for index, (tensor, original) in enumerate(zip(inputs, originals)):
        if index != case.in_place:
            torch.testing.assert_close(tensor, original, atol=0, rtol=0, equal_nan=True)
    if case.in_place is None:
        assert gaps_untouched(out), f"{op.name} wrote outside out's view"
    if case.in_place is None and case.out == CONTIGUOUS and case.out_shape is None:
        fresh = getattr(ort, op.name)(*inputs, **case.params, backend=backend)
        synchronize(device)
        assert fresh.dtype == case.dtype and fresh.is_contiguous()
        assert_matches(fresh, expected, tolerance, f"out-of-place {op.name}")


def test_api_error(api_error_case, backend, device):
    case = api_error_case
    with pytest.raises(case.error) as raised:
        case.call(ErrorContext(backend, device))
    error = raised.value
    assert isinstance(error, ort.OperatorRuntimeError)
    assert error.status == case.status, f"status {error.status!r}, message {error.message!r}"
    assert case.message in error.message, f"{case.message!r} not in {error.message!r}"


def _view_lists(tensor: torch.Tensor) -> list:
    """A view whose shape and strides are mutable lists, to mutate after create."""
    data, dtype, shape, strides = tensor_view("test", "tensor", tensor)
    return [data, dtype, list(shape), list(strides)]


def param_values(op: OpSpec, params) -> list[float]:
    return [float(params.get(name, op.info.default(name))) for name in op.info.param_names]


def make_descriptor(op: OpSpec, backend: str, out_view, input_views, params=None):
    """A _C.Descriptor made directly, bypassing the Python API."""
    return _C.Descriptor(
        op.name, NATIVE_BACKEND_CODES[backend], out_view, input_views, param_values(op, params or {})
    )


def _stream_handle(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def new_workspace(descriptor, device) -> torch.Tensor:
    return torch.empty(max(descriptor.workspace_size, 1), dtype=torch.uint8, device=device)


def execute(descriptor, out, inputs, device, workspace_size=None, stream=None, workspace=None):
    """descriptor.execute on the current stream (or stream), with workspace or a
    new one, announcing workspace_size bytes (default: what it needs)."""
    size = descriptor.workspace_size if workspace_size is None else workspace_size
    workspace = new_workspace(descriptor, device) if workspace is None else workspace
    descriptor.execute(
        out.data_ptr(),
        [tensor.data_ptr() for tensor in inputs],
        _stream_handle(device) if stream is None else stream,
        workspace.data_ptr() if size else 0,
        size,
    )


@pytest.mark.native_only
def test_descriptor_keeps_its_own_copy_of_the_views(op_spec: OpSpec, backend, device):
    op = op_spec
    case = sample_case(op, "own_copy_of_views", layout=Padded(3))
    inputs = build_inputs(op, case, device)
    expected = expected_output(op, case, inputs)
    out = torch.empty(expected.shape, dtype=case.dtype, device=device)
    out_view = _view_lists(out)
    input_views = [_view_lists(tensor) for tensor in inputs]
    descriptor = make_descriptor(op, backend, out_view, input_views)
    try:
        # Everything the caller passed is now rewritten or gone.
        for view in [out_view, *input_views]:
            view[2][:] = [1] * len(view[2])
            view[3][:] = [0] * len(view[3])
        del out_view, input_views
        gc.collect()
        execute(descriptor, out, inputs, device)
        synchronize(device)
    finally:
        descriptor.destroy()
    assert_matches(out, expected, op.tolerance(case), "after the views were mutated")


def test_prepared_refuses_tensors_whose_layout_changed(op_spec: OpSpec, backend, device):
    op = op_spec
    case = sample_case(op, "tensor_metadata_changes", layout=Padded(2))
    inputs = build_inputs(op, case, device)
    expected = expected_output(op, case, inputs)
    out = torch.empty(expected.shape, dtype=case.dtype, device=device)
    with getattr(ort, "prepare_" + op.name)(out, *inputs, backend=backend) as prepared:
        for index, tensor in enumerate([out, *inputs]):
            shape, strides = tuple(tensor.shape), tensor.stride()
            tensor.resize_(1)  # the bound tensor no longer has the descriptor's layout
            with pytest.raises(ort.InvalidArgumentError, match="prepared run: .* now has shape"):
                prepared.run()
            tensor.set_(tensor.untyped_storage(), tensor.storage_offset(), shape, strides)
        prepared.run()
        synchronize(device)
    assert_matches(out, expected, op.tolerance(case), "after the layouts were restored")


def test_prepared_runs_repeatedly_and_rebinds(op_spec: OpSpec, backend, device):
    op = op_spec
    first = sample_case(op, "prepared_first", layout=Padded(5))
    second = replace(first, name="prepared_second")
    inputs = build_inputs(op, first, device)
    expected = expected_output(op, first, inputs)
    out = torch.empty(expected.shape, dtype=first.dtype, device=device)
    tolerance = op.tolerance(first)
    with getattr(ort, "prepare_" + op.name)(out, *inputs, backend=backend) as prepared:
        for _ in range(3):
            assert prepared.run() is out
            synchronize(device)
            assert_matches(out, expected, tolerance, "repeated run")

        new_inputs = build_inputs(op, second, device)
        new_expected = expected_output(op, second, new_inputs)
        assert not torch.equal(new_expected, expected)
        prepared.run(*new_inputs)
        synchronize(device)
        assert_matches(out, new_expected, tolerance, "run(*new_inputs)")

        other_out = torch.empty_like(out)
        assert prepared.run(out=other_out) is other_out
        synchronize(device)
        assert_matches(other_out, new_expected, tolerance, "run(out=...)")

        # Same pointers, new values: the descriptor reads the data at run time.
        for tensor in new_inputs:
            tensor.mul_(0.5)
        prepared.run()
        synchronize(device)
        assert_matches(other_out, expected_output(op, second, new_inputs), tolerance, "new values")
    assert "destroyed" in repr(prepared)


def _descriptor_for(op: OpSpec, case: CorrectnessCase, backend, device):
    """A descriptor for case's shapes and layouts (values left unset)."""
    inputs = [placed(s.shape, s.layout, case.dtype, device) for s in case.inputs]
    params = {**{n: op.info.default(n) for n in op.info.param_names}, **op_params(op, case.params)}
    shape = ort.ops.output_shape(
        op.info, [s.shape for s in case.inputs], params, bool(case.params.get("keepdim", False))
    )
    out = placed(shape, CONTIGUOUS, case.dtype, device)
    descriptor = make_descriptor(
        op,
        backend,
        tensor_view(op.name, "out", out),
        [tensor_view(op.name, "input", tensor) for tensor in inputs],
        params,
    )
    return descriptor, out, inputs


@pytest.mark.native_only
def test_workspace_contract(op_spec: OpSpec, op_cases, backend, device):
    """Too small a workspace gives INSUFFICIENT_WORKSPACE wherever a descriptor
    needs one; a descriptor that needs none runs without any."""
    op = op_spec
    candidates = [
        case
        for case in op_cases.correctness_cases()
        if case.in_place is None
        and case.out == CONTIGUOUS
        and case.out_shape is None
        and case.dtype == torch.float32
    ]
    for case in candidates:
        descriptor, out, inputs = _descriptor_for(op, case, backend, device)
        try:
            if descriptor.workspace_size == 0:
                continue
            with pytest.raises(_C.Error) as raised:
                execute(descriptor, out, inputs, device, descriptor.workspace_size - 1)
            status, message = raised.value.args
            assert status == _C.OPRT_ERR_INSUFFICIENT_WORKSPACE, message
            assert "workspace" in message
            return
        finally:
            descriptor.destroy()
    descriptor, out, inputs = _descriptor_for(op, candidates[0], backend, device)
    try:
        execute(descriptor, out, inputs, device, workspace_size=0)
        synchronize(device)
    finally:
        descriptor.destroy()


@pytest.mark.native_only
def test_concurrent_execution_of_one_descriptor(op_spec: OpSpec, backend, device):
    """Threads (each with its own stream and workspace on GPUs) execute one
    descriptor at once; execute releases the GIL, so they really overlap."""
    op = op_spec
    cases = [sample_case(op, f"concurrent_{i}", shape=(64, 257)) for i in range(2)]
    inputs = [build_inputs(op, case, device) for case in cases]
    expected = [expected_output(op, case, tensors) for case, tensors in zip(cases, inputs)]
    outs = [torch.empty(e.shape, dtype=e.dtype, device=device) for e in expected]
    descriptor = make_descriptor(
        op, backend, tensor_view(op.name, "out", outs[0]),
        [tensor_view(op.name, "input", tensor) for tensor in inputs[0]],
    )
    errors = []

    def work(index: int) -> None:
        try:
            stream = torch.cuda.Stream(device) if device.type == "cuda" else None
            handle = stream.cuda_stream if stream is not None else 0
            workspace = new_workspace(descriptor, device)
            for _ in range(50):
                execute(descriptor, outs[index], inputs[index], device, stream=handle,
                        workspace=workspace)
            if stream is not None:
                stream.synchronize()
        except Exception as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    descriptor.destroy()
    assert not errors, errors
    for index, (out, want) in enumerate(zip(outs, expected)):
        assert_matches(out, want, op.tolerance(cases[index]), f"thread {index}")


@pytest.mark.gpu_only
def test_two_streams_share_a_prepared_descriptor(op_spec: OpSpec, backend, device):
    op = op_spec
    cases = [sample_case(op, f"two_streams_{i}", shape=(256, 1025)) for i in range(2)]
    inputs = [build_inputs(op, case, device) for case in cases]
    expected = [expected_output(op, case, tensors) for case, tensors in zip(cases, inputs)]
    outs = [torch.empty(e.shape, dtype=e.dtype, device=device) for e in expected]
    streams = [torch.cuda.Stream(device) for _ in cases]
    torch.cuda.synchronize(device)
    with getattr(ort, "prepare_" + op.name)(outs[0], *inputs[0], backend=backend) as prepared:
        for _ in range(20):
            for stream, tensors, out in zip(streams, inputs, outs):
                with torch.cuda.stream(stream):
                    prepared.run(*tensors, out=out)
        torch.cuda.synchronize(device)
    for index, (out, want) in enumerate(zip(outs, expected)):
        assert_matches(out, want, op.tolerance(cases[index]), f"stream {index}")


@pytest.mark.gpu_only
def test_cuda_graph_capture_and_replay(op_spec: OpSpec, backend, device):
    op = op_spec
    case = sample_case(op, "graph", shape=(128, 1000), layout=Padded(24))
    inputs = build_inputs(op, case, device)
    out = torch.empty(expected_output(op, case, inputs).shape, dtype=case.dtype, device=device)
    with getattr(ort, "prepare_" + op.name)(out, *inputs, backend=backend) as prepared:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            prepared.run()  # warm-up outside capture, as torch recommends
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            prepared.run()
        for round_ in range(3):
            replacements = build_inputs(op, replace(case, name=f"graph_{round_}"), device)
            for tensor, replacement in zip(inputs, replacements):
                tensor.copy_(replacement)
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize(device)
            assert_matches(out, expected_output(op, case, inputs), op.tolerance(case), f"replay {round_}")


def _large_case(op: OpSpec) -> CorrectnessCase:
    """More than 2^31 elements, so any 32-bit index or offset overflows."""
    if op.info.kind == Kind.ELEMENTWISE:
        shape, dtype = (2**31 + 1025,), torch.float16
    else:
        # Two rows: the second starts below 2^31 and ends above it.
        shape, dtype = (2, 2**30 + 513), torch.bfloat16
    return CorrectnessCase(
        "more_than_2_31_elements",
        tuple(spec(shape) for _ in op.info.input_names),
        dtype,
        {},
        values=Values("uniform"),
    )


@pytest.mark.gpu_only
def test_more_than_2_31_elements(op_spec: OpSpec, backend, device):
    op = op_spec
    case = _large_case(op)
    generator = torch.Generator(device).manual_seed(31)
    shape = case.inputs[0].shape
    inputs = [
        torch.empty(shape, dtype=case.dtype, device=device).uniform_(-1, 1, generator=generator)
        for _ in case.inputs
    ]
    out = getattr(ort, op.name)(*inputs, backend=backend)
    synchronize(device)
    tolerance = op.tolerance(case)
    if op.info.kind == Kind.ELEMENTWISE:
        chunk = 2**28
        for start in range(0, shape[0], chunk):
            window = slice(start, start + chunk)
            want = op.reference(*[tensor[window] for tensor in inputs])
            assert_matches(out[window], want, tolerance, f"elements from {start}")
    else:
        for row in range(shape[0]):
            want = op.reference(*[tensor[row : row + 1] for tensor in inputs])
            assert_matches(out[row : row + 1], want, tolerance, f"row {row}")
    del inputs, out
    torch.cuda.empty_cache()

