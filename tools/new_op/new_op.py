"""Generates a new operator folder that builds at once and whose tests fail with "not implemented".

    tools/bazel run //tools:new_op -- --name=gelu --kind=elementwise [--inputs=2]
    tools/bazel run //tools:new_op -- --name=reduce_max --kind=reduction

It writes `ops/<name>/` (public header, front end, cpu/ and nvidia/ backends, cases.py,
BUILD.bazel calling `oprt_operator`; an elementwise operator also gets its functor header)
and adds `"<name>"` to `OPERATORS` in `ops/registry.bzl`. Under `bazel run` it writes into
the workspace it was run from ($BUILD_WORKSPACE_DIRECTORY); `--workspace` names another.

What is left to write is marked `======` in the generated files:
- elementwise: `operator()` of `ops/<name>/<name>_functor.h` (one functor for cpu and
  nvidia; until then every backend fails with "<name>: not implemented") and `reference()`
  in `ops/<name>/cases.py`;
- reduction: the `execute` of `cpu/<name>_cpu.cc` and of `nvidia/<name>.cu`, and
  `reference()` in `cases.py`.

It refuses, with a message and exit status 2, a name that is not a valid operator name,
an operator that exists, an unknown kind, or a registry it cannot edit; it then writes nothing.
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

KINDS = ("elementwise", "reduction")
TEMPLATES = Path(__file__).resolve().parent / "templates"
REGISTRY = Path("ops/registry.bzl")

# A name becomes a directory, C identifiers (oprt_create_<name>_descriptor), a C++ type
# (<Name>Functor), a Python module (ops.<name>.cases) and Python API functions.
_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
_MAX_NAME_LENGTH = 32
_CPP_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const constexpr continue "
    "default delete do double else enum explicit export extern false float for friend goto if "
    "inline int long mutable namespace new noexcept not nullptr operator or private protected "
    "public register return short signed sizeof static struct switch template this throw true "
    "try typedef typeid typename union unsigned using virtual void volatile while xor".split()
)
# Names the Python API already uses for itself (python/operator_runtime/__init__.py and
# ops.py, whose module namespace receives the generated operator functions).
_API_NAMES = frozenset(
    ("available_backends", "backends", "errors", "get_default_backend", "operators", "ops",
     "output_shape", "register_python_backend", "set_default_backend")
)
_OPERATORS_LIST = re.compile(r"^OPERATORS = \[\n(?P<body>(?:    \"[a-z0-9_]+\",\n)*)\]$", re.MULTILINE)
_COLUMNS = 100


class Refusal(Exception):
    """A request the scaffolder will not carry out; the message says why."""


@dataclass(frozen=True)
class Request:
    name: str
    kind: str
    inputs: int = 1


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise Refusal(
            f"invalid operator name {name!r}: use lower-case letters, digits and single "
            "underscores, starting with a letter (like vector_add)"
        )
    if len(name) > _MAX_NAME_LENGTH:
        raise Refusal(f"invalid operator name {name!r}: longer than {_MAX_NAME_LENGTH} characters")
    if keyword.iskeyword(name) or name in _CPP_KEYWORDS:
        raise Refusal(f"invalid operator name {name!r}: a Python or C++ keyword")
    if name in _API_NAMES or name.startswith("prepare_"):
        raise Refusal(f"invalid operator name {name!r}: the Python API already uses it")


def check_request(request: Request, workspace: Path) -> None:
    check_name(request.name)
    if request.kind not in KINDS:
        raise Refusal(f"unknown kind {request.kind!r}: expected one of {', '.join(KINDS)}")
    if request.kind == "elementwise" and request.inputs not in (1, 2):
        raise Refusal(f"--inputs={request.inputs}: an elementwise operator takes 1 or 2 inputs")
    if request.kind == "reduction" and request.inputs != 1:
        raise Refusal("--inputs: a reduction takes exactly one input")
    folder = workspace / "ops" / request.name
    if folder.exists():
        raise Refusal(f"operator {request.name!r} exists: {folder} is already there")
    if request.name in registered_operators((workspace / REGISTRY).read_text()):
        raise Refusal(f"operator {request.name!r} exists: {REGISTRY} already lists it")


def _operators_list(registry: str) -> re.Match:
    match = _OPERATORS_LIST.search(registry)
    if match is None:
        raise Refusal(
            f"cannot add the operator to {REGISTRY}: it has no `OPERATORS = [` list with one "
            '`    "<op>",` line per operator'
        )
    return match


def registered_operators(registry: str) -> list[str]:
    return re.findall(r'"([a-z0-9_]+)"', _operators_list(registry).group("body"))


def with_operator(registry: str, name: str) -> str:
    """registry.bzl's text with `"<name>",` as the last entry of OPERATORS."""
    end = _operators_list(registry).end("body")
    return registry[:end] + f'    "{name}",\n' + registry[end:]


def camel_case(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def c_call(head: str, arguments: list[str], tail: str, pointer_style: str = "cpp") -> str:
    """`head(arg, arg, ...)tail` wrapped at _COLUMNS as clang-format lays out the existing
    operators' signatures: continuation lines aligned after the parenthesis, or, when not
    even the first argument fits there, every argument on lines indented by four."""
    if pointer_style == "c":
        arguments = [re.sub(r"(\w)\* ", r"\1 *", argument) for argument in arguments]
    if len(f"{head}({arguments[0]},") <= _COLUMNS:
        indent, lines, line = " " * (len(head) + 1), [], head + "("
    else:
        indent, lines, line = " " * 4, [head + "("], " " * 4
    for index, argument in enumerate(arguments):
        piece = argument + (", " if index + 1 < len(arguments) else tail)
        if line.strip() and not line.endswith("(") and len(line + piece.rstrip()) > _COLUMNS:
            lines.append(line.rstrip())
            line = indent
        line += piece
    return "\n".join(lines + [line])


def signatures(request: Request, inputs: list[str]) -> dict[str, tuple[str, list[str]]]:
    """Each of the four C functions: its head (return type and name) and parameters."""
    op, handle = request.name, f"oprt_{request.name}_descriptor_t"
    view = "const oprt_tensor_view_t* "
    if request.kind == "elementwise":
        create_params = [view + name for name in ["out", *inputs]]
        workspace_params = [f"{handle} desc", "size_t* bytes"]
    else:
        create_params = [view + "out", view + "in", "int32_t axis"]
        workspace_params = [f"{handle} desc", "size_t* workspace_size"]
    pointers = ["const void* " + name for name in inputs]
    return {
        "create": (f"oprt_status_t oprt_create_{op}_descriptor", [f"{handle}* desc", *create_params]),
        "workspace": (f"oprt_status_t oprt_get_{op}_workspace_size", workspace_params),
        "execute": (
            f"oprt_status_t oprt_execute_{op}",
            [f"{handle} desc", "void* workspace", "size_t workspace_size", "void* out", *pointers,
             "void* stream"],
        ),
        "destroy": (f"oprt_status_t oprt_destroy_{op}_descriptor", [f"{handle} desc"]),
    }


def substitutions(request: Request) -> dict[str, str]:
    op, kind = request.name, request.kind
    # C parameter names of the inputs and their names in the op table and in Python.
    if kind == "reduction":
        c_inputs, table_inputs = ["in"], ["input"]
    elif request.inputs == 1:
        c_inputs, table_inputs = ["in"], ["input"]
    else:
        c_inputs = table_inputs = ["a", "b"]
    functions = signatures(request, c_inputs)
    values = {
        "op": op,
        "Op": camel_case(op),
        "kind": kind,
        "num_inputs": str(len(c_inputs)),
        "c_inputs": ", ".join(c_inputs),
        "quoted_input_names": ", ".join(f'"{name}"' for name in table_inputs),
        "input_list": ", ".join(table_inputs),
        "out_and_inputs": ", ".join(["out", *table_inputs[:-1]]) + " and " + table_inputs[-1],
        "inputs_broadcast": (
            "input broadcasts" if len(table_inputs) == 1 else " and ".join(table_inputs) + " broadcast"
        ),
        "one_element_of_each": (
            "one input element" if len(table_inputs) == 1 else "one element of each input"
        ),
        "functor_params": ", ".join("float " + name for name in (["x"] if len(c_inputs) == 1 else c_inputs)),
        "placeholder": "x" if len(c_inputs) == 1 else c_inputs[0],
        "placeholder_tensor": table_inputs[0],
        "tilelang_eager_declarations": "\n".join(
            f"    {name}: T.Tensor[[n], dtype]" for name in table_inputs
        ),
        "tilelang_lazy_params": ", ".join(f"{name}: T.Tensor((n,), dtype)" for name in table_inputs),
        "reference_params": ", ".join(f"{name}: torch.Tensor" for name in table_inputs),
        "declarations": "\n".join(
            c_call("OPRT_API " + head, params, ");", pointer_style="c")
            for head, params in functions.values()
        ),
        "guard": f"OPERATOR_RUNTIME_OPS_{op.upper()}_H_",
    }
    for function, (head, params) in functions.items():
        values[f"{function}_signature"] = c_call(head, params, ")")
    # The front end's calls into the family, wrapped like the signatures.
    handle = f"k{values['Op']}"
    if kind == "elementwise":
        values["create_call"] = c_call(
            "  return oprt::create_elementwise",
            [handle, "oprt::thread_backend()", "desc", "out", "inputs",
             f"oprt::{values['Op']}Functor{{}}"], ");")
        values["execute_call"] = c_call(
            "  return oprt::execute_elementwise",
            [handle, "desc", "workspace", "workspace_size", "out", "inputs", "stream"], ");")
    else:
        values["execute_call"] = c_call(
            "  return oprt::execute_reduction",
            [handle, "desc", "workspace", "workspace_size", "out", "in", "stream"], ");")
    return values


def planned_files(request: Request) -> dict[Path, str]:
    """The files the scaffolder writes for request, by path relative to the workspace."""
    values = substitutions(request)
    op = request.name
    folder = Path("ops") / op
    sources = {
        folder / "BUILD.bazel": "BUILD.bazel.tmpl",
        folder / f"{op}.h": f"{request.kind}/op.h.tmpl",
        folder / f"{op}.cc": f"{request.kind}/op.cc.tmpl",
        folder / "cpu" / f"{op}_cpu.cc": f"{request.kind}/op_cpu.cc.tmpl",
        folder / "nvidia" / f"{op}.cu": f"{request.kind}/op.cu.tmpl",
        folder / "cases.py": f"{request.kind}/cases.py.tmpl",
        folder / "tilelang" / f"{op}.py": f"{request.kind}/op_tilelang.py.tmpl",
    }
    if request.kind == "elementwise":
        sources[folder / f"{op}_functor.h"] = "elementwise/op_functor.h.tmpl"
    files = {}
    for path, template in sources.items():
        fields = dict(values)
        if path.name.endswith("_functor.h"):
            fields["guard"] = f"OPERATOR_RUNTIME_OPS_{op.upper()}_{op.upper()}_FUNCTOR_H_"
        files[path] = Template((TEMPLATES / template).read_text()).substitute(fields)
    return files


def scaffold(request: Request, workspace: Path) -> list[Path]:
    """Writes the operator's folder and registry line; returns the paths written."""
    check_request(request, workspace)
    registry = workspace / REGISTRY
    updated_registry = with_operator(registry.read_text(), request.name)
    files = planned_files(request)
    for path, text in files.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    registry.write_text(updated_registry)
    return sorted(files) + [REGISTRY]


def default_workspace() -> Path:
    return Path(os.environ.get("BUILD_WORKSPACE_DIRECTORY", os.getcwd()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the operator's name, e.g. gelu")
    parser.add_argument("--kind", required=True, help=" or ".join(KINDS))
    parser.add_argument("--inputs", type=int, default=1, help="elementwise only: 1 or 2 inputs")
    parser.add_argument("--workspace", type=Path, default=None, help="default: where bazel run ran")
    args = parser.parse_args(argv)
    workspace = (args.workspace or default_workspace()).resolve()
    if not (workspace / "MODULE.bazel").is_file() or not (workspace / REGISTRY).is_file():
        print(f"new_op: {workspace} is not the oprt workspace (no MODULE.bazel and {REGISTRY})",
              file=sys.stderr)
        return 2
    request = Request(args.name, args.kind, args.inputs)
    try:
        written = scaffold(request, workspace)
    except Refusal as refusal:
        print(f"new_op: {refusal}", file=sys.stderr)
        return 2
    print(f"new_op: wrote {len(written)} files in {workspace}:")
    for path in written:
        print(f"  {path}")
    op = request.name
    todo = (
        f"operator() in ops/{op}/{op}_functor.h"
        if request.kind == "elementwise"
        else f"execute in ops/{op}/cpu/{op}_cpu.cc and ops/{op}/nvidia/{op}.cu"
    )
    print(
        f"Next: write {todo} and reference() in ops/{op}/cases.py (marked ======), then\n"
        f"  tools/bazel test //ops/{op}:test_cpu --config=cpu"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
