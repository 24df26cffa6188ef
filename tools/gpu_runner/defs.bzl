"""gpu_runner_bundle: the tarball a GPU host without Bazel runs the tests from."""

load("//ops:registry.bzl", "OPERATORS")

# Bundle path -> label. Directories mirror the repository so imports work the same.
_FILES = {
    "lib/liboperator_runtime.so": "//:liboperator_runtime.so",
    # The metax backend's CUDA-compatibility build (run_tests.sh --backends=metax).
    "lib/liboperator_runtime_metax_compat.so": "//:liboperator_runtime_metax_compat.so",
    "include/operator_runtime/api.h": "//runtime:include/operator_runtime/api.h",
    "runtime/python/module.cc": "//runtime:python/module.cc",
    "runtime/python/cached_call.cc": "//runtime:python/cached_call.cc",
    "runtime/python/cached_call.h": "//runtime:python/cached_call.h",
    "runtime/python/descriptor_cache.cc": "//runtime:python/descriptor_cache.cc",
    "runtime/python/descriptor_cache.h": "//runtime:python/descriptor_cache.h",
    "runtime/python/torch_kernels.cc": "//runtime:python/torch_kernels.cc",
    "runtime/python/torch_kernels.h": "//runtime:python/torch_kernels.h",
    "run_tests.sh": "//tools/gpu_runner:run_tests.sh",
    "native_backtrace.c": "//tools/gpu_runner:native_backtrace.c",
    "ops/registry.bzl": "//ops:registry.bzl",
    "ops/tilelang_kernels.py": "//ops:tilelang_kernels.py",
}

_GROUPS = [
    "//python:package_files",
    "//python/operator_runtime_testing:package_files",
    "//tests:bundle_files",
    "//tools/bench:bundle_files",
] + ["//ops/%s:bundle_files" % op for op in OPERATORS]

def gpu_runner_bundle(name, wheels = {}, **kwargs):
    """`oprt-<name>.tar.gz`: the libraries, sources, package, cases and tests, under oprt-bundle/.

    Args:
      name: target name.
      wheels: bundle path ("wheels/<file>.whl") -> wheel label; run_tests.sh installs the
        one for the host's Python instead of building a binding.
      **kwargs: tags and the like.
    """
    files = _FILES | wheels
    native.genrule(
        name = name,
        srcs = list(files.values()) + _GROUPS,
        outs = ["oprt-%s.tar.gz" % name],
        # Op headers go where users include them from; every other file keeps its repository path.
        cmd = " ".join(
            ["$(location //tools/gpu_runner:make_bundle) $@"] +
            ["%s=$(location %s)" % (dest, label) for dest, label in files.items()] +
            ["$$(for f in $(locations %s); do case $$f in *.h) echo include/operator_runtime/ops/$${f##*/}=$$f;; *) echo $${f#bazel-out/*/bin/}=$$f;; esac; done)" % group for group in _GROUPS],
        ),
        target_compatible_with = ["//tools/platforms:nvidia"],
        tools = ["//tools/gpu_runner:make_bundle"],
        visibility = ["//tools:__pkg__"],
        **kwargs
    )
