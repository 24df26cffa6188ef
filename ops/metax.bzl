"""The metax backend's targets: the shared CUDA-dialect sources built for OPRT_BACKEND_METAX.

MetaX's MACA is a CUDA dialect, so the metax backend compiles the same sources as
nvidia (`runtime/nvidia/*.cu`, an operator's `nvidia/*.cu` or generated GPU source) with
`-DOPRT_METAX`, which makes them register as metax and apply runtime/metax/dialect.cuh. Two builds of them:

- `metax`: `maca_library` (mxcc from $MACA_PATH), for the metax platform
  (`--config=metax`); its tests, `test_metax`, are tagged `requires-metax`.
- `metax_compat`: the same translation units compiled by the hermetic nvcc
  (`cuda_library`), as MACA's cu-bridge presents CUDA, for the nvidia platform, so
  CI compiles them; linked into //:liboperator_runtime_metax_compat.so, which
  the GPU-runner bundle runs through the case tables on an NVIDIA GPU
  (`run_tests.sh --backends=metax`). Never linked with the nvidia kernels: both
  instantiate the same templates in namespace oprt::gpu under different settings.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("//tools/cuda:defs.bzl", "cuda_library")
load("//tools/maca:defs.bzl", "maca_library")

METAX_COPTS = ["-DOPRT_METAX"]

_METAX = struct(
    library = maca_library,
    platform = "//tools/platforms:metax",
    op_kernels = "metax",
)
_COMPAT = struct(
    library = cuda_library,
    platform = "//tools/platforms:nvidia",
    op_kernels = "metax_compat_kernels",
)
_VARIANTS = {
    "metax": _METAX,
    "metax_compat": _COMPAT,
}

def metax_runtime_libraries():
    """In //runtime: per variant, `<variant>_backend` (registration and device probe) and
    the families' device headers `elementwise_<variant>`, `reduction_<variant>`."""
    for variant, build in _VARIANTS.items():
        build.library(
            name = variant + "_backend",
            srcs = native.glob(["nvidia/*.cu"]),
            hdrs = native.glob(["nvidia/*.cuh", "metax/*.cuh"]),
            copts = METAX_COPTS,
            deps = [":core"],
            target_compatible_with = [build.platform],
        )
        for family in ("elementwise", "reduction"):
            build.library(
                name = "%s_%s" % (family, variant),
                hdrs = native.glob([family + "/*.cuh"]),
                deps = [":" + family, ":%s_backend" % variant],
                target_compatible_with = [build.platform],
            )

def metax_operator(name, family, srcs, hdrs, test):
    """In ops/<name>: `:metax`, `:metax_compat` (front end, cpu and the compat kernels, for
    the compat runtime), both of the CUDA-dialect `srcs` and `hdrs`, and `:test_metax`,
    made by `test(name, op, backend, ...)`.

    Returns:
      struct(backend_deps: the `select` entry adding `:metax` on its platform,
             tests: the labels the operator's test suite adds).
    """
    for variant, build in _VARIANTS.items():
        build.library(
            name = build.op_kernels,
            srcs = srcs,
            hdrs = hdrs,
            copts = METAX_COPTS,
            deps = [":frontend", "//runtime:%s_%s" % (family, variant)],
            target_compatible_with = [build.platform],
        )
    cc_library(
        name = "metax_compat",
        deps = [":frontend", ":cpu", ":" + _COMPAT.op_kernels],
        target_compatible_with = [_COMPAT.platform],
        visibility = ["//:__pkg__"],
    )
    test(
        "test_metax",
        name,
        "metax",
        target_compatible_with = [_METAX.platform],
        tags = ["requires-metax"],
    )
    return struct(
        backend_deps = {_METAX.platform: [":" + _METAX.op_kernels]},
        tests = [":test_metax"],
    )
