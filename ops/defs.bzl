"""One macro declares an operator: its C ABI, its libraries per backend, its case table and tests.

An operator folder `ops/<op>/` holds a BUILD.bazel that calls `oprt_operator(name = "<op>",
kind = ..., inputs = ..., params = ...)`, `cases.py`, `tilelang/<op>.py` and its math: an
elementwise operator's `<op>_functor.h`, or a reduction's or normalization's `cpu/*.cc`
and `nvidia/*.cu` (CUDA-dialect sources, built for nvidia and metax). The macro generates
the rest (ops/c_abi.bzl): the typed C header, the front end with the op-table entry and,
for an elementwise operator, its cpu and GPU kernel registrations. Listing the op in
`ops/registry.bzl` links it into the runtime; nothing else names it.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@rules_python//python:defs.bzl", "py_library", "py_test")
load("//ops:tilelang.bzl", "oprt_tilelang")
load("//tools/cc:defs.bzl", "CPU_KERNEL_COPTS", "CXX_STANDARD_COPTS")
load("//tools/cuda:defs.bzl", "cuda_library")
load(":c_abi.bzl", "KINDS", "c_abi_file")
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

def oprt_operator(name, kind, inputs = ["input"], params = {}, out = "out", cute = False):
    """Declares operator `name` of `kind` ("elementwise", "reduction" or "normalization").

    `inputs` and `out` name the operands and `params` maps each float parameter of an
    elementwise operator to its default, in the order of its functor's fields; these
    names are the op table's, Python's and the C functions'. The reduction family's one
    parameter is always `dim`. `cute = True` gives the nvidia library the family's CuTe
    machinery (under `#if OPRT_CUTE`, set by --@//tools/cuda:cute, tools/cuda).

    Targets: `:header` (the generated `<name>.h`), `:frontend`, `:cpu`, `:<name>` (every
    backend the platform builds, linked into the runtime), `:cases` (the case table),
    `:test_cpu`, `:test_<gpu>` (tag requires-gpu), the metax targets of ops/metax.bzl
    (`:metax`, `:metax_compat`, `:test_metax`, tag requires-metax), the tilelang targets
    of ops/tilelang.bzl and the suite `:test`, which runs the backends of the active config.
    """
    family = KINDS[kind].family
    shared = _FAMILIES[family]
    if cute and not shared.cute:
        fail("%s: the %s family has no CuTe kernels; leave out cute = True" % (name, family))
    if params and family != "elementwise":
        fail("%s: a %s's only parameter is dim; leave out params" % (name, kind))
    if out != "out" and family != "elementwise":
        fail("%s: a %s's output is out; leave out out" % (name, kind))
    generated = {"header": name + ".h", "frontend": name + "_frontend.cc"}
    if family == "elementwise":
        generated.update(cpu = name + "_cpu.cc", gpu = name + "_gpu.cu")
    for file, path in generated.items():
        c_abi_file(
            name = "generated_" + file,
            file = file,
            out = path,
            op = name,
            kind = kind,
            out_name = out,
            inputs = inputs,
            params = params.keys(),
            param_defaults = [repr(float(default)) for default in params.values()],
            cute = cute,
        )
    if family == "elementwise":
        cpu_srcs, gpu_srcs, gpu_hdrs = [generated["cpu"]], [generated["gpu"]], []
    else:
        cpu_srcs = native.glob(["cpu/*.cc", "cpu/*.h"])
        gpu_srcs, gpu_hdrs = native.glob(["nvidia/*.cu"]), native.glob(["nvidia/*.cuh"])
    cc_library(
        name = "header",
        hdrs = [generated["header"]],
        include_prefix = "operator_runtime/ops",
        deps = ["//runtime:api"],
        visibility = ["//visibility:public"],
    )
    cc_library(
        name = "frontend",
        srcs = [generated["frontend"]],
        hdrs = native.glob(["*_functor.h"]),
        copts = CXX_STANDARD_COPTS,
        deps = [":header", shared.host],
        alwayslink = True,
    )
    cc_library(
        name = "cpu",
        srcs = cpu_srcs,
        copts = CXX_STANDARD_COPTS + CPU_KERNEL_COPTS,
        deps = [":frontend"],
        alwayslink = True,
    )
    backend_deps = {}
    for backend, constraint in _GPU_BACKENDS.items():
        cuda_library(
            name = backend,
            srcs = gpu_srcs,
            hdrs = gpu_hdrs,
            deps = [":frontend", shared.cuda] + ([shared.cute] if cute else []),
            target_compatible_with = [constraint],
        )
        backend_deps[constraint] = [":" + backend]
    metax = metax_operator(name, family, gpu_srcs, gpu_hdrs, _test)
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
        srcs = [generated["header"], "cases.py"] + native.glob(["tilelang/*.py"]),
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
