"""Generates a new operator folder that builds at once and whose tests fail with "not implemented".

    tools/bazel run //tools:new_op -- --name=gelu --kind=elementwise [--inputs=2]
    tools/bazel run //tools:new_op -- --name=relu_backward --kind=elementwise \
        --inputs=dy,x --params=negative_slope=0.0
    tools/bazel run //tools:new_op -- --name=reduce_max --kind=reduction
    tools/bazel run //tools:new_op -- --name=softmax_backward --kind=normalization --inputs=dy,y

It writes `ops/<name>/` (public header, front end, cpu/ and nvidia/ backends, cases.py,
BUILD.bazel calling `oprt_operator`, TileLang kernels; an elementwise operator also gets
its functor header) and adds `"<name>"` to `OPERATORS` in `ops/registry.bzl`. Under `bazel
run` it writes into the workspace it was run from ($BUILD_WORKSPACE_DIRECTORY); `--workspace` names another.

An elementwise operator takes one input (`input`) or two; `--inputs` gives their number
(2: `a` and `b`) or their names (`--inputs=dy,x`), and `--params` its float parameters
with their defaults (`--params=negative_slope=0.0,scale=1`): each becomes an argument of
the C create function and of the Python API, an op-table entry and a field of the functor.
The reduction family works along an axis, its one parameter `dim`: a `reduction`
(OPRT_KIND_REDUCTION, like reduce_sum) takes one input and drops or keeps the axis as 1; a
`normalization` (OPRT_KIND_NORMALIZATION, like softmax) writes out in its inputs' shape and
takes one input, or two of one shape (`--inputs=dy,y`, like softmax_backward).

What is left to write is marked `======` in the generated files:
- elementwise: `operator()` of `ops/<name>/<name>_functor.h` (one functor for cpu and
  nvidia; until then every backend fails with "<name>: not implemented") and `reference()`
  in `ops/<name>/cases.py`;
- reduction, normalization: the `execute` of `cpu/<name>_cpu.cc` and of `nvidia/<name>.cu`, and
  `reference()` in `cases.py`.

It refuses, with a message and exit status 2, a name that is not a valid operator name,
an operator that exists, an unknown kind, inputs or parameters the kind cannot take or
whose names collide (with each other, keywords, or names the generated code uses), or a
registry it cannot edit; it then writes nothing.
"""

from __future__ import annotations

import argparse
import keyword
import math
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from string import Template

KINDS = ("elementwise", "reduction", "normalization")
# The kinds built on runtime/reduction/reduction.h (their templates are in reduction/), with
# the C kind of each.
REDUCTION_FAMILY = {"reduction": "OPRT_KIND_REDUCTION", "normalization": "OPRT_KIND_NORMALIZATION"}
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
# Names the generated files use beside the operands, so no input or parameter may take
# them: the C functions' other arguments and locals (desc, workspace, workspace_size,
# stream, bytes, inputs, params, dim), the Python API's (out, backend, keepdim, dim), the
# TileLang kernels' (i, n, dtype; m and row in row kernels) and cases.py's module (torch).
_RESERVED_OPERAND_NAMES = frozenset(
    ("backend", "bytes", "desc", "dim", "dtype", "i", "inputs", "keepdim", "m", "n", "out",
     "params", "row", "stream", "torch", "workspace", "workspace_size")
)
# The one input of an operator is `input` in the op table and in Python, and `in` in C,
# as relu and reduce_sum name it (`in` is a Python keyword).
DEFAULT_INPUT = "input"
_C_NAMES = {DEFAULT_INPUT: "in"}
# --inputs=<count>: the names an operator of that many inputs gets.
_COUNTED_INPUTS = {1: (DEFAULT_INPUT,), 2: ("a", "b")}
# The most inputs of each kind: kMaxElementwiseInputs in runtime/elementwise/elementwise.h;
# a reduction's out has another shape than its input, so create_reduction allows a second
# input (of the first's shape) only to a normalization.
_MAX_INPUTS = {"elementwise": 2, "reduction": 1, "normalization": 2}
_KIND_NOUNS = {"elementwise": "an elementwise operator", "reduction": "a reduction",
               "normalization": "a normalization"}
# A functor travels in kMaxElementwiseParamBytes (32) bytes of the descriptor, 8 floats;
# the binding's descriptor cache keys on at most kMaxParams (8) values.
_MAX_PARAMS = 8
_OPERATORS_LIST = re.compile(r"^OPERATORS = \[\n(?P<body>(?:    \"[a-z0-9_]+\",\n)*)\]$", re.MULTILINE)
_COLUMNS = 100


class Refusal(Exception):
    """A request the scaffolder will not carry out; the message says why."""


@dataclass(frozen=True)
class Request:
    name: str
    kind: str
    inputs: tuple[str, ...] = (DEFAULT_INPUT,)
    # (name, default) of each float parameter, in the order of the C create function.
    params: tuple[tuple[str, float], ...] = ()


def parse_inputs(text: str) -> tuple[str, ...]:
    """--inputs: a count (1 or 2, named as _COUNTED_INPUTS) or comma-separated names."""
    if text.isdigit():
        if int(text) not in _COUNTED_INPUTS:
            raise Refusal(f"--inputs={text}: give 1 or 2, or the inputs' names (like --inputs=dy,x)")
        return _COUNTED_INPUTS[int(text)]
    return tuple(text.split(","))


def parse_params(text: str) -> tuple[tuple[str, float], ...]:
    """--params: comma-separated `name=default` entries; each default a finite number."""
    params = []
    for entry in filter(None, text.split(",")):
        name, equals, default = entry.partition("=")
        if not equals:
            raise Refusal(f"--params: {entry!r} has no default; write {entry}=<number>")
        try:
            value = float(default)
        except ValueError:
            raise Refusal(f"--params: the default of {name!r} is {default!r}, not a number") from None
        if not math.isfinite(value):
            raise Refusal(f"--params: the default of {name!r} is {default!r}; it must be finite")
        params.append((name, value))
    return tuple(params)


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


def check_operand_name(role: str, name: str) -> None:
    """An input's or a parameter's name: a C, Python and torch schema argument name."""
    if not _NAME.fullmatch(name) or len(name) > _MAX_NAME_LENGTH:
        raise Refusal(
            f"invalid {role} name {name!r}: use at most {_MAX_NAME_LENGTH} lower-case letters, "
            "digits and single underscores, starting with a letter (like negative_slope)"
        )
    if keyword.iskeyword(name) or name in _CPP_KEYWORDS:
        raise Refusal(f"invalid {role} name {name!r}: a Python or C++ keyword")
    if name in _RESERVED_OPERAND_NAMES:
        raise Refusal(f"invalid {role} name {name!r}: the generated code uses it for something else")


def check_operands(request: Request) -> None:
    most = _MAX_INPUTS[request.kind]
    if not 1 <= len(request.inputs) <= most:
        counts = "exactly one input" if most == 1 else f"1 or {most} inputs"
        raise Refusal(f"--inputs={','.join(request.inputs)}: {_KIND_NOUNS[request.kind]} takes {counts}")
    if request.kind in REDUCTION_FAMILY and request.params:
        raise Refusal(f"--params: {_KIND_NOUNS[request.kind]}'s only parameter is its axis, dim")
    if len(request.params) > _MAX_PARAMS:
        raise Refusal(
            f"--params: {len(request.params)} parameters; a functor holds at most {_MAX_PARAMS}"
        )
    seen = set()
    roles = [("input", name) for name in request.inputs]
    roles += [("parameter", name) for name, _ in request.params]
    for role, name in roles:
        check_operand_name(role, name)
        if name in seen:
            raise Refusal(f"{role} name {name!r} is used twice: inputs and parameters need distinct names")
        seen.add(name)


def check_request(request: Request, workspace: Path) -> None:
    check_name(request.name)
    if request.kind not in KINDS:
        raise Refusal(f"unknown kind {request.kind!r}: expected one of {', '.join(KINDS)}")
    check_operands(request)
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


def c_call(head: str, arguments: list[str], tail: str, pointer_style: str = "cpp",
           bracket: str = "(") -> str:
    """`head(arg, arg, ...)tail` wrapped at _COLUMNS as clang-format lays out the existing
    operators' signatures: continuation lines aligned after the parenthesis, or, when not
    even the first argument fits there, every argument on lines indented by four. The
    same for template arguments (bracket `<`) and braced initialisers (`{`)."""
    if pointer_style == "c":
        arguments = [re.sub(r"(\w)\* ", r"\1 *", argument) for argument in arguments]
    if len(f"{head}{bracket}{arguments[0]},") <= _COLUMNS:
        indent, lines, line = " " * (len(head) + 1), [], head + bracket
    else:
        indent, lines, line = " " * 4, [head + bracket], " " * 4
    for index, argument in enumerate(arguments):
        piece = argument + (", " if index + 1 < len(arguments) else tail)
        if line.strip() and not line.endswith(bracket) and len(line + piece.rstrip()) > _COLUMNS:
            lines.append(line.rstrip())
            line = indent
        line += piece
    return "\n".join(lines + [line])


def c_name(input_name: str) -> str:
    return _C_NAMES.get(input_name, input_name)


def signatures(request: Request) -> dict[str, tuple[str, list[str]]]:
    """Each of the four C functions: its head (return type and name) and parameters."""
    op, handle = request.name, f"oprt_{request.name}_descriptor_t"
    view = "const oprt_tensor_view_t* "
    inputs = [c_name(name) for name in request.inputs]
    if request.kind == "elementwise":
        create_params = [view + name for name in ["out", *inputs]]
        create_params += ["float " + name for name, _ in request.params]
        workspace_params = [f"{handle} desc", "size_t* bytes"]
    else:
        create_params = [view + name for name in ["out", *inputs]] + ["int32_t dim"]
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


def front_end_table(request: Request, Op: str) -> dict[str, str]:
    """The front end's op-table declarations: parameter names and defaults, the function
    that builds the functor from the table's values, and the entry."""
    op, functor, names = request.name, f"oprt::{Op}Functor", [name for name, _ in request.params]
    if not names:
        return {
            "param_table": "",
            "from_table": "",
            "param_fields": "0, nullptr, nullptr",
            "table_entry": c_call("    oprt::ElementwiseEntry", [f"k{Op}", functor], ">::table();",
                                  bracket="<"),
        }
    from_table = c_call(
        f"  return {functor}",
        [f"static_cast<float>(params[{index}])" for index in range(len(names))], "};",
        bracket="{",
    )
    return {
        "param_table": (
            c_call("constexpr const char* kParamNames[] = ", [f'"{name}"' for name in names], "};",
                   bracket="{") + "\n"
            + c_call("constexpr double kParamDefaults[] = ",
                     [repr(default) for _, default in request.params], "};", bracket="{") + "\n"
        ),
        "param_fields": f"{len(names)}, kParamNames, kParamDefaults",
        "from_table": f"\n\n{functor} {op}_from_table(const double* params) {{\n{from_table}\n}}\n",
        "table_entry": c_call("    oprt::ElementwiseEntry", [f"k{Op}", functor, f"{op}_from_table"],
                              ">::table();", bracket="<"),
    }


def reduction_family_values(request: Request, Op: str) -> dict[str, str]:
    """What a reduction's and a normalization's files differ in: the C kind, the inputs'
    names in the op table, whether out keeps the axis, and the operator to copy from."""
    op, inputs = request.name, list(request.inputs)
    keeps_axis = request.kind == "normalization"
    named = inputs != [DEFAULT_INPUT]
    # ReductionOp's defaults are one input named "input".
    fields = [f'"{op}"', REDUCTION_FAMILY[request.kind]]
    if named:
        fields += [str(len(inputs)), "kInputNames"]
    c_inputs = [c_name(name) for name in inputs]
    if len(inputs) == 1:
        example = "softmax" if keeps_axis else "reduce_sum"
        of_inputs, shapes = c_inputs[0], f"{c_inputs[0]} and out"
    else:
        example = "softmax_backward"
        of_inputs, shapes = " and ".join(c_inputs), ", ".join(c_inputs) + " and out"
    if keeps_axis:
        layout = (
            f"{shapes} have one shape and one dtype (f32, f16 or bf16); any of them may have any "
            f"strides. out may be {' or '.join(c_inputs)} itself (same data and strides: in place) "
            "but must not overlap it otherwise."
        )
    else:
        layout = (
            f"out has {c_inputs[0]}'s shape with the axis removed or kept as 1; {shapes} may have "
            "any strides, share one dtype (f32, f16 or bf16) and must not overlap."
        )
    # The header's paragraph, wrapped inside its /* ... */ comment as the operators' headers are.
    header = "\n * ".join(textwrap.wrap(
        f"axis may be negative (counted from the end). {layout} Workspace: what "
        "get_workspace_size says.", 80 - len(" * ")))
    # The plan's fields of the first and the second input.
    walk = [f"with {name} = inputs[{index}], its element i is "
            f"{name}[start.{field} + i * plan.{field}_axis_stride]"
            for index, (name, field) in enumerate(zip(c_inputs, ("in", "second_in")))]
    result = ("its element i goes to out[start.out + i * plan.out_axis_stride]" if keeps_axis
              else "its result goes to out[start.out]")
    cpu_comment = "\n// ".join(textwrap.wrap(
        "The plan (runtime/reduction/reduction.h) holds plan.rows rows of plan.row_length "
        "elements of dtype plan.dtype. Row r starts at RowStart start = "
        f"row_start(plan.row_offsets, r); {'; '.join(walk)}; {result}. dispatch_dtype gives the "
        "storage type T; to_float and from_float<T> convert. "
        f"ops/{example}/cpu/{example}_cpu.cc is a complete kernel of this shape.",
        _COLUMNS - len("// "), break_on_hyphens=False))
    out_extents = "m, n" if keeps_axis else "m"
    out_shape = "(m, n)" if keeps_axis else "(m,)"
    return {
        "family": "reduction",
        "input_names_table": (
            c_call("constexpr const char* kInputNames[] = ", [f'"{name}"' for name in inputs], "};",
                   bracket="{") + "\n" if named else ""
        ),
        "reduction_op": c_call(f"constexpr oprt::ReductionOp k{Op} = ", fields, "};", bracket="{"),
        "of_inputs": of_inputs,
        "header_paragraph": header,
        "cpu_comment": cpu_comment,
        "example": example,
        "rows_result": (
            "out[row + i, j] for rows row + i < m (i < BLOCK_M), columns j < n"
            if keeps_axis else "out[row + i] for the rows row .. row + BLOCK_M - 1 (< m)"
        ),
        "tilelang_rows_params": ", ".join(["row", *inputs, "out", "m", "n"]),
        "tilelang_eager_declarations": "\n".join(
            f"    {name}: T.Tensor[[m, n], dtype]" for name in inputs
        ),
        "tilelang_out_extents": f"[{out_extents}]",
        "tilelang_lazy_params": ", ".join(
            [*(f"{name}: T.Tensor((m, n), dtype)" for name in inputs),
             f"out: T.Tensor({out_shape}, dtype)"]
        ),
        "reference_params": ", ".join(
            [*(f"{name}: torch.Tensor" for name in inputs), "dim: int = -1",
             *([] if keeps_axis else ["keepdim: bool = False"])]
        ),
        # axis_cases' own default is one input.
        "axis_cases_arguments": f"keeps_axis={keeps_axis}"
        + ("" if len(inputs) == 1 else f", num_inputs={len(inputs)}"),
        "benchmark_shapes": "(shape,)" if len(inputs) == 1 else f"(shape,) * {len(inputs)}",
    }


def substitutions(request: Request) -> dict[str, str]:
    op, kind = request.name, request.kind
    # The inputs' names in the op table and in Python, in C, and in the functor.
    table_inputs = list(request.inputs)
    c_inputs = [c_name(name) for name in table_inputs]
    functor_inputs = ["x"] if table_inputs == [DEFAULT_INPUT] else table_inputs
    param_names = [name for name, _ in request.params]
    params_dict = "{" + ", ".join(f'"{name}": {default!r}' for name, default in request.params) + "}"
    functions = signatures(request)
    values = {
        "op": op,
        "Op": camel_case(op),
        "kind": kind,
        "family": kind,
        "num_inputs": str(len(c_inputs)),
        "c_inputs": ", ".join(c_inputs),
        "quoted_input_names": ", ".join(f'"{name}"' for name in table_inputs),
        # The header's first line, wrapped inside its /* ... */ comment.
        "summary": "\n * ".join(
            textwrap.wrap(f"{op}: out = {op}({', '.join(table_inputs + param_names)}), element for element.",
                          _COLUMNS - len("/* "))
        ),
        "out_and_inputs": ", ".join(["out", *table_inputs[:-1]]) + " and " + table_inputs[-1],
        "inputs_broadcast": (
            "input broadcasts" if len(table_inputs) == 1 else " and ".join(table_inputs) + " broadcast"
        ),
        "one_element_of_each": (
            "one input element" if len(table_inputs) == 1 else "one element of each input"
        ),
        "functor_fields": "".join(f"  float {name};\n" for name in param_names),
        "functor_params": ", ".join("float " + name for name in functor_inputs),
        "placeholder": functor_inputs[0],
        "placeholder_tensor": table_inputs[0],
        "tilelang_element_params": ", ".join(["i", *table_inputs, "out", *param_names]),
        "tilelang_operands": ", ".join([*table_inputs, "out", *param_names]),
        "tilelang_eager_params": ", ".join(
            [*table_inputs, "out", *(f"{name}: T.float32" for name in param_names), 'dtype="float32"']
        ),
        "tilelang_eager_declarations": "\n".join(
            f"    {name}: T.Tensor[[n], dtype]" for name in table_inputs
        ),
        "tilelang_lazy_params": ", ".join(
            [*(f"{name}: T.Tensor((n,), dtype)" for name in [*table_inputs, "out"]),
             *(f"{name}: T.float32" for name in param_names)]
        ),
        "reference_params": ", ".join(
            [*(f"{name}: torch.Tensor" for name in table_inputs),
             *(f"{name}: float = {default!r}" for name, default in request.params)]
        ),
        "params_dict": params_dict,
        "benchmark_params": f", {params_dict}" if param_names else "",
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
        values.update(front_end_table(request, values["Op"]))
        functor = f"oprt::{values['Op']}Functor"
        *lines, last = c_call(
            "  return oprt::create_elementwise",
            [handle, "oprt::thread_backend()", "desc", "out", "inputs",
             f"{functor}{{{', '.join(param_names)}}}"], ");").split("\n")
        if len(last) > _COLUMNS:  # the functor's initialiser alone is too long: wrap its braces
            last = c_call(last[: len(last) - len(last.lstrip())] + functor, param_names, "});",
                          bracket="{")
        values["create_call"] = "\n".join([*lines, last])
        values["execute_call"] = c_call(
            "  return oprt::execute_elementwise",
            [handle, "desc", "workspace", "workspace_size", "out", "inputs", "stream"], ");")
    else:
        values.update(reduction_family_values(request, values["Op"]))
        values["create_call"] = c_call(
            "  return oprt::create_reduction",
            [handle, "oprt::thread_backend()", "desc", "out", "inputs", "dim"], ");")
        values["execute_call"] = c_call(
            "  return oprt::execute_reduction",
            [handle, "desc", "workspace", "workspace_size", "out", "inputs", "stream"], ");")
    return values


def planned_files(request: Request) -> dict[Path, str]:
    """The files the scaffolder writes for request, by path relative to the workspace."""
    values = substitutions(request)
    op, family = request.name, values["family"]
    folder = Path("ops") / op
    sources = {
        folder / "BUILD.bazel": "BUILD.bazel.tmpl",
        folder / f"{op}.h": f"{family}/op.h.tmpl",
        folder / f"{op}.cc": f"{family}/op.cc.tmpl",
        folder / "cpu" / f"{op}_cpu.cc": f"{family}/op_cpu.cc.tmpl",
        folder / "nvidia" / f"{op}.cu": f"{family}/op.cu.tmpl",
        folder / "cases.py": f"{family}/cases.py.tmpl",
        folder / "tilelang" / f"{op}.py": f"{family}/op_tilelang.py.tmpl",
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
    parser.add_argument(
        "--inputs", default="1",
        help="1 or 2 (named input, or a and b), or the names, e.g. dy,x; a reduction takes one",
    )
    parser.add_argument(
        "--params", default="",
        help="elementwise only: float parameters with defaults, e.g. negative_slope=0.0",
    )
    parser.add_argument("--workspace", type=Path, default=None, help="default: where bazel run ran")
    args = parser.parse_args(argv)
    workspace = (args.workspace or default_workspace()).resolve()
    if not (workspace / "MODULE.bazel").is_file() or not (workspace / REGISTRY).is_file():
        print(f"new_op: {workspace} is not the oprt workspace (no MODULE.bazel and {REGISTRY})",
              file=sys.stderr)
        return 2
    try:
        request = Request(args.name, args.kind, parse_inputs(args.inputs), parse_params(args.params))
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
