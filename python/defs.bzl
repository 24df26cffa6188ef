"""operator_runtime_binding: _C and its wheel, built for one interpreter and torch release.

_C's torch kernels compile against a torch release's C++ API and _C against an
interpreter's headers, so a wheel fits one (Python, torch) pair. Each pair is a venv of
//tools/python:extensions.bzl; the one Bazel runs with gives //python:wheel, another
(the GPU machine's Python 3.12 and torch 2.11) gives a wheel for that host.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("//tools/cc:defs.bzl", "CXX_STANDARD_COPTS")
load("//tools/pybind:defs.bzl", "pybind_extension")
load("//tools/wheel:defs.bzl", "oprt_wheel")

def operator_runtime_binding(name, prefix, venv, python_tag, **kwargs):
    """Declares the wheel `name`, and `<prefix>operator_runtime/_C.so` and its build info in it.

    Args:
      name: the wheel target.
      prefix: folder (under python/) of this pair's files: "" for the venv Bazel runs
        with, whose _C the in-tree package imports; "cp312_torch2_11/" for another.
      venv: the venv repository, e.g. "@python_venv".
      python_tag: its interpreter's wheel tag ("cp312"); the wheel is refused if it
        disagrees with the venv's build_info.py.
      **kwargs: passed to every target (tags = ["manual"], target_compatible_with, ...).
    """

    # The CPU and CUDA kernels of the oprt:: torch.library ops and the reads of tensor
    # objects, against the venv torch's C++ API (its headers and libc10/libtorch_cpu)
    # and the interpreter's headers, and the runner that puts the cpu
    # backend's pieces on torch's OpenMP threads (at::parallel_for is inline OpenMP, so
    # this compiles with it; at run time libgomp.so.1 is the copy torch has loaded).
    cc_library(
        name = prefix + "torch_kernels",
        srcs = ["//runtime:python/torch_kernels.cc"],
        hdrs = ["//runtime:python/torch_kernels.h"],
        copts = CXX_STANDARD_COPTS + ["-fvisibility=hidden", "-fopenmp"],
        linkopts = ["-fopenmp"],
        deps = [
            ":descriptor_cache",
            venv + "//:python_headers",
            venv + "//:torch",
        ],
        **kwargs
    )

    # operator_runtime._C: the thin binding over the C op table (runtime/python/module.cc).
    pybind_extension(
        name = prefix + "operator_runtime/_C",
        srcs = [
            "//runtime:python/cached_call.cc",
            "//runtime:python/cached_call.h",
            "//runtime:python/module.cc",
        ],
        venv = venv,
        deps = [
            ":descriptor_cache",
            ":" + prefix + "torch_kernels",
            "//:operator_runtime",
        ],
        **kwargs
    )

    # What this _C was built for (Python tag, torch release), read by the package's
    # import-time check and by the wheel's torch requirement.
    native.genrule(
        name = prefix + "build_info",
        srcs = [venv + "//:build_info.py"],
        outs = [prefix + "operator_runtime/_build_info.py"],
        cmd = "cp $< $@",
        **kwargs
    )

    # The package, its typed stubs, _C (the whole C runtime linked in, CUDA kernels
    # included under --config=nvidia) and its build info; _C is tagged for the
    # interpreter's ABI, so pip refuses it on another, and torch is required at the
    # release _C compiled against, without a CUDA pin.
    oprt_wheel(
        name = name,
        srcs = [
            ":" + prefix + "operator_runtime/_C.so",
            ":" + prefix + "operator_runtime/_build_info.py",
            ":package_files",
        ],
        abi = python_tag,
        build_info = ":" + prefix + "operator_runtime/_build_info.py",
        distribution = "oprt",
        platform = "linux_x86_64",
        python_tag = python_tag,
        strip_path_prefixes = ["python/" + prefix.rstrip("/"), "python"] if prefix else ["python"],
        summary = "Memory-bound operators (copy, vector_add, relu, reduce_sum, softmax, and their gradients) as torch ops",
        version = "0.1.0",
        **kwargs
    )
