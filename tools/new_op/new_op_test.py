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
    with pytest.raises(Refusal, match="unknown kind 'pointwise': expected one of elementwise, reduction"):
        new_op.check_request(Request("gelu", "pointwise"), workspace)


def test_refuses_an_existing_folder(workspace):
    with pytest.raises(Refusal, match="operator 'relu' exists: .*ops/relu is already there"):
        new_op.check_request(Request("relu", "elementwise"), workspace)


def test_refuses_a_registered_name_without_folder(workspace):
    with pytest.raises(Refusal, match="ops/registry.bzl already lists it"):
        new_op.check_request(Request("copy", "elementwise"), workspace)


@pytest.mark.parametrize(
    "request_, reason",
    [(Request("mul", "elementwise", 3), "1 or 2 inputs"), (Request("m", "reduction", 2), "exactly one")],
)
def test_refuses_input_counts(workspace, request_, reason):
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
        "ops/gelu/cpu/gelu_cpu.cc",
        "ops/gelu/gelu.cc",
        "ops/gelu/gelu.h",
        "ops/gelu/gelu_functor.h",
        "ops/gelu/nvidia/gelu.cu",
        "ops/gelu/tilelang/gelu.py",
    ]
    build = files[Path("ops/gelu/BUILD.bazel")]
    assert 'oprt_operator(\n    name = "gelu",\n    family = "elementwise",\n)' in build
    functor = files[Path("ops/gelu/gelu_functor.h")]
    assert "struct GeluFunctor {" in functor
    assert "static constexpr bool kNotImplemented = true;" in functor
    assert "OPRT_HOST_DEVICE float operator()(float x) const" in functor
    assert "OPERATOR_RUNTIME_OPS_GELU_GELU_FUNCTOR_H_" in functor
    assert "oprt::cpu::elementwise_kernel<oprt::GeluFunctor>" in files[Path("ops/gelu/cpu/gelu_cpu.cc")]
    assert "oprt::gpu::elementwise_kernel<oprt::GeluFunctor>" in files[Path("ops/gelu/nvidia/gelu.cu")]
    assert "OPRT_REGISTER_OPERATOR(gelu, kGeluEntry);" in files[Path("ops/gelu/gelu.cc")]
    cases = files[Path("ops/gelu/cases.py")]
    assert 'raise NotImplementedError("gelu: not implemented' in cases
    tilelang = files[Path("ops/gelu/tilelang/gelu.py")]
    assert 'raise NotImplementedError("gelu: not implemented: write its TileLang element' in tilelang
    assert "def gelu_eager(input, out, dtype=\"float32\"):" in tilelang
    assert "def gelu_lazy(input: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):" in tilelang
    assert "elementwise_cases(num_inputs=1, params={})" in cases


def test_two_input_elementwise_names_its_inputs_a_and_b():
    files = new_op.planned_files(Request("mul", "elementwise", 2))
    assert 'kInputNames[] = {"a", "b"}' in files[Path("ops/mul/mul.cc")]
    assert "const void *a,\n" in files[Path("ops/mul/mul.h")]
    assert "operator()(float a, float b)" in files[Path("ops/mul/mul_functor.h")]
    tilelang = files[Path("ops/mul/tilelang/mul.py")]
    assert "def mul_element(i, a, b, out):" in tilelang
    assert "    a: T.Tensor[[n], dtype]\n    b: T.Tensor[[n], dtype]\n" in tilelang
    assert "def reference(a: torch.Tensor, b: torch.Tensor)" in files[Path("ops/mul/cases.py")]


def test_reduction_files_report_not_implemented_from_each_backend():
    files = new_op.planned_files(Request("reduce_max", "reduction"))
    assert Path("ops/reduce_max/reduce_max_functor.h") not in files
    front_end = files[Path("ops/reduce_max/reduce_max.cc")]
    assert '{"reduce_max", OPRT_KIND_REDUCTION}' in front_end
    for path, backend in (("cpu/reduce_max_cpu.cc", "CPU"), ("nvidia/reduce_max.cu", "NVIDIA")):
        text = files[Path("ops/reduce_max") / path]
        assert (
            f'"reduce_max: not implemented: write its {backend.lower()} kernel in "\n'
            f'              "ops/reduce_max/{path}"'
        ) in text
        registered_as = "OPRT_BACKEND_CPU" if backend == "CPU" else "OPRT_GPU_BACKEND"
        assert f"OPRT_REGISTER_KERNEL(reduce_max, {registered_as}," in text
    assert "axis_cases(keeps_axis=False)" in files[Path("ops/reduce_max/cases.py")]


@pytest.mark.parametrize("kind", new_op.KINDS)
def test_generated_sources_fit_in_100_columns_and_leave_no_placeholder(kind):
    for path, text in new_op.planned_files(Request("layer_norm_backward", kind)).items():
        assert "${" not in text, path
        if path.suffix in (".h", ".cc", ".cu"):
            long_lines = [line for line in text.splitlines() if len(line) > 100]
            assert not long_lines, f"{path}: {long_lines}"


def test_generated_python_compiles():
    for kind in new_op.KINDS:
        for path, text in new_op.planned_files(Request("gelu", kind)).items():
            if path.suffix == ".py":
                compile(text, str(path), "exec")


def test_main_writes_the_folder_and_the_registry_line(workspace, capsys):
    assert new_op.main(["--name=gelu", "--kind=elementwise", f"--workspace={workspace}"]) == 0
    assert (workspace / "ops/gelu/gelu_functor.h").is_file()
    assert new_op.registered_operators((workspace / "ops/registry.bzl").read_text())[-1] == "gelu"
    assert "ops/gelu/gelu_functor.h" in capsys.readouterr().out


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
