"""Cross-operator tests of the Python API and the binding: the operator table,
the generated functions, status and backend strings, backend choice, errors,
the Python-backend hook and the cost of a prepared run."""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import math
import os
import pickle
import pydoc
import re
import subprocess
import sys
import threading
import time
import timeit
from pathlib import Path

import numpy as np
import pytest
import torch

import operator_runtime as ort
from operator_runtime import _C, _build_info
from operator_runtime._internal.torch_release import running_release
from operator_runtime.errors import error_for_status
from operator_runtime.ops import Kind

EXPECTED_OPERATORS = {
    # name: (kind, input names, {param: default})
    "copy": (Kind.ELEMENTWISE, ("src",), {}),
    "vector_add": (Kind.ELEMENTWISE, ("a", "b"), {}),
    "relu": (Kind.ELEMENTWISE, ("input",), {"negative_slope": 0.0}),
    "relu_backward": (Kind.ELEMENTWISE, ("dy", "x"), {"negative_slope": 0.0}),
    "reduce_sum": (Kind.REDUCTION, ("input",), {"dim": -1}),
    "softmax": (Kind.NORMALIZATION, ("input",), {"dim": -1}),
    "softmax_backward": (Kind.NORMALIZATION, ("dy", "y"), {"dim": -1}),
}


@pytest.fixture
def default_backend_restored():
    saved = ort.get_default_backend()
    yield
    ort.set_default_backend(saved)


def test_operator_table_lists_exactly_the_expected_operators():
    table = {info.name: info for info in ort.operators()}
    assert set(table) == set(EXPECTED_OPERATORS)
    for name, (kind, inputs, params) in EXPECTED_OPERATORS.items():
        info = table[name]
        assert info.kind == kind, name
        assert info.input_names == inputs, name
        assert dict(zip(info.param_names, info.param_defaults)) == params, name


@pytest.mark.parametrize("name", sorted(EXPECTED_OPERATORS))
def test_each_operator_gets_three_documented_functions(name):
    kind, inputs, params = EXPECTED_OPERATORS[name]
    functions = {
        name: [*inputs, *params] + (["keepdim"] if kind == Kind.REDUCTION else []),
        name + "_": ["out", *inputs, *params],
        "prepare_" + name: ["out", *inputs, *params],
    }
    for function_name, positional in functions.items():
        function = getattr(ort, function_name)
        assert function_name in ort.__all__
        assert function.__name__ == function_name
        assert function.__module__ == "operator_runtime"
        signature = inspect.signature(function)
        assert list(signature.parameters) == [*positional, "backend"]
        assert signature.parameters["backend"].kind == inspect.Parameter.KEYWORD_ONLY
        for param, default in params.items():
            assert signature.parameters[param].default == default
        assert name in function.__doc__ and "backend" in function.__doc__
    rendered = pydoc.render_doc(getattr(ort, name), renderer=pydoc.plaintext)
    assert f"{name}{inspect.signature(getattr(ort, name))}" in rendered
    assert "*, backend=None" in rendered


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
        ort.softmax(torch.ones(3), axis=0)


def test_abi_constants_come_from_api_h():
    """api.h is the one source of the ABI's numbers: _C exports every enum constant and
    OPRT_MAX_DIMS with api.h's value, and the Python layers take theirs from _C."""
    # The header's place in the source tree, or in the GPU-runner bundle.
    root = Path(__file__).parent.parent
    header = next(path for path in (root / "runtime/include/operator_runtime/api.h",
                                    root / "include/operator_runtime/api.h")
                  if path.exists()).read_text()
    constants = {name: int(value) for name, value in
                 re.findall(r"^\s*(OPRT_[A-Z0-9_]+)\s*=\s*(\d+)\s*,", header, re.MULTILINE)}
    constants.update((name, int(value)) for name, value in
                     re.findall(r"^#define\s+(OPRT_MAX_DIMS)\s+(\d+)", header, re.MULTILINE))
    assert len(constants) >= 16, f"api.h parsed to {sorted(constants)}"
    exported = {name: getattr(_C, name, None) for name in constants}
    assert exported == constants
    assert {status.name: int(status) for status in ort.Status} == {
        name.removeprefix("OPRT_ERR_").removeprefix("OPRT_"): value
        for name, value in constants.items() if name.startswith(("OPRT_ERR_", "OPRT_SUCCESS"))
    }
    assert {kind.name: int(kind) for kind in Kind} == {
        name.removeprefix("OPRT_KIND_"): value
        for name, value in constants.items() if name.startswith("OPRT_KIND_")
    }


def test_status_strings():
    for status in ort.Status:
        prefix = "OPRT_" if status == ort.Status.SUCCESS else "OPRT_ERR_"
        assert _C.status_string(status) == prefix + status.name
    assert _C.status_string(99) == "OPRT_ERR_UNKNOWN_STATUS"


def test_backend_strings():
    assert _C.backend_string(_C.OPRT_BACKEND_AUTO) == "auto"
    assert _C.backend_string(_C.OPRT_BACKEND_CPU) == "cpu"
    assert _C.backend_string(_C.OPRT_BACKEND_NVIDIA) == "nvidia"
    assert _C.backend_string(_C.OPRT_BACKEND_METAX) == "metax"
    # The Python API's native backend names are the C runtime's, not a second list.
    assert set(ort.backends.NATIVE_BACKEND_CODES) < set(ort.backends.BACKEND_NAMES)


def test_available_backends_include_cpu():
    available = ort.available_backends()
    assert "cpu" in available
    assert set(available) <= {"cpu", "nvidia", "metax", "tilelang"}
    assert _C.backend_available(_C.OPRT_BACKEND_CPU)


def test_errors_from_c_carry_status_and_message():
    with pytest.raises(ort.InvalidArgumentError) as raised:
        ort.softmax_(torch.empty(3), torch.empty(4), dim=0)
    error = raised.value
    assert isinstance(error, ValueError) and isinstance(error, ort.OperatorRuntimeError)
    assert error.status == ort.Status.INVALID_ARG
    assert error.message.startswith("softmax: out shape [3]")
    assert str(error) == error.message


def test_errors_keep_message_and_status_through_pickling():
    made = error_for_status(_C.OPRT_ERR_UNSUPPORTED_DTYPE, "relu: input has dtype int8")
    default = ort.InvalidArgumentError("softmax: dim 3 out of range for ndim 2")
    for error, status in ((made, ort.Status.UNSUPPORTED_DTYPE), (default, ort.Status.INVALID_ARG)):
        for copy in (error, pickle.loads(pickle.dumps(error))):
            assert type(copy) is type(error) and copy.status == status
            assert str(copy) == copy.message == error.message


def test_binding_error_carries_status_and_message():
    view = (torch.empty(3).data_ptr(), _C.OPRT_DTYPE_F32, (3,), (1,))
    with pytest.raises(_C.Error) as raised:
        _C.Descriptor("softmax", _C.OPRT_BACKEND_CPU, view, [view], [5.0])
    status, message = raised.value.args
    assert status == _C.OPRT_ERR_INVALID_ARG
    assert message == "softmax: dim 5 out of range for ndim 1"


def test_unknown_operator_in_the_binding():
    view = (torch.empty(3).data_ptr(), _C.OPRT_DTYPE_F32, (3,), (1,))
    with pytest.raises(_C.Error, match="'no_such_op' is not built into this library"):
        _C.Descriptor("no_such_op", _C.OPRT_BACKEND_CPU, view, [view], [])


def test_each_status_maps_to_its_exception():
    expected = {
        ort.Status.INVALID_ARG: (ort.InvalidArgumentError, ValueError),
        ort.Status.UNSUPPORTED_DTYPE: (ort.UnsupportedDtypeError, TypeError),
        ort.Status.RUNTIME: (ort.RuntimeFailure, ort.OperatorRuntimeError),
        ort.Status.INSUFFICIENT_WORKSPACE: (ort.InsufficientWorkspaceError, ort.OperatorRuntimeError),
        ort.Status.NOT_SUPPORTED: (ort.NotSupportedError, ort.OperatorRuntimeError),
    }
    for status, (error_type, base) in expected.items():
        error = error_for_status(status, "what went wrong")
        assert type(error) is error_type and isinstance(error, base)
        assert (error.status, error.message) == (status, "what went wrong")


def test_unsupported_dtype_names_the_dtype_and_the_supported_ones():
    with pytest.raises(ort.UnsupportedDtypeError) as raised:
        ort.relu(torch.ones(3, dtype=torch.int64))
    assert raised.value.message == (
        "relu: input has dtype int64; supported dtypes are float32, float16, bfloat16"
    )
    assert isinstance(raised.value, TypeError)


def test_set_default_backend_round_trips(default_backend_restored):
    assert ort.get_default_backend() is None
    ort.set_default_backend("cpu")
    assert ort.get_default_backend() == "cpu"
    assert torch.equal(ort.relu(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))
    ort.set_default_backend(None)
    assert ort.get_default_backend() is None


def test_set_default_backend_rejects_unknown_names(default_backend_restored):
    with pytest.raises(ort.InvalidArgumentError, match="unknown backend 'cuda'"):
        ort.set_default_backend("cuda")
    assert ort.get_default_backend() is None


def test_default_backend_applies_to_calls_without_one(default_backend_restored):
    unavailable = next(name for name in ("metax", "nvidia") if name not in ort.available_backends())
    ort.set_default_backend(unavailable)
    with pytest.raises(ort.NotSupportedError, match=f"backend '{unavailable}' is not available"):
        ort.relu(torch.ones(2))
    # An explicit backend still wins.
    assert torch.equal(ort.relu(torch.ones(2), backend="cpu"), torch.ones(2))


def test_metax_when_it_cannot_run():
    """Without metax linked in (cpu and nvidia builds) or without its device, asking for it
    is NOT_SUPPORTED, saying why, in Python and in the C runtime. Which library links it
    is //tests:gpu_libraries_test's concern."""
    if _C.backend_available(_C.OPRT_BACKEND_METAX):
        pytest.skip("this library links the metax backend and has its device")
    with pytest.raises(ort.NotSupportedError) as raised:
        ort.relu(torch.ones(2), backend="metax")
    assert raised.value.message == (
        "relu: backend 'metax' is not available: it is not built into this runtime or has no "
        f"device (available: {', '.join(ort.available_backends())})"
    )
    view = (torch.empty(2).data_ptr(), _C.OPRT_DTYPE_F32, (2,), (1,))
    with pytest.raises(_C.Error) as error:
        _C.Descriptor("relu", _C.OPRT_BACKEND_METAX, view, [view], [0.0])
    status, message = error.value.args
    assert status == _C.OPRT_ERR_NOT_SUPPORTED
    assert message in (
        "relu: backend metax is not built into this library",
        "relu: backend metax has no device",
    )


def test_metax_runs_cuda_tensors_and_is_their_default_without_nvidia(monkeypatch):
    """torch calls MetaX devices "cuda": CUDA tensors go to metax when nvidia is not
    available, and metax refuses CPU tensors."""
    available = {"cpu", "metax"}
    monkeypatch.setattr(ort.backends, "is_available", lambda name: name in available)
    assert ort.backends.resolve("relu", None, torch.device("cuda")) == "metax"
    assert ort.backends.resolve("relu", "metax", torch.device("cuda")) == "metax"
    with pytest.raises(ort.InvalidArgumentError) as raised:
        ort.backends.resolve("relu", "metax", torch.device("cpu"))
    assert raised.value.message == (
        "relu: backend 'metax' cannot run tensors on cpu; it needs cuda tensors"
    )
    available.add("nvidia")
    assert ort.backends.resolve("relu", None, torch.device("cuda")) == "nvidia"


def test_tilelang_without_a_registered_backend():
    registered = ort.backends.python_backend("tilelang")
    ort.backends.unregister_python_backend("tilelang")
    try:
        with pytest.raises(ort.NotSupportedError) as raised:
            ort.copy(torch.ones(2), backend="tilelang")
    finally:
        ort.register_python_backend("tilelang", registered)
    assert raised.value.message == "tilelang backend is not available in this build"
    assert raised.value.status == ort.Status.NOT_SUPPORTED


class _FakePythonBackend:
    """Stands in for TileLang to check the hook routes calls and runs."""

    def __init__(self):
        self.calls = []
        self.plans = []

    def available(self):
        return True

    def unavailable_reason(self):
        return None

    def runs_on(self, device):
        return device.type == "cpu"

    def prepare_key(self):
        return None

    def prepare(self, op, plan, out, inputs, params):
        backend = self
        backend.plans.append(plan)

        class Kernel:
            def run(self, out, inputs, stream):
                backend.calls.append((op, tuple(params), stream))
                out.copy_(inputs[0])

            def release(self):
                backend.calls.append(("released", op))

            def destroy(self):
                backend.calls.append(("destroyed", op))

        return Kernel()


@pytest.fixture
def fake():
    """A _FakePythonBackend registered as "tilelang" for the test; the real one after."""
    registered = ort.backends.python_backend("tilelang")
    backend = _FakePythonBackend()
    ort.register_python_backend("tilelang", backend)
    try:
        yield backend
    finally:
        ort.backends.unregister_python_backend("tilelang")
        ort.register_python_backend("tilelang", registered)


def test_python_backend_hook_routes_calls():
    fake = _FakePythonBackend()
    registered = ort.backends.python_backend("tilelang")
    ort.register_python_backend("tilelang", fake)
    try:
        assert "tilelang" in ort.available_backends()
        source = torch.arange(4.0)
        assert torch.equal(ort.copy(source, backend="tilelang"), source)
        assert fake.calls == [("copy", (), 0), ("released", "copy")]
        # The backend is handed the C runtime's plan of the call.
        assert [(plan["numel"], plan["contiguous"], plan["shape"]) for plan in fake.plans] == [(4, True, (4,))]
        with pytest.raises(ort.InvalidArgumentError, match="cannot run tensors on meta"):
            ort.copy(torch.ones(2, device="meta"), backend="tilelang")
    finally:
        ort.backends.unregister_python_backend("tilelang")
    assert "tilelang" not in ort.available_backends()
    ort.register_python_backend("tilelang", registered)


def test_tilelang_is_registered_and_says_why_it_cannot_run():
    assert isinstance(ort.backends.python_backend("tilelang"), ort.tilelang.TileLangBackend)
    if "tilelang" in ort.available_backends():
        pytest.skip("tilelang can run here")
    with pytest.raises(ort.NotSupportedError, match="copy: backend 'tilelang' is not available: .+"):
        ort.copy(torch.ones(2), backend="tilelang")


def test_import_does_not_import_tilelang(tmp_path):
    code = "import sys, operator_runtime; sys.exit('tilelang' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], env=dict(os.environ)).returncode == 0
    # As on a GPU host with TileLang installed, wherever this runs: a CUDA device
    # reported and a package named tilelang importable (asking the backend whether
    # it can run would import it).
    (tmp_path / "tilelang").mkdir()
    (tmp_path / "tilelang" / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    code = "import sys, torch; torch.cuda.is_available = lambda: True\n" + code
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_publishing_the_backend_table_asks_no_python_backend():
    # Asking TileLang whether it can run imports it, and `import operator_runtime`
    # publishes the table (installing the tilelang backend, unprobed): resolve's
    # error message for an unavailable native slot, which lists the available
    # backends, was once built there, importing TileLang on every GPU host that had it.
    asked = []

    class CountsQuestions(_FakePythonBackend):
        def available(self):
            asked.append("available")
            return True

    registered = ort.backends.python_backend("tilelang")
    try:
        ort.register_python_backend("tilelang", CountsQuestions())
        assert asked == ["available"]  # register_python_backend's own probe
        ort.set_default_backend("cpu")
        ort.set_default_backend(None)
        assert asked == ["available"]
    finally:
        ort.register_python_backend("tilelang", registered)


def test_import_refuses_another_torch_release_before_loading_the_binding():
    # _C binds to the C++ API of the torch release it was built against (_build_info).
    code = (
        "import sys, torch; torch.__version__ = '2.99.0+cu999'\n"
        "try:\n    import operator_runtime\n"
        "except ImportError as error:\n    print(error); sys.exit('operator_runtime._C' in sys.modules)\n"
        "sys.exit('imported')"
    )
    result = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True)
    release = _build_info.TORCH_RELEASE
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == (
        f"operator_runtime's _C was built against torch {release} and cannot run with torch "
        f"2.99.0+cu999: install torch=={release}.* or an oprt built against torch 2.99 (README.md, Install)"
    )


def test_the_binding_was_built_for_this_interpreter_and_torch():
    assert _build_info.PYTHON_TAG == "cp%d%d" % sys.version_info[:2]
    assert running_release(torch.__version__) == _build_info.TORCH_RELEASE
    assert running_release("2.11.0+cu130") == "2.11"
    assert running_release("2.13.0a0+git1234") == "2.13"


def _sum_in_lanes(row: np.ndarray) -> float:
    """operators.md's cpu accumulation of a contiguous row: per 4096-element block, 16
    f32 lanes (element i to lane i % 16, the tail into lane 0), the lanes added pairwise
    in double (lane k and k + 8, then k and k + 4, k and k + 2, 0 and 1)."""
    total = 0.0
    for first in range(0, len(row), 4096):
        block = row[first:first + 4096].astype(np.float32)
        whole = len(block) // 16 * 16
        lanes = np.zeros(16, np.float32)
        for group in range(0, whole, 16):
            lanes += block[group:group + 16]
        for value in block[whole:]:
            lanes[0] += value
        wide = lanes.astype(np.float64)
        for half in (8, 4, 2, 1):
            wide = wide[:half] + wide[half:2 * half]
        total += float(wide[0])
    return total


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpu_reduce_sum_adds_contiguous_rows_in_the_documented_lanes(dtype):
    # Stride-1 rows take an x86 loop where the CPU has AVX2 and F16C, which holds bf16's
    # lanes in another order across its registers; every loop must add the same values
    # in the same lanes and order. Lanes 0-7 and 8-15 grow to -+2^22 (ulp 0.5), where
    # the small values between them are lost, so another order gives another sum even
    # after rounding to f16 (a plain sum: 352.5 instead of 290.5 at length 4095).
    # The lanes are added pairwise in double, in the order the model keeps.
    rng = np.random.default_rng(7)
    for length in (1, 15, 17, 4095, 4097, 10007):
        i = np.arange(length)
        big = np.where(i % 16 < 8, 60000.0, -60000.0)
        rows = torch.from_numpy(np.where(i % 32 < 16, big, rng.uniform(0.05, 0.3, (3, length))))
        rows = rows.to(dtype)
        if dtype != torch.float16:
            # Lanes 3 and 11 reach -+2^68, which the fold's first level cancels;
            # added to another lane first, they would absorb it.
            huge = np.where(i % 16 == 3, 2.0**60, np.where(i % 16 == 11, -(2.0**60), 1.0))
            rows[2] = torch.from_numpy(huge)
        ours = ort.reduce_sum(rows, dim=1, backend="cpu")
        expected = torch.tensor([np.float32(_sum_in_lanes(row)) for row in rows.float().numpy()])
        assert torch.equal(ours, expected.to(dtype)), length


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpu_softmax_backward_rows_of_stride_1_match_the_portable_loop_to_the_bit(dtype):
    # Stride-1 rows take an x86 path (AVX2, F16C) where the CPU has them, rows along
    # another axis the portable loop; both add the same products in the same lanes and
    # round alike (ties to even), NaN, infinities and values that overflow the dtype
    # included.
    rng = np.random.default_rng(3)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.0e38, -1.0e-40, 0.0])
    for length in (1, 7, 8, 15, 16, 17, 31, 128, 4095, 4097, 10007):
        y = torch.from_numpy(rng.uniform(-4, 4, (5, length))).float()
        dy = torch.from_numpy(rng.standard_normal((5, length))).float()
        dy[1, :min(length, 6)] = special[:min(length, 6)]
        y[2, -min(length, 6):] = special[:min(length, 6)]
        # Row 3: y = 1.5 and each lane's dy cancelling (+v, then -v 16 elements on), so
        # the sum is exactly 0 and dx = 1.5 * dy, exactly between two bf16 values.
        paired = length // 32 * 32
        i = torch.arange(paired)
        dy[3] = 0.0
        dy[3, :paired] = (1 + (2 * (i % 16) + 1) / 128) * torch.where(i % 32 < 16, 1.0, -1.0)
        y[3] = 1.5
        y, dy = y.to(dtype), dy.to(dtype)
        rows = ort.softmax_backward(dy, y, -1, backend="cpu")
        columns = ort.softmax_backward(dy.t().contiguous(), y.t().contiguous(), 0, backend="cpu")
        bits = {4: torch.int32, 2: torch.int16}[rows.element_size()]
        assert torch.equal(rows.view(bits), columns.t().view(bits)), length


def test_python_backend_calls_of_a_signature_seen_before_prepare_nothing(fake):
    x, out = torch.randn(4, 6), torch.empty(4, 6)
    for _ in range(3):
        ort.copy_(out, x, backend="tilelang")
    ort.copy_(out, torch.randn(4, 6), backend="tilelang")  # other memory, same signature
    assert len(fake.plans) == 1
    assert fake.calls == [("copy", (), 0), ("released", "copy")] * 4
    # What create validates is part of the signature: a layout, an overlap.
    ort.copy_(out.t(), x.t(), backend="tilelang")
    ort.copy_(x, x, backend="tilelang")
    assert len(fake.plans) == 3
    # A call the kept descriptor refuses is made anew, which says what is wrong:
    # the same as creating a descriptor for it.
    x.untyped_storage().resize_(0)
    with pytest.raises(ort.InvalidArgumentError) as refused:
        ort.copy_(out, x, backend="tilelang")
    with pytest.raises(ort.InvalidArgumentError) as created:
        ort.prepare_copy(out, x, backend="tilelang")
    assert refused.value.message == created.value.message


def test_signature_tells_apart_what_a_python_backend_prepares_for():
    memory = torch.zeros(64)
    x = memory[:24].view(4, 6)
    same_layout_elsewhere = memory[32:56].view(4, 6)  # 128 bytes further: as aligned
    assert _C.signature(x, x) == _C.signature(same_layout_elsewhere, same_layout_elsewhere)
    others = [
        _C.signature(x, same_layout_elsewhere),  # out is not the input: disjoint
        _C.signature(x, x.t().contiguous().t()),  # strides
        _C.signature(x, x.half()),  # dtype
        _C.signature(x, memory[:12].view(2, 6)),  # shape
        _C.signature(x, memory[1:25].view(4, 6)),  # 4-byte aligned, not 16
        _C.signature(x, memory[2:26].view(4, 6)),  # 8-byte aligned
        _C.signature(x, memory[12:36].view(4, 6)),  # aligned the same, half of it is out's
    ]
    assert len({_C.signature(x, x), *others}) == 1 + len(others)
    memory.untyped_storage().resize_(0)
    with pytest.raises(_C.Error, match="reaches past its storage"):
        _C.signature(x, x)


def test_python_backend_calls_are_kept_per_alignment_and_at_most_64(fake):
    memory, out = torch.randn(32), torch.empty(24)
    ort.copy_(out, memory[:24], backend="tilelang")
    ort.copy_(out, memory[4:28], backend="tilelang")  # aligned the same
    assert len(fake.plans) == 1
    ort.copy_(out, memory[1:25], backend="tilelang")  # the kernels may depend on it
    assert len(fake.plans) == 2
    for length in range(1, 70):
        ort.copy_(torch.empty(length), torch.randn(length), backend="tilelang")
    assert len(ort.ops.PYTHON_BACKEND_CALLS) == ort.ops.PYTHON_BACKEND_CALLS.capacity == 64


def test_python_backend_calls_dropped_destroy_their_kernels_once_unused(fake):
    ort.clear_descriptor_cache()
    for length in range(1, 71):
        ort.copy_(torch.empty(length), torch.randn(length), backend="tilelang")
    gc.collect()
    assert fake.calls.count(("destroyed", "copy")) == 70 - 64
    # A kept call dropped while it runs (by another thread's eviction or
    # clear_descriptor_cache, here by its own run) is destroyed once the run is
    # over, never during it.
    destroyed_during_run = []
    prepare = fake.prepare

    def prepare_kernel_that_drops_its_call(op, plan, out, inputs, params):
        kernel = prepare(op, plan, out, inputs, params)
        run = kernel.run

        def run_dropping_the_kept_calls(out, inputs, stream):
            ort.clear_descriptor_cache()
            gc.collect()
            destroyed_during_run.append(fake.calls.count(("destroyed", "copy")))
            run(out, inputs, stream)

        kernel.run = run_dropping_the_kept_calls
        return kernel

    fake.prepare = prepare_kernel_that_drops_its_call
    x = torch.randn(3)
    ort.copy(x, backend="tilelang")  # made, run, then kept
    ort.copy(x, backend="tilelang")  # the kept call, dropped during its run
    gc.collect()
    assert destroyed_during_run == [70, 70]
    assert fake.calls.count(("destroyed", "copy")) == 71

def test_calls_of_slopes_minus_zero_and_zero_keep_their_own_kernels(fake):
    x = torch.tensor([-1.0, 2.0])
    for slope in (-0.0, 0.0, -0.0):
        ort.relu(x, slope, backend="tilelang")
    assert [call[1] for call in fake.calls if call[0] == "relu"] == [(-0.0,), (0.0,), (-0.0,)]
    assert [math.copysign(1, call[1][0]) for call in fake.calls if call[0] == "relu"] == [-1, 1, -1]
    assert len(fake.plans) == 2


def test_a_backend_unregistered_during_a_call_is_said(fake):
    class Leaving(_FakePythonBackend):
        def runs_on(self, device):  # resolve has named it; then it goes
            ort.backends.unregister_python_backend("tilelang")
            return True

    for call in (lambda: ort.copy(torch.randn(4), backend="tilelang"),
                 lambda: ort.copy_(torch.empty(4), torch.randn(4), backend="tilelang"),
                 lambda: ort.prepare_copy(torch.empty(4), torch.randn(4), backend="tilelang")):
        ort.register_python_backend("tilelang", Leaving())
        with pytest.raises(ort.NotSupportedError, match="copy: backend 'tilelang' was unregistered during the call"):
            call()


@pytest.mark.parametrize("backend", ["cpu", "tilelang"])
def test_concurrent_rebinding_runs_each_call_on_its_own_tensors(backend, fake):
    prepared = ort.prepare_relu(torch.empty(64), torch.randn(64), backend=backend)
    strays = []

    def worker():
        for _ in range(500):
            x, out = torch.randn(64), torch.full((64,), float("nan"))
            returned = prepared.run(x, out=out)
            if returned is not out or not torch.equal(out, x.relu() if backend == "cpu" else x):
                strays.append(returned)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert not strays


def test_bounded_cache_drops_the_oldest_and_works_in_a_forked_child():
    script = """
import os, threading
from operator_runtime._internal.bounded_cache import BoundedCache
cache = BoundedCache(capacity=2)
for key in "abc":
    cache.put(key, key.upper())
cache.put("c", "C again")  # a key kept already takes no room
cache.discard("missing")
assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (None, "B", "C again", 2)
held, release = threading.Event(), threading.Event()
def hold():
    with cache._lock:
        held.set()
        release.wait()
threading.Thread(target=hold).start()
held.wait()
pid = os.fork()
if pid == 0:  # the thread holding the lock does not exist here
    cache.put("d", "D")
    made_after = BoundedCache(capacity=1)
    made_after.put("e", "E")
    os._exit(0 if cache.get("d") == "D" and made_after.get("e") == "E" else 1)
release.set()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["child", "0"]


def test_out_of_place_inputs_of_two_dtypes_are_named_not_the_out():
    x16, x32 = torch.randn(4, 6, dtype=torch.float16), torch.randn(4, 6)
    for call, message in (
        (lambda: ort.vector_add(x16.bfloat16(), x32), "vector_add: b has dtype float32 but a has dtype bfloat16"),
        (lambda: ort.softmax_backward(x16, x32), "softmax_backward: y has dtype float32 but dy has dtype float16"),
        (lambda: ort.relu_backward(x16, x32), "relu_backward: x has dtype float32 but dy has dtype float16"),
    ):
        with pytest.raises(ort.UnsupportedDtypeError) as refused:
            call()
        assert refused.value.message == message + "; the inputs must share one dtype"
    with pytest.raises(ort.UnsupportedDtypeError, match="a has dtype float64; supported dtypes"):
        ort.vector_add(x32.double(), x32)  # an unsupported dtype is said as such


def test_parameters_take_any_real_number_and_say_what_does_not_fit():
    x = torch.randn(8)
    expected = torch.nn.functional.leaky_relu(x, 0.5)
    for slope in (np.float32(0.5), np.float64(0.5), 0.5):
        torch.testing.assert_close(ort.relu(x, slope), expected)
    torch.testing.assert_close(ort.softmax(x.view(2, 4), np.int64(1)), torch.softmax(x.view(2, 4), 1))
    with pytest.raises(ort.InvalidArgumentError, match="relu: negative_slope must be a number, got bool"):
        ort.relu(x, np.bool_(True))
    with pytest.raises(ort.InvalidArgumentError, match=r"relu: negative_slope 10{400} does not fit a double"):
        ort.relu(x, 10**400)
    # Past 2^53 a double no longer holds every integer (the C ABI's params are
    # doubles), and past int64 torch's schema holds none: each dim is said as given.
    rows = x.view(2, 4)
    for dim in (2**40, -(2**40), 2**53 + 1, -(2**53 + 1), 2**63 - 1, 2**63, -(2**70)):
        calls = {
            "softmax": [lambda: ort.softmax(rows, dim), lambda: ort.softmax_(rows, rows, dim),
                        lambda: ort.prepare_softmax(torch.empty(2, 4), rows, dim)],
            "softmax_backward": [lambda: ort.softmax_backward(rows, rows, dim)],
            "reduce_sum": [lambda: ort.reduce_sum(rows, dim), lambda: ort.reduce_sum_(torch.empty(2), rows, dim)],
        }
        if -(2**63) <= dim < 2**63:
            calls["softmax"].append(lambda: torch.ops.oprt.softmax(rows, dim))
        for op, op_calls in calls.items():
            for call in op_calls:
                with pytest.raises(ort.InvalidArgumentError) as refused:
                    call()
                assert refused.value.message == f"{op}: dim {dim} out of range for ndim 2"


def test_quantized_tensors_are_refused_by_their_dtype():
    quantized = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    for call, role in ((lambda: ort.relu(quantized), "input"), (lambda: ort.relu_(torch.empty(4), quantized), "input"),
                       (lambda: ort.relu_(quantized, torch.randn(4)), "out")):
        with pytest.raises(ort.UnsupportedDtypeError) as refused:
            call()
        assert refused.value.message == f"relu: {role} has dtype qint8; supported dtypes are float32, float16, bfloat16"


def test_a_python_backend_is_checked_when_registered(fake):
    class Broken(_FakePythonBackend):
        def available(self):
            raise RuntimeError("probing the device failed")

    with pytest.raises(ort.InvalidArgumentError) as refused:
        ort.register_python_backend("tilelang", None)
    assert refused.value.message == (
        "a Python backend needs the methods available, unavailable_reason, runs_on, prepare_key, "
        "prepare; NoneType has no available, unavailable_reason, runs_on, prepare_key, prepare"
    )
    with pytest.raises(RuntimeError, match="probing the device failed"):
        ort.register_python_backend("tilelang", Broken())
    assert ort.backends.python_backend("tilelang") is fake  # the one before stays
    assert "tilelang" in ort.available_backends()


def test_python_backend_kernels_never_run_once_destroyed(fake):
    x, out = torch.randn(64), torch.empty(64)
    # A prepare that returns no kernel is the backend's failure, said as such.
    for returned, kind in ((None, "NoneType"), (3, "int")):
        fake.prepare = lambda *args: returned
        with pytest.raises(ort.RuntimeFailure, match=f"copy: backend 'tilelang' prepared no kernel "
                                                     rf"\(its prepare returned {kind}, which has no run, release, destroy\)"):
            ort.prepare_copy(out, x, backend="tilelang")
    del fake.prepare
    fake.prepare_key = lambda: ["a list"]
    with pytest.raises(ort.RuntimeFailure, match="copy: backend 'tilelang''s prepare_key\\(\\) returned an unhashable list"):
        ort.copy_(out, x, backend="tilelang")
    del fake.prepare_key
    # destroy() waits for a run in flight; no run starts after it.
    prepared = ort.prepare_copy(out, x, backend="tilelang")
    kernel, kernel_destroyed, runs_after = prepared._kernel, threading.Event(), []
    run, destroy = kernel.run, kernel.destroy
    kernel.run = lambda *args: (runs_after.append(kernel_destroyed.is_set()), time.sleep(0.001), run(*args))
    kernel.destroy = lambda: (kernel_destroyed.set(), destroy())

    def keep_running():
        with contextlib.suppress(ort.InvalidArgumentError):
            while True:
                prepared.run()

    runner = threading.Thread(target=keep_running)
    runner.start()
    time.sleep(0.02)
    prepared.destroy()
    runner.join()
    assert runs_after and not any(runs_after)
    # A kernel whose destroy fails still leaves the descriptor destroyed.
    prepared = ort.prepare_copy(out, x, backend="tilelang")
    prepared._kernel.destroy = lambda: {}["backend failed to free its kernel"]
    with pytest.raises(KeyError):
        prepared.destroy()
    with pytest.raises(ort.InvalidArgumentError, match="descriptor was destroyed"):
        prepared.run()


def test_native_backend_names_cannot_be_replaced():
    with pytest.raises(ort.InvalidArgumentError):
        ort.register_python_backend("cpu", _FakePythonBackend())


def test_dlpack_tensors_are_accepted():
    array = np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32)
    result = ort.relu(array)
    assert isinstance(result, torch.Tensor)
    assert torch.equal(result, torch.tensor([[0.0, 2.0], [3.0, 0.0]]))


def test_non_tensors_are_rejected():
    with pytest.raises(ort.InvalidArgumentError, match="src must be a torch tensor or support __dlpack__"):
        ort.copy([1.0, 2.0])


def test_reduction_keepdim():
    x = torch.randn(3, 4, 5)
    kept = ort.reduce_sum(x, dim=1, keepdim=True)
    assert kept.shape == (3, 1, 5)
    torch.testing.assert_close(kept, x.sum(1, keepdim=True))
    assert ort.reduce_sum(x, 1).shape == (3, 5)


# ------------------------------------------------ Descriptor.plan (oprt_descriptor_plan)

COMMON_PLAN_KEYS = {"kind", "dtype", "num_inputs", "shape", "out_strides", "in_strides"}
ELEMENTWISE_PLAN_KEYS = COMMON_PLAN_KEYS | {"numel", "contiguous"}
REDUCTION_PLAN_KEYS = COMMON_PLAN_KEYS | {
    "rows", "row_length", "in_axis_strides", "out_axis_stride", "row_splits",
    "splits_share_cluster"}


def _view(tensor: torch.Tensor) -> tuple:
    return (tensor.data_ptr(), _C.OPRT_DTYPE_F32, tuple(tensor.shape), tensor.stride())


def _plan(op: str, out: torch.Tensor, inputs: list[torch.Tensor], params: list[float]) -> dict:
    descriptor = _C.Descriptor(op, _C.OPRT_BACKEND_CPU, _view(out), [_view(t) for t in inputs],
                               params)
    try:
        return descriptor.plan
    finally:
        descriptor.destroy()


def _rows(num_inputs=1, row_splits=1, splits_share_cluster=False, **fields) -> dict:
    """The plan of a cpu f32 normalization (cpu rows are never split) with fields."""
    return {"kind": _C.OPRT_KIND_NORMALIZATION, "dtype": _C.OPRT_DTYPE_F32,
            "num_inputs": num_inputs, "row_splits": row_splits,
            "splits_share_cluster": splits_share_cluster, **fields}


def _elementwise(num_inputs=1, **fields) -> dict:
    return {"kind": _C.OPRT_KIND_ELEMENTWISE, "dtype": _C.OPRT_DTYPE_F32,
            "num_inputs": num_inputs, **fields}


def test_plan_of_contiguous_softmax_merges_the_rows_into_one_dim():
    x = torch.randn(4, 5, 6)
    plan = _plan("softmax", torch.empty_like(x), [x], [-1.0])
    assert set(plan) == REDUCTION_PLAN_KEYS
    assert plan == _rows(rows=20, row_length=6, in_axis_strides=(1,), out_axis_stride=1,
                         shape=(20,), in_strides=((6,),), out_strides=(6,))


def test_plan_of_softmax_along_dim_0_has_neighbouring_rows():
    x = torch.randn(5, 7)
    plan = _plan("softmax", torch.empty_like(x), [x], [0.0])
    # The axis steps over a row of 7; row r starts at element r (rows are neighbours).
    assert plan == _rows(rows=7, row_length=5, in_axis_strides=(7,), out_axis_stride=7,
                         shape=(7,), in_strides=((1,),), out_strides=(1,))


def test_plan_of_padded_rows_keeps_the_row_stride():
    x = torch.randn(2, 3, 8)[:, :, :5]  # rows of 5 every 8 elements
    assert x.stride() == (24, 8, 1)
    plan = _plan("softmax", torch.empty(2, 3, 5), [x], [-1.0])
    # The two row dims merge in both tensors (24 = 8 * 3 in x, 15 = 5 * 3 in out).
    assert plan == _rows(rows=6, row_length=5, in_axis_strides=(1,), out_axis_stride=1,
                         shape=(6,), in_strides=((8,),), out_strides=(5,))


def test_plan_of_reduce_sum_with_the_axis_kept_as_1():
    x = torch.randn(4, 6)
    out = torch.empty(4, 1)
    plan = _plan("reduce_sum", out, [x], [1.0])
    assert set(plan) == REDUCTION_PLAN_KEYS
    assert plan == _rows(rows=4, row_length=6, in_axis_strides=(1,), out_axis_stride=0,
                         shape=(4,), in_strides=((6,),), out_strides=(1,),
                         kind=_C.OPRT_KIND_REDUCTION)


def test_plan_of_softmax_backward_describes_both_inputs():
    dy = torch.randn(3, 4)
    y = torch.randn(4, 3).t()  # shape (3, 4), strides (1, 3)
    plan = _plan("softmax_backward", torch.empty(3, 4), [dy, y], [-1.0])
    assert plan == _rows(num_inputs=2, rows=3, row_length=4, in_axis_strides=(1, 3),
                         out_axis_stride=1, shape=(3,), in_strides=((4,), (1,)),
                         out_strides=(4,))


def test_plan_of_contiguous_elementwise_is_one_flat_dim():
    x = torch.randn(2, 3, 4)
    plan = _plan("relu", torch.empty_like(x), [x], [0.0])
    assert set(plan) == ELEMENTWISE_PLAN_KEYS
    assert plan == _elementwise(contiguous=True, numel=24, shape=(24,), out_strides=(1,),
                                in_strides=((1,),))


def test_plan_of_broadcast_elementwise_has_a_stride_0():
    a, b = torch.randn(3, 4), torch.randn(4)
    plan = _plan("vector_add", torch.empty(3, 4), [a, b], [])
    # b does not step along dim 0, so the two dims cannot merge.
    assert plan == _elementwise(num_inputs=2, contiguous=False, numel=12, shape=(3, 4),
                                out_strides=(4, 1), in_strides=((4, 1), (0, 1)))


def test_plan_of_a_transposed_elementwise_output_follows_out():
    dst = torch.empty(4, 3).t()  # shape (3, 4), strides (1, 3)
    src = torch.randn(3, 4)
    plan = _plan("copy", dst, [src], [])
    # Dims ordered by dst's strides, outermost first: dst's dim 1 (stride 3) leads.
    assert plan == _elementwise(contiguous=False, numel=12, shape=(4, 3), out_strides=(3, 1),
                                in_strides=((1, 4),))


def test_plan_of_a_destroyed_descriptor_raises():
    x = torch.randn(2, 3)
    descriptor = _C.Descriptor("softmax", _C.OPRT_BACKEND_CPU, _view(torch.empty_like(x)),
                               [_view(x)], [-1.0])
    descriptor.destroy()
    with pytest.raises(_C.Error) as raised:
        _ = descriptor.plan
    assert raised.value.args == (
        _C.OPRT_ERR_INVALID_ARG,
        "softmax: descriptor is null, destroyed or not a softmax descriptor")


def test_prepare_checks_parameters_and_backend_as_the_other_forms_do():
    x = torch.tensor([-2.0, 3.0])
    for slope, message in ((True, "must be a number, got bool"), ("0.1", "must be a number, got str"),
                           (torch.tensor(0.5), "must be a number, got Tensor"),
                           (None, "must be a number, got NoneType"), (10**400, "does not fit a double")):
        with pytest.raises(ort.InvalidArgumentError, match=f"relu: negative_slope .*{message}"):
            ort.prepare_relu(torch.empty(2), x, slope)
        with pytest.raises(ort.InvalidArgumentError, match=f"relu_backward: negative_slope .*{message}"):
            ort.prepare_relu_backward(torch.empty(2), torch.ones(2), x, slope)
    for backend in ("", 0, False):
        with pytest.raises(ort.InvalidArgumentError, match=f"unknown backend {backend!r}"):
            ort.prepare_relu(torch.empty(2), x, backend=backend)
        with pytest.raises(ort.InvalidArgumentError, match=f"unknown backend {backend!r}"):
            ort.relu(x, backend=backend)


def test_prepared_refuses_copies_and_pickles_and_stays_usable():
    x = torch.randn(4, 6)
    prepared = ort.prepare_softmax(torch.empty(4, 6), x)
    for duplicate in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="softmax: a Prepared cannot be copied or pickled"):
            duplicate(prepared)
    torch.testing.assert_close(prepared.run(), torch.softmax(x, -1))
    prepared.destroy()


def test_prepared_run_is_cheap():
    """The prepared path adds little to the C call (target <= 2 us; the bound
    is loose so a loaded machine does not flake)."""
    x, out = torch.randn(8), torch.empty(8)
    with ort.prepare_relu(out, x) as prepared:
        per_run = min(timeit.repeat(prepared.run, number=2000, repeat=5)) / 2000
    assert per_run < 20e-6, f"{per_run * 1e6:.2f} us per prepared run"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
