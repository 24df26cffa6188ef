"""cuda_library: CUDA sources compiled by the hermetic nvcc into a CcInfo library.

    load("//tools/cuda:defs.bzl", "cuda_library")

    cuda_library(
        name = "kernels",
        srcs = ["kernels.cu"],
        hdrs = ["kernels.cuh"],
        deps = [":host_side"],
        target_compatible_with = ["//tools/platforms:nvidia"],
    )

Attributes follow rules_cuda: srcs, hdrs, deps, copts, host_copts, includes, defines,
alwayslink (default True). Every library links the static CUDA runtime. Target GPUs come
from `--//tools/cuda:archs=sm_80,sm_90` (alias `--cuda_archs`).

`cute_setting` resolves `--@//tools/cuda:cute=auto|on|off` (tools/cuda/BUILD.bazel).
"""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load(":device_library.bzl", "DeviceCompilerInfo", "device_library_rule")

def _arch_flag(archs_label, arch):
    version = arch.removeprefix("sm_")
    digits = version.rstrip("af")  # sm_90a, sm_100f: arch- and family-specific variants
    if version == arch or not digits.isdigit() or len(version) - len(digits) > 1:
        fail("%s: %r is not a real GPU architecture like sm_90" % (archs_label, arch))

    # SASS only, no PTX: PTX from nvcc 13.5 does not JIT on older drivers (the H200's 580
    # driver supports CUDA 13.0), while 13.5 SASS runs there by minor-version compatibility.
    return "--generate-code=arch=compute_%s,code=sm_%s" % (version, version)

def _nvcc_compiler_impl(ctx):
    archs = ctx.attr.archs[BuildSettingInfo].value
    if not archs:
        fail("%s is empty: name at least one GPU architecture, e.g. sm_90" % ctx.attr.archs.label)
    return [DeviceCompilerInfo(
        driver = ctx.executable.nvcc,
        files = ctx.attr.nvcc_files[DefaultInfo].files,
        flags = ["-x", "cu"] + ctx.attr.copts + [_arch_flag(ctx.attr.archs.label, arch) for arch in archs],
        host_compiler_flag = "-ccbin",
        host_flag_prefix = "-Xcompiler",
        runtime = ctx.attr.runtime[CcInfo],
        mnemonic = "CudaCompile",
    )]

nvcc_compiler = rule(
    implementation = _nvcc_compiler_impl,
    doc = "nvcc as the device compiler of cuda_library.",
    attrs = {
        "nvcc": attr.label(mandatory = True, executable = True, allow_single_file = True, cfg = "exec"),
        "nvcc_files": attr.label(mandatory = True, cfg = "exec"),
        "runtime": attr.label(mandatory = True, providers = [CcInfo]),
        "archs": attr.label(mandatory = True, providers = [BuildSettingInfo]),
        "copts": attr.string_list(doc = "Flags of every compile."),
    },
    provides = [DeviceCompilerInfo],
)

cuda_library = device_library_rule(
    compiler = Label("//tools/cuda:nvcc"),
    source_extensions = [".cu"],
    doc = "CUDA sources compiled by nvcc (//tools/cuda:nvcc) into a library cc rules can depend on.",
)

_CUTE_PROBE = "cute/tensor.hpp"

def _cute_setting_impl(ctx):
    setting = ctx.attr.setting[BuildSettingInfo].value
    headers = ctx.attr.headers[CcInfo] if ctx.attr.headers else None
    available = headers != None and any([
        f.path.endswith("/" + _CUTE_PROBE)
        for f in headers.compilation_context.headers.to_list()
    ])
    if setting == "on" and not available:
        setting_flag = "--@//%s:%s" % (ctx.attr.setting.label.package, ctx.attr.setting.label.name)
        fail("%s=on needs the CUTLASS headers, but %s provides no %s: point %s at a CUTLASS include tree, or set %s=auto or off" % (
            setting_flag,
            str(ctx.attr.headers.label).removeprefix("@@"),
            _CUTE_PROBE,
            ctx.attr.headers_flag,
            setting_flag,
        ))
    use_cute = setting != "off" and available
    variant = ctx.actions.declare_file(ctx.label.name + ".variant")
    ctx.actions.write(variant, "cute\n" if use_cute else "cuda\n")
    if not use_cute:
        return [DefaultInfo(files = depset([variant])), CcInfo()]
    return [
        DefaultInfo(files = depset([variant])),
        cc_common.merge_cc_infos(cc_infos = [
            headers,
            CcInfo(compilation_context = cc_common.create_compilation_context(defines = depset(["OPRT_CUTE=1"]))),
        ]),
    ]

cute_setting = rule(
    implementation = _cute_setting_impl,
    doc = "The CuTe kernel choice as a library: the CUTLASS headers and OPRT_CUTE=1 when " +
          "CuTe kernels are built, nothing otherwise; its file `<name>.variant` says " +
          "`cute` or `cuda`.",
    attrs = {
        "setting": attr.label(mandatory = True, providers = [BuildSettingInfo]),
        "headers": attr.label(providers = [CcInfo], doc = "The CUTLASS headers; None under off."),
        "headers_flag": attr.string(mandatory = True, doc = "The flag naming the headers, as users type it."),
    },
    provides = [CcInfo],
)
