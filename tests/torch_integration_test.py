"""oprt as a PyTorch program sees it: the torch.library ops, torch.compile
(fullgraph) and torch.export of a model using every operator, FakeTensor and meta
tensors, torch.library.opcheck over a sample of every case table, the autograd
contract (gradients or a raise naming the operator, version counters, leaves), torch.jit.trace, and
the descriptor cache behind ort.<op> (bounds, clearing, threads).

Runs on the cpu backend everywhere and, where a CUDA device is present (the
GPU-runner bundle on the H200), on the nvidia backend too, CUDA graphs through
torch.compile(mode="reduce-overhead") included.
"""

from __future__ import annotations

import importlib
import math
import sys
import threading

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import operator_runtime as ort
from operator_runtime import autograd, library
from operator_runtime.ops import Kind
from operator_runtime_testing.tensors import generator_for, make_input

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
OPS = sorted(ort.OPERATORS)
# Every n-th case of a table goes through opcheck (each takes about a second).
OPCHECK_STRIDE = 9
OPCHECK_MAX_ELEMENTS = 1 << 16


class EveryOperator(torch.nn.Module):
    """A model that calls every operator, out-variants included."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(32), requires_grad=False)

    def forward(self, x):
        h = ort.vector_add(x, self.bias)
        h = ort.relu(h, 0.1)
        p = ort.softmax(h, dim=-1)
        s = ort.reduce_sum(p, dim=0, keepdim=True)
        out = torch.empty_like(p)
        ort.copy_(out, p * 2.0)
        ort.relu_(out, out - s)
        return ort.softmax(out, 0) + ort.reduce_sum(h, -1, keepdim=True) + ort.relu_backward(p, h, 0.1)


def reference_model(model, x):
    h = torch.nn.functional.leaky_relu(x + model.bias, 0.1)
    p = torch.softmax(h, -1)
    s = p.sum(0, keepdim=True)
    out = torch.nn.functional.leaky_relu(p * 2.0 - s, 0.0)
    return torch.softmax(out, 0) + h.sum(-1, keepdim=True) + torch.ops.aten.leaky_relu_backward(p, h, 0.1, False)


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def test_every_operator_has_a_functional_and_an_out_op():
    for name, info in ort.OPERATORS.items():
        functional = getattr(torch.ops.oprt, name).default
        out_variant = getattr(torch.ops.oprt, name + "_out").default
        assert functional._schema.returns[0].type.kind() == "TensorType"
        mutable = [arg.name for arg in out_variant._schema.arguments if arg.alias_info is not None
                   and arg.alias_info.is_write]
        assert mutable == ["out"], (name, mutable)
        inputs = [arg.name for arg in functional._schema.arguments][: len(info.input_names)]
        assert inputs == list(info.input_names)
        assert library.TORCH_OPS[name] == (functional, out_variant)


def test_compile_fullgraph_equals_eager(device):
    torch._dynamo.reset()
    model = EveryOperator().to(device)
    x = torch.randn(16, 32, device=device)
    eager = model(x)
    torch.testing.assert_close(eager, reference_model(model, x), rtol=1e-5, atol=1e-5)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), eager, rtol=1e-5, atol=1e-5)
    other = torch.randn(16, 32, device=device)
    torch.testing.assert_close(compiled(other), model(other), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_compile_other_backends_and_dynamic_shapes(backend):
    torch._dynamo.reset()
    model = EveryOperator()
    compiled = torch.compile(model, fullgraph=True, backend=backend, dynamic=True)
    for rows in (3, 7, 12):
        x = torch.randn(rows, 32)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


if torch.cuda.is_available():  # CUDA graphs need a CUDA device; defined only where one is

    def test_compile_reduce_overhead_replays_cuda_graphs():
        torch._dynamo.reset()
        model = EveryOperator().cuda()
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        for _ in range(4):  # warm-up, record, replays
            x = torch.randn(16, 32, device="cuda")
            result = compiled(x).clone()
            torch.testing.assert_close(result, model(x), rtol=1e-5, atol=1e-5)


def test_export_holds_oprt_ops_and_equals_eager(device):
    model = EveryOperator().to(device)
    x = torch.randn(16, 32, device=device)
    exported = torch.export.export(model, (x,))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    for name in ("vector_add", "relu", "softmax", "reduce_sum", "relu_backward"):
        assert f"oprt.{name}.default" in targets, targets
    assert any(t.startswith("oprt.copy_out") or "auto_functionalized" in t for t in targets), targets
    other = torch.randn(16, 32, device=device)
    torch.testing.assert_close(exported.module()(other), model(other), rtol=1e-5, atol=1e-5)


def test_fake_and_meta_tensors_give_shapes():
    with FakeTensorMode():
        x = torch.empty(6, 10)
        assert ort.softmax(x, 0).shape == (6, 10)
        assert ort.reduce_sum(x, 1).shape == (6,)
        assert ort.reduce_sum(x, 1, keepdim=True).shape == (6, 1)
        assert ort.vector_add(x, torch.empty(10)).shape == (6, 10)
        out = torch.empty(6, 10)
        assert ort.relu_(out, x) is out
    meta = torch.empty(5, 3, device="meta")
    assert ort.softmax(meta).device.type == "meta"
    assert ort.reduce_sum(meta, 0).shape == (3,)
    assert ort.vector_add(meta, torch.empty(3, device="meta")).shape == (5, 3)


def test_fake_kernels_report_bad_calls_while_tracing():
    with FakeTensorMode():
        x = torch.empty(6, 10)
        with pytest.raises(ort.InvalidArgumentError, match="softmax: dim 2 out of range for ndim 2"):
            ort.softmax(x, 2)
        with pytest.raises(ort.InvalidArgumentError, match="not broadcastable"):
            ort.vector_add(x, torch.empty(7))
    # What the real kernels refuse whatever the data: dtypes, and inputs of a
    # normalization that differ in shape; meta tensors and torch.export meet it too.
    with pytest.raises(ort.UnsupportedDtypeError,
                       match="softmax: input has dtype int32; supported dtypes are float32, float16, bfloat16"):
        ort.softmax(torch.ones(3, 4, device="meta", dtype=torch.int32))
    with pytest.raises(ort.UnsupportedDtypeError, match="relu: out has dtype float64"):
        ort.relu_(torch.empty(3, device="meta", dtype=torch.float64), torch.empty(3, device="meta"))
    with pytest.raises(ort.InvalidArgumentError, match=r"softmax_backward: y shape \[3, 5\] must equal dy shape \[3, 4\]"):
        ort.softmax_backward(torch.empty(3, 4, device="meta"), torch.empty(3, 5, device="meta"))

    class Softmax(torch.nn.Module):
        def forward(self, x):
            return ort.softmax(x)

    with pytest.raises(ort.UnsupportedDtypeError, match="softmax: input has dtype float64"):
        torch.export.export(Softmax(), (torch.randn(3, 4, dtype=torch.float64),))


def test_compile_fullgraph_reports_argument_errors_with_their_message():
    # Dynamo reports an exception raised in traced code with its text; oprt's
    # errors must be ones it can build (no __init__ of their own).
    x = torch.randn(3, 4)
    calls = {"softmax: dim must be an integer, got str": lambda t: ort.softmax(t, dim="a"),
             "relu: negative_slope must be a number, got str": lambda t: ort.relu(t, "a"),
             "reduce_sum: keepdim must be a bool, got int": lambda t: ort.reduce_sum(t, 0, 1)}
    for message, call in calls.items():
        with pytest.raises(Exception) as raised:
            torch.compile(call, fullgraph=True)(x)
        assert message in str(raised.value)


def test_fx_symbolic_trace_records_the_ops():
    def program(x):
        out = torch.empty(3, 4)
        return ort.softmax(x, 0) + ort.relu_(out, x) + ort.vector_add(x, x)

    traced = torch.fx.symbolic_trace(program)
    targets = {node.target for node in traced.graph.nodes if node.op == "call_function"}
    assert {torch.ops.oprt.softmax.default, torch.ops.oprt.relu_out.default,
            torch.ops.oprt.vector_add.default} <= targets
    x = torch.randn(3, 4)
    torch.testing.assert_close(traced(x), program(x))
    with pytest.raises(ort.InvalidArgumentError, match="softmax: out is a torch.fx Proxy"):
        torch.fx.symbolic_trace(lambda t: ort.prepare_softmax(t, t))


def _opcheck_samples(name: str):
    cases = importlib.import_module(f"ops.{name}.cases")
    # opcheck compares results with NaN != NaN, so tables' NaN cases stay out.
    table = [case for case in cases.correctness_cases()
             if all(torch.Size(spec.shape).numel() <= OPCHECK_MAX_ELEMENTS for spec in case.inputs)
             and not any(math.isnan(value) for value in case.values.specials)]
    return cases.OP, table[::OPCHECK_STRIDE]


@pytest.mark.parametrize("name", OPS)
def test_opcheck_over_the_case_table(name):
    op, sample = _opcheck_samples(name)
    functional, out_variant = library.TORCH_OPS[name]
    info = ort.OPERATORS[name]
    assert sample
    for case in sample:
        generator = generator_for(case.name)
        inputs = [make_input(spec, case.dtype, torch.device("cpu"), case.values, generator)
                  for spec in case.inputs]
        params = [case.params.get(p, info.default(p)) for p in info.param_names]
        keepdim = [case.params.get("keepdim", False)] if info.kind == Kind.REDUCTION else []
        torch.library.opcheck(functional, (*inputs, *params, *keepdim))
        out = functional(*inputs, *params)
        torch.library.opcheck(out_variant, (torch.empty_like(out), *inputs, *params))


@pytest.mark.parametrize("name", OPS)
def test_inputs_that_require_grad_get_gradients_or_raise_naming_the_operator(name, device):
    """The five forward ops are differentiable (tests/autograd_test.py checks the
    values); the backward ops, and every out= form, raise."""
    info = ort.OPERATORS[name]
    inputs = [torch.randn(4, 8, device=device) for _ in info.input_names]
    inputs[-1].requires_grad_(True)
    compiled = torch.compile(getattr(ort, name), fullgraph=True, backend="aot_eager")
    if name in autograd.GRADIENTS:
        assert getattr(ort, name)(*inputs).requires_grad
        assert compiled(*inputs).requires_grad
    else:
        with pytest.raises(ort.AutogradError, match=f"{name}: {info.input_names[-1]} requires grad"):
            getattr(ort, name)(*inputs)
        with pytest.raises(RuntimeError, match=f"{name}: .* requires grad"):
            compiled(*inputs)
    out = torch.empty(4, 8, device=device)
    with pytest.raises(ort.AutogradError, match=f"{name}: {info.input_names[-1]} requires grad"):
        getattr(ort, name + "_")(out, *inputs)
    with torch.no_grad():
        result = getattr(ort, name)(*inputs)
    assert not result.requires_grad


@pytest.mark.parametrize("name", OPS)
def test_out_variants_bump_the_version_counter(name, device):
    info = ort.OPERATORS[name]
    inputs = [torch.randn(4, 8, device=device) for _ in info.input_names]
    out = getattr(ort, name)(*inputs)
    before = out._version
    getattr(ort, name + "_")(out, *inputs)
    assert out._version == before + 1
    with getattr(ort, "prepare_" + name)(out, *inputs) as prepared:
        prepared.run()
    assert out._version == before + 2


def test_overwriting_a_saved_tensor_is_caught_by_autograd(device):
    x = torch.randn(4, 8, device=device, requires_grad=True)
    y = x.exp()  # autograd saves y for the backward of exp
    with torch.no_grad():
        ort.relu_(y, torch.randn(4, 8, device=device))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_writing_into_a_leaf_that_requires_grad_raises_as_torch_does(device):
    leaf = torch.zeros(4, 8, device=device, requires_grad=True)
    x = torch.randn(4, 8, device=device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.add_(1)
    with pytest.raises(ort.AutogradError, match="copy: out is a leaf tensor that requires grad"):
        ort.copy_(leaf, x)
    with pytest.raises(ort.AutogradError, match="leaf"):
        with ort.prepare_copy(leaf, x) as prepared:
            prepared.run()
    with torch.no_grad():
        ort.copy_(leaf, x)  # as torch allows leaf.copy_(x) under no_grad
    torch.testing.assert_close(leaf.detach(), x)


def test_jit_trace_records_the_op_and_generalises():
    traced = torch.jit.trace(lambda x: ort.softmax(ort.relu(x), 0), torch.randn(3, 4))
    assert "oprt::softmax" in str(traced.graph)
    x = torch.randn(3, 4)
    torch.testing.assert_close(traced(x), torch.softmax(torch.relu(x), 0))


def test_torch_ops_accept_an_explicit_backend():
    x = torch.randn(4, 8)
    torch.testing.assert_close(torch.ops.oprt.softmax(x, 0, backend="cpu"), torch.softmax(x, 0))
    with pytest.raises(ort.InvalidArgumentError, match="unknown backend 'gpu'"):
        torch.ops.oprt.softmax(x, backend="gpu")


def test_the_cache_serves_repeated_calls_and_stays_bounded():
    ort.clear_descriptor_cache()
    assert ort.descriptor_cache_info()["size"] == 0
    x = torch.randn(4, 8)
    before = ort.descriptor_cache_info()
    for _ in range(10):
        ort.softmax(x)
    after = ort.descriptor_cache_info()
    assert after["misses"] - before["misses"] == 1
    assert after["hits"] - before["hits"] == 9
    ort.set_descriptor_cache_capacity(4)
    try:
        for n in range(1, 20):
            torch.testing.assert_close(ort.softmax(torch.ones(2, n)), torch.full((2, n), 1.0 / n))
        assert ort.descriptor_cache_info()["size"] == 4
        ort.set_descriptor_cache_capacity(0)
        ort.relu(x)
        assert ort.descriptor_cache_info()["size"] == 0
        for capacity in (-1, 2**64, 1.5, True):
            with pytest.raises(ort.InvalidArgumentError, match=r"capacity must be an int from 0 to 2\^63 - 1"):
                ort.set_descriptor_cache_capacity(capacity)
    finally:
        ort.set_descriptor_cache_capacity(256)
    ort.clear_descriptor_cache()
    assert ort.descriptor_cache_info()["size"] == 0


def test_a_cached_descriptor_checks_each_calls_own_pointers():
    buffer = torch.randn(40)
    x = buffer[:32].view(4, 8)
    torch.testing.assert_close(ort.softmax(x), torch.softmax(x, -1))
    out = buffer[1:33].view(4, 8)  # same layout as x, partly overlapping it
    with pytest.raises(ort.InvalidArgumentError, match="overlap"):
        ort.softmax_(out, x)
    expected = torch.softmax(x, -1)
    ort.softmax_(x, x)  # in place: the same descriptor's layout, exact aliasing
    torch.testing.assert_close(x, expected)


def test_threads_share_the_cache():
    ort.set_descriptor_cache_capacity(8)
    errors = []

    def work(seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        try:
            for i in range(300):
                x = torch.randn(3, 1 + (seed + i) % 16, generator=generator)
                torch.testing.assert_close(ort.softmax(x), torch.softmax(x, -1))
                if i % 50 == 0:
                    ort.clear_descriptor_cache()
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        ort.set_descriptor_cache_capacity(256)
    assert not errors, errors[0]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
