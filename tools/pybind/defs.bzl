"""pybind_extension: a pybind11 module built against a venv's interpreter (@python_venv by default).

    load("//tools/pybind:defs.bzl", "pybind_extension")

    pybind_extension(name = "_C", srcs = ["module.cc"], deps = [":kernels"])
    py_library(name = "lib", data = [":_C.so"], ...)   # then `import _C`

Like pybind11_bazel's macro of the same name: a `cc_binary(name = name + ".so",
linkshared = True)` whose own sources compile with hidden visibility, so they export
only PyInit_<name>. It does not link libpython: the interpreter that imports the module
provides the Py* symbols.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary")
load("//tools/cc:defs.bzl", "CXX_STANDARD_COPTS")

def pybind_extension(name, srcs, deps = [], copts = [], linkopts = [], venv = "@python_venv", **kwargs):
    """Declares `<name>.so`, a Python extension module importable as the last part of `name`.

    Args:
      name: module name; `operator_runtime/_C` gives operator_runtime/_C.so.
      srcs: C++ sources holding the PYBIND11_MODULE definition.
      deps: cc_library or device libraries the module calls.
      copts: extra compiler flags.
      linkopts: extra linker flags.
      venv: the //tools/python:extensions.bzl venv whose Python and pybind11 headers it uses.
      **kwargs: passed to cc_binary (visibility, tags, target_compatible_with, ...).
    """
    cc_binary(
        name = name + ".so",
        srcs = srcs,
        deps = deps + [venv + "//:pybind11"],
        # pybind11's own advice: hide the module's symbols so two modules built against
        # different pybind11 versions never share its internals.
        copts = CXX_STANDARD_COPTS + ["-fvisibility=hidden"] + copts,
        # Calls inside the module bind to the module's own definitions.
        linkopts = ["-Wl,-Bsymbolic"] + linkopts,
        linkshared = True,
        **kwargs
    )
