"""The tilelang backend's targets of one operator (called by oprt_operator in defs.bzl).

ops/<op>/tilelang/<op>.py holds the operator's TileLang kernels, each in two
styles (`<kernel>_eager` and `<kernel>_lazy`); python/operator_runtime/tilelang/
runs them for backend="tilelang".
"""

load("@rules_python//python:defs.bzl", "py_library", "py_test")

STYLES = ["eager", "lazy"]

# TileLang compiles with the hermetic nvcc (python/operator_runtime/tilelang/compiler.py
# sets CUDA_HOME from OPRT_TILELANG_NVCC), as the cuda_library targets do.
_NVCC = ["@cuda//:nvcc", "@cuda//:nvcc_files"]
_NVCC_ENV = {"OPRT_TILELANG_NVCC": "$(rootpath @cuda//:nvcc)"}

_TEST_DEPS = [
    ":cases",
    "//ops:tilelang_kernels",
    "//python:operator_runtime",
    "//python/operator_runtime_testing",
]

def oprt_tilelang(name):
    """Targets: `:tilelang_kernels`, `:tilelang_compile_test` (CPU: every kernel to an
    sm_90 cubin with the hermetic nvcc, elementwise kernels run on TileLang's "c"
    target), `:test_tilelang_<style>` per style (tag requires-gpu, the shared case
    tables on backend="tilelang") and the suite `:test_tilelang` of both styles."""
    py_library(
        name = "tilelang_kernels",
        srcs = native.glob(["tilelang/*.py"]),
        deps = ["//python:operator_runtime"],
        visibility = ["//visibility:public"],
    )
    py_test(
        name = "tilelang_compile_test",
        srcs = ["//python/operator_runtime_testing:tilelang_compile_test.py"],
        main = "//python/operator_runtime_testing:tilelang_compile_test.py",
        args = ["--op=" + name],
        data = _NVCC,
        env = _NVCC_ENV,
        deps = _TEST_DEPS,
        # A shard per compile test, (style, dtype): unsharded, softmax's compilations took
        # 505 s on 2 cores, over medium's 300 s; a shard takes up to about 100 s.
        shard_count = 6,
        size = "medium",
    )
    for style in STYLES:
        py_test(
            name = "test_tilelang_" + style,
            srcs = ["//python/operator_runtime_testing:op_test_main.py"],
            main = "//python/operator_runtime_testing:op_test_main.py",
            args = ["--op=" + name, "--backend=tilelang"],
            data = _NVCC,
            env = dict(_NVCC_ENV, OPRT_TILELANG_STYLE = style),
            deps = _TEST_DEPS,
            size = "medium",
            tags = ["requires-gpu"],
            target_compatible_with = ["//tools/platforms:nvidia"],
        )
    native.test_suite(
        name = "test_tilelang",
        tests = [":test_tilelang_" + style for style in STYLES],
    )
