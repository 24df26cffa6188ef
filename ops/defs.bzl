"""One macro declares an operator: its libraries per backend, its case table and its tests.

An operator folder `ops/<op>/` holds `<op>.h` (public C header), `<op>.cc` (front end:
validation, dispatch, op-table entry), `cpu/*.cc`, `nvidia/*.cu`, `cases.py` and a
BUILD.bazel that calls `oprt_operator(name = "<op>", family = ...)`. Listing the op in
`ops/registry.bzl` links it into the runtime; nothing else names it.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@rules_python//python:defs.bzl", "py_library", "py_test")
load("//ops:tilelang.bzl", "oprt_tilelang")
load("//tools/cc:defs.bzl", "CPU_KERNEL_COPTS", "CXX_STANDARD_COPTS")
load("//tools/cuda:defs.bzl", "cuda_library")
load(":metax.bzl", "metax_operator")

# What each family of operators shares: the host plan library and the CUDA machinery.
_FAMILIES = {
    "elementwise": struct(
        host = "//runtime:elementwise",
        cuda = "//runtime:elementwise_cuda",
        cute = "//runtime:elementwise_cute",
    ),
    "reduction": struct(
        host = "//runtime:reduction",
        cuda = "//runtime:reduction_cuda",
        cute = None,
    ),
}

# The GPU backends: each is built only on its platform and its tests need a device.
_GPU_BACKENDS = {
    "nvidia": "//tools/platforms:nvidia",
}

def _test(name, op, backend, target_compatible_with = None, tags = []):
    py_test(
        name = name,
        srcs = ["//python/operator_runtime_testing:op_test_main.py"],
        main = "//python/operator_runtime_testing:op_test_main.py",
        args = ["--op=" + op, "--backend=" + backend],
        deps = [
            ":cases",
            "//python:operator_runtime",
            "//python/operator_runtime_testing",
        ],
        # GPU runs include > 2^31-element cases; the cpu tables take 10-45 s (softmax's
        # long-row cases), more under the sanitizers of //tests:sanitized.
        size = "medium",
        tags = tags,
        target_compatible_with = target_compatible_with,
    )

def oprt_operator(name, family, cute = False):
    """Declares operator `name` of `family` ("elementwise" or "reduction").

    `cute = True` gives the nvidia library the family's CuTe machinery, which its
    `nvidia/*.cu` uses under `#if OPRT_CUTE` (set by --@//tools/cuda:cute, tools/cuda).

    Targets: `:<name>` (every backend the platform builds, linked into the runtime),
    `:cases` (the case table), `:test_cpu`, `:test_<gpu>` (tag requires-gpu), the metax
    targets of ops/metax.bzl (`:metax`, `:metax_compat`, `:test_metax`, tag
    requires-metax), the tilelang targets of ops/tilelang.bzl and the suite `:test`,
    which runs the backends of the active config.
    """
    shared = _FAMILIES[family]
    if cute and not shared.cute:
        fail("%s: the %s family has no CuTe kernels; leave out cute = True" % (name, family))
    cc_library(
        name = "header",
        hdrs = [name + ".h"],
        include_prefix = "operator_runtime/ops",
        deps = ["//runtime:api"],
        visibility = ["//visibility:public"],
    )
    cc_library(
        name = "frontend",
        srcs = [name + ".cc"],
        hdrs = native.glob(["*_functor.h"]),
        copts = CXX_STANDARD_COPTS,
        deps = [":header", shared.host],
        alwayslink = True,
    )
    cc_library(
        name = "cpu",
        srcs = native.glob(["cpu/*.cc", "cpu/*.h"]),
        copts = CXX_STANDARD_COPTS + CPU_KERNEL_COPTS,
        deps = [":frontend"],
        alwayslink = True,
    )
    backend_deps = {}
    for backend, constraint in _GPU_BACKENDS.items():
        cuda_library(
            name = backend,
            srcs = native.glob([backend + "/*.cu"]),
            hdrs = native.glob([backend + "/*.cuh"]),
            deps = [":frontend", shared.cuda] + ([shared.cute] if cute else []),
            target_compatible_with = [constraint],
        )
        backend_deps[constraint] = [":" + backend]
    metax = metax_operator(name, family, _test)
    backend_deps.update(metax.backend_deps)
    backend_deps["//conditions:default"] = []
    cc_library(
        name = name,
        deps = [":frontend", ":cpu"] + select(backend_deps),
        visibility = ["//visibility:public"],
    )
    py_library(
        name = "cases",
        srcs = ["cases.py"],
        deps = ["//python/operator_runtime_testing"],
        visibility = ["//visibility:public"],
    )
    # What the GPU-runner bundle carries of this operator besides the library.
    native.filegroup(
        name = "bundle_files",
        srcs = [name + ".h", "cases.py"] + native.glob(["tilelang/*.py"]),
        visibility = ["//tools/gpu_runner:__pkg__"],
    )
    _test("test_cpu", name, "cpu")
    for backend, constraint in _GPU_BACKENDS.items():
        _test(
            "test_" + backend,
            name,
            backend,
            target_compatible_with = [constraint],
            tags = ["requires-gpu"],
        )
    oprt_tilelang(name)
    native.test_suite(
        name = "test",
        tests = [":test_cpu", ":test_tilelang"] + [":test_" + backend for backend in _GPU_BACKENDS] + metax.tests,
    )
