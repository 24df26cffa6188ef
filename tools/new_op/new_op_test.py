"""The scaffolder's own logic: name checks, refusals, the files it writes and the
registry edit. Runs in a temporary fake workspace; no Bazel inside."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import new_op
from new_op import Refusal, Request

REGISTRY = '''"""The operators linked into the runtime. Adding an operator adds one line here."""

OPERATORS = [
    "copy",
    "relu",
]
'''


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "MODULE.bazel").write_text('module(name = "oprt")\n')
    (tmp_path / "ops" / "relu").mkdir(parents=True)
    (tmp_path / "ops" / "registry.bzl").write_text(REGISTRY)
    return tmp_path


@pytest.mark.parametrize("name", ["gelu", "vector_add", "reduce_max2", "l2_norm"])
def test_accepts_operator_names(name):
    new_op.check_name(name)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("Gelu", "lower-case letters"),
        ("2gelu", "lower-case letters"),
        ("ge-lu", "lower-case letters"),
        ("gelu_", "lower-case letters"),
        ("ge__lu", "lower-case letters"),
        ("", "lower-case letters"),
        ("a" * 33, "longer than 32"),
        ("class", "keyword"),
        ("lambda", "keyword"),
        ("prepare_gelu", "Python API already uses it"),
        ("operators", "Python API already uses it"),
    ],
)
def test_refuses_bad_names(name, reason):
    with pytest.raises(Refusal, match=reason):
        new_op.check_name(name)


def test_refuses_an_unknown_kind(workspace):
    with pytest.raises(Refusal, match="unknown kind 'pointwise': expected one of elementwise, reduction, normalization"):
        new_op.check_request(Request("gelu", "pointwise"), workspace)


def test_refuses_an_existing_folder(workspace):
    with pytest.raises(Refusal, match="operator 'relu' exists: .*ops/relu is already there"):
        new_op.check_request(Request("relu", "elementwise"), workspace)


def test_refuses_a_registered_name_without_folder(workspace):
    with pytest.raises(Refusal, match="ops/registry.bzl already lists it"):
        new_op.check_request(Request("copy", "elementwise"), workspace)


@pytest.mark.parametrize(
    "text, inputs",
    [("1", ("input",)), ("2", ("a", "b")), ("dy,x", ("dy", "x")), ("grad", ("grad",))],
)
def test_inputs_are_a_count_or_names(text, inputs):
    assert new_op.parse_inputs(text) == inputs


def test_refuses_an_input_count_without_names():
    with pytest.raises(Refusal, match="--inputs=3: give 1 or 2, or the inputs' names"):
        new_op.parse_inputs("3")


@pytest.mark.parametrize(
    "text, params",
    [
        ("", ()),
        ("negative_slope=0.0", (("negative_slope", 0.0),)),
        ("alpha=1,beta=-2.5e-3", (("alpha", 1.0), ("beta", -0.0025))),
    ],
)
def test_params_are_names_with_defaults(text, params):
    assert new_op.parse_params(text) == params


@pytest.mark.parametrize(
    "text, reason",
    [
        ("alpha", "'alpha' has no default; write alpha=<number>"),
        ("alpha=", "the default of 'alpha' is '', not a number"),
        ("alpha=one", "the default of 'alpha' is 'one', not a number"),
        ("alpha=nan", "the default of 'alpha' is 'nan'; it must be finite"),
        ("alpha=-inf", "the default of 'alpha' is '-inf'; it must be finite"),
    ],
)
def test_refuses_params_without_a_finite_default(text, reason):
    with pytest.raises(Refusal, match=re.escape(reason)):
        new_op.parse_params(text)


SLOPE = (("negative_slope", 0.0),)


@pytest.mark.parametrize(
    "request_, reason",
    [
        (Request("mul", "elementwise", ("a", "b", "c")), "--inputs=a,b,c: an elementwise operator takes 1 or 2"),
        (Request("mul", "elementwise", ()), "takes 1 or 2 inputs"),
        (Request("m", "reduction", ("a", "b")), "--inputs=a,b: a reduction takes exactly one input"),
        (Request("m", "normalization", ("a", "b", "c")), "--inputs=a,b,c: a normalization takes 1 or 2"),
        (Request("m", "reduction", params=SLOPE), "a reduction's only parameter is its axis"),
        (Request("m", "normalization", params=SLOPE), "a normalization's only parameter is its axis"),
        (Request("m", "normalization", ("dy", "m")), "invalid input name 'm': the generated code"),
        (Request("m", "normalization", ("dim",)), "invalid input name 'dim': the generated code"),
        (Request("m", "normalization", ("dy", "dy")), "input name 'dy' is used twice"),
        (Request("g", "elementwise", ("Dy", "x")), "invalid input name 'Dy': use at most 32 lower-case"),
        (Request("g", "elementwise", ("dy", "")), "invalid input name '': use at most 32 lower-case"),
        (Request("g", "elementwise", ("in",)), "invalid input name 'in': a Python or C\\+\\+ keyword"),
        (Request("g", "elementwise", ("x", "float")), "invalid input name 'float': a Python or C\\+\\+ keyword"),
        (Request("g", "elementwise", ("out", "x")), "invalid input name 'out': the generated code uses it"),
        (Request("g", "elementwise", params=(("dim", 0.0),)), "invalid parameter name 'dim': the generated"),
        (Request("g", "elementwise", params=(("n", 1.0),)), "invalid parameter name 'n': the generated"),
        (Request("g", "elementwise", ("x", "x")), "input name 'x' is used twice"),
        (Request("g", "elementwise", ("dy", "x"), (("x", 0.0),)), "parameter name 'x' is used twice"),
        (
            Request("g", "elementwise", params=tuple((f"p{i}", 0.0) for i in range(9))),
            "--params: 9 parameters; a functor holds at most 8",
        ),
    ],
)
def test_refuses_inputs_and_params_the_operator_cannot_take(workspace, request_, reason):
    with pytest.raises(Refusal, match=reason):
        new_op.check_request(request_, workspace)


def test_registry_line_goes_last_in_operators():
    updated = new_op.with_operator(REGISTRY, "gelu")
    assert updated == REGISTRY.replace('    "relu",\n]', '    "relu",\n    "gelu",\n]')
    assert new_op.registered_operators(updated) == ["copy", "relu", "gelu"]


def test_refuses_a_registry_without_the_list():
    with pytest.raises(Refusal, match="has no `OPERATORS = \\[` list"):
        new_op.with_operator("OPERATORS = ['copy']\n", "gelu")


def test_elementwise_files():
    files = new_op.planned_files(Request("gelu", "elementwise"))
    assert sorted(map(str, files)) == [
        "ops/gelu/BUILD.bazel",
        "ops/gelu/cases.py",
        "ops/gelu/gelu_functor.h",
        "ops/gelu/tilelang/gelu.py",
    ]
    build = files[Path("ops/gelu/BUILD.bazel")]
    assert 'oprt_operator(\n    name = "gelu",\n    kind = "elementwise",\n)' in build
    functor = files[Path("ops/gelu/gelu_functor.h")]
    assert "struct GeluFunctor {" in functor
    assert "static constexpr bool kNotImplemented = true;" in functor
    assert "OPRT_HOST_DEVICE float operator()(float x) const" in functor
    assert "OPERATOR_RUNTIME_OPS_GELU_GELU_FUNCTOR_H_" in functor
    cases = files[Path("ops/gelu/cases.py")]
    assert 'raise NotImplementedError("gelu: not implemented' in cases
    tilelang = files[Path("ops/gelu/tilelang/gelu.py")]
    assert 'raise NotImplementedError("gelu: not implemented: write its TileLang value' in tilelang
    assert "def gelu(input):" in tilelang
    assert "def flat_eager(input, out, dtype=\"float32\"):" in tilelang
    assert "def flat_lazy(input: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):" in tilelang
    assert 'def broadcast_eager(input, out, dtype="float32", vec=4, constant_inner=(False,)):' in tilelang
    assert 'def broadcast_lazy(dtype="float32", vec=4, constant_inner=(False,)):' in tilelang
    assert tilelang.count("elementwise_kernel(n, gelu, out, (input,), ())") == 2
    assert tilelang.count("broadcast_kernel(gelu, out, (input,), (), vec)") == 2
    assert "elementwise_cases(num_inputs=1, params={})" in cases


def test_two_input_elementwise_names_its_inputs_a_and_b():
    files = new_op.planned_files(Request("mul", "elementwise", new_op.parse_inputs("2")))
    assert 'inputs = ["a", "b"],' in files[Path("ops/mul/BUILD.bazel")]
    assert "operator()(float a, float b)" in files[Path("ops/mul/mul_functor.h")]
    tilelang = files[Path("ops/mul/tilelang/mul.py")]
    assert "def mul(a, b):" in tilelang
    assert "    a: T.Tensor[[n], dtype]\n    b: T.Tensor[[n], dtype]\n" in tilelang
    assert (
        '    a: T.Tensor[broadcast_shape("a", vec, constant_inner[0]), dtype]\n'
        '    b: T.Tensor[broadcast_shape("b", vec, constant_inner[1]), dtype]\n'
    ) in tilelang
    assert "def reference(a: torch.Tensor, b: torch.Tensor)" in files[Path("ops/mul/cases.py")]


def test_named_inputs_and_a_parameter_reach_every_file():
    files = new_op.planned_files(Request("relu_backward", "elementwise", ("dy", "x"), SLOPE))
    folder = Path("ops/relu_backward")
    assert (
        '    inputs = ["dy", "x"],\n    kind = "elementwise",\n    params = {"negative_slope": 0.0},\n'
    ) in files[folder / "BUILD.bazel"]
    functor = files[folder / "relu_backward_functor.h"]
    assert "  static constexpr int kNumInputs = 2;\n  float negative_slope;\n" in functor
    assert "operator()(float dy, float x) const { return dy; }" in functor
    cases = files[folder / "cases.py"]
    assert "def reference(dy: torch.Tensor, x: torch.Tensor, negative_slope: float = 0.0)" in cases
    assert 'elementwise_cases(num_inputs=2, params={"negative_slope": 0.0})' in cases
    assert 'BenchmarkCase(named(name, dtype), (shape,) * 2, dtype, {"negative_slope": 0.0})' in cases
    tilelang = files[folder / "tilelang/relu_backward.py"]
    assert "def relu_backward(dy, x, negative_slope):" in tilelang
    assert 'def flat_eager(dy, x, out, negative_slope: T.float32, dtype="float32"):' in tilelang
    assert "out: T.Tensor((n,), dtype), negative_slope: T.float32):" in tilelang
    assert tilelang.count("elementwise_kernel(n, relu_backward, out, (dy, x), (negative_slope,))") == 2
    assert (
        'def broadcast_eager(dy, x, out, negative_slope: T.float32, dtype="float32", vec=4, '
        "constant_inner=(False, False)):"
    ) in tilelang
    assert '        out: T.Tensor(broadcast_shape("out", vec, False), dtype),\n        negative_slope: T.float32,\n' in tilelang
    assert tilelang.count("broadcast_kernel(relu_backward, out, (dy, x), (negative_slope,), vec)") == 2
    assert 'register("relu_backward", "flat", eager=flat_eager, lazy=flat_lazy)' in tilelang
    assert 'register("relu_backward", "broadcast", eager=broadcast_eager, lazy=broadcast_lazy)' in tilelang


def test_several_parameters_keep_their_order():
    params = (("alpha", 1.0), ("beta", -0.5))
    files = new_op.planned_files(Request("axpby", "elementwise", ("x", "y"), params))
    assert 'params = {"alpha": 1.0, "beta": -0.5},' in files[Path("ops/axpby/BUILD.bazel")]
    assert "  float alpha;\n  float beta;\n" in files[Path("ops/axpby/axpby_functor.h")]


def test_reduction_files_report_not_implemented_from_each_backend():
    files = new_op.planned_files(Request("reduce_max", "reduction"))
    assert Path("ops/reduce_max/reduce_max_functor.h") not in files
    for path, backend in (("cpu/reduce_max_cpu.cc", "CPU"), ("nvidia/reduce_max.cu", "NVIDIA")):
        text = files[Path("ops/reduce_max") / path]
        assert (
            f'"reduce_max: not implemented: write its {backend.lower()} kernel in "\n'
            f'              "ops/reduce_max/{path}"'
        ) in text
        registered_as = "OPRT_BACKEND_CPU" if backend == "CPU" else "OPRT_GPU_BACKEND"
        assert f"OPRT_REGISTER_KERNEL(reduce_max, {registered_as}," in text
    assert "axis_cases(keeps_axis=False)" in files[Path("ops/reduce_max/cases.py")]
    assert 'kind = "reduction"' in files[Path("ops/reduce_max/BUILD.bazel")]


def test_two_input_normalization_is_shaped_like_softmax_backward():
    files = new_op.planned_files(Request("softmax_backward", "normalization", ("dy", "y")))
    folder = Path("ops/softmax_backward")
    assert sorted(map(str, files)) == sorted(
        str(folder / path) for path in ("BUILD.bazel", "cases.py", "cpu/softmax_backward_cpu.cc",
                                        "nvidia/softmax_backward.cu", "tilelang/softmax_backward.py")
    )
    assert '    inputs = ["dy", "y"],\n    kind = "normalization",\n' in files[folder / "BUILD.bazel"]
    cpu = files[folder / "cpu/softmax_backward_cpu.cc"]
    assert "y[start.second_in + i * plan.second_in_axis_stride]" in cpu
    assert '"softmax_backward: not implemented: write its cpu kernel in "' in cpu
    assert "ops/softmax_backward/nvidia/softmax_backward.cu is a complete kernel" in files[
        folder / "nvidia/softmax_backward.cu"]
    cases = files[folder / "cases.py"]
    assert "def reference(dy: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:" in cases
    assert "axis_cases(keeps_axis=True, num_inputs=2)" in cases
    assert "(shape,) * 2, dtype, {\"dim\": dim})" in cases
    tilelang = files[folder / "tilelang/softmax_backward.py"]
    operands = "dy_vectors, dy, y_vectors, y, out_vectors, out"
    assert f"def softmax_backward_rows({operands}, block_m, width, vec, peeled, threads, batch):" in tilelang
    assert (f'def rows_eager({operands}, dtype="float32", block_m=1, width=1024, vec=1, peeled=False, threads=128, '
            'batch=1):' in tilelang)
    assert "    y: T.Tensor[[m, n], dtype]\n    out_vectors: T.Tensor[[vectors, vec], dtype]\n" in tilelang
    assert (
        "def rows_lazy(dy_vectors: T.Tensor((vectors, vec), dtype), dy: T.Tensor((m, n), dtype), "
        "y_vectors: T.Tensor((vectors, vec), dtype), y: T.Tensor((m, n), dtype), "
        "out_vectors: T.Tensor((vectors, vec), dtype), out: T.Tensor((m, n), dtype)):"
    ) in tilelang
    assert tilelang.count(f"softmax_backward_rows({operands}, block_m, width, vec, peeled, threads, batch)\n") == 2
    assert 'register("softmax_backward", "rows", eager=rows_eager, lazy=rows_lazy)' in tilelang


def test_one_input_normalization_keeps_the_default_input():
    files = new_op.planned_files(Request("log_softmax", "normalization"))
    assert "inputs" not in files[Path("ops/log_softmax/BUILD.bazel")]
    assert "axis_cases(keeps_axis=True)" in files[Path("ops/log_softmax/cases.py")]
    assert "out: T.Tensor((m, n), dtype)):" in files[Path("ops/log_softmax/tilelang/log_softmax.py")]


# Requests with long names: the operator's, and (elementwise) three parameters'.
LONG_REQUESTS = [
    Request("layer_norm_backward", "reduction"),
    Request("layer_norm_backward", "normalization", ("grad_output", "saved_output")),
    Request("layer_norm_backward", "elementwise"),
    Request(
        "layer_norm_backward", "elementwise",
        params=(("negative_slope", 0.0), ("positive_scale", 1.0), ("epsilon_value", 1e-05)),
    ),
]


@pytest.mark.parametrize("request_", LONG_REQUESTS, ids=lambda request: request.kind)
def test_generated_sources_fit_in_100_columns_and_leave_no_placeholder(request_):
    for path, text in new_op.planned_files(request_).items():
        assert "${" not in text, path
        if path.suffix in (".h", ".cc", ".cu"):
            long_lines = [line for line in text.splitlines() if len(line) > 100]
            assert not long_lines, f"{path}: {long_lines}"


@pytest.mark.parametrize("request_", LONG_REQUESTS, ids=lambda request: request.kind)
def test_generated_python_compiles(request_):
    for path, text in new_op.planned_files(request_).items():
        if path.suffix == ".py":
            compile(text, str(path), "exec")


def test_main_writes_the_folder_and_the_registry_line(workspace, capsys):
    assert new_op.main(["--name=gelu", "--kind=elementwise", f"--workspace={workspace}"]) == 0
    assert (workspace / "ops/gelu/gelu_functor.h").is_file()
    assert new_op.registered_operators((workspace / "ops/registry.bzl").read_text())[-1] == "gelu"
    assert "ops/gelu/gelu_functor.h" in capsys.readouterr().out


def test_main_takes_named_inputs_and_params(workspace, capsys):
    arguments = ["--name=relu_backward", "--kind=elementwise", "--inputs=dy,x",
                 "--params=negative_slope=0.0", f"--workspace={workspace}"]
    assert new_op.main(arguments) == 0
    assert "new_op: wrote 5 files" in capsys.readouterr().out
    build = (workspace / "ops/relu_backward/BUILD.bazel").read_text()
    assert 'params = {"negative_slope": 0.0},' in build


def test_main_takes_a_normalization_with_named_inputs(workspace, capsys):
    arguments = ["--name=softmax_backward", "--kind=normalization", "--inputs=dy,y",
                 f"--workspace={workspace}"]
    assert new_op.main(arguments) == 0
    assert "new_op: wrote 6 files" in capsys.readouterr().out
    assert 'kind = "normalization"' in (workspace / "ops/softmax_backward/BUILD.bazel").read_text()


def test_main_uses_bazel_runs_workspace(workspace, monkeypatch):
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(workspace))
    assert new_op.main(["--name=reduce_max", "--kind=reduction"]) == 0
    assert (workspace / "ops/reduce_max/cpu/reduce_max_cpu.cc").is_file()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--name=Gelu", "--kind=elementwise"], "new_op: invalid operator name 'Gelu'"),
        (["--name=relu", "--kind=elementwise"], "new_op: operator 'relu' exists"),
        (["--name=gelu", "--kind=pointwise"], "new_op: unknown kind 'pointwise'"),
        (["--name=gelu", "--kind=elementwise", "--inputs=3"], "new_op: --inputs=3: give 1 or 2"),
        (["--name=gelu", "--kind=elementwise", "--inputs=dy,out"], "new_op: invalid input name 'out'"),
        (["--name=gelu", "--kind=elementwise", "--params=slope"], "new_op: --params: 'slope' has no default"),
        (["--name=gelu", "--kind=reduction", "--params=slope=1"], "new_op: --params: a reduction's only"),
        (["--name=g", "--kind=normalization", "--inputs=a,b,c"], "new_op: --inputs=a,b,c: a normalization"),
    ],
)
def test_main_refuses_with_status_2_and_writes_nothing(workspace, capsys, arguments, message):
    before = sorted(p.relative_to(workspace) for p in workspace.rglob("*"))
    assert new_op.main([*arguments, f"--workspace={workspace}"]) == 2
    assert capsys.readouterr().err.startswith(message)
    assert sorted(p.relative_to(workspace) for p in workspace.rglob("*")) == before
    assert (workspace / "ops/registry.bzl").read_text() == REGISTRY


def test_main_refuses_a_folder_that_is_not_the_workspace(tmp_path, capsys):
    assert new_op.main(["--name=gelu", "--kind=elementwise", f"--workspace={tmp_path}"]) == 2
    assert re.search("is not the oprt workspace", capsys.readouterr().err)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
