"""maca_library: MACA sources (MetaX's CUDA dialect) compiled by mxcc into a CcInfo library.

`maca_library` is used like `cuda_library` (tools/cuda/defs.bzl), with
`target_compatible_with = ["//tools/platforms:metax"]`, and takes its attributes (srcs,
hdrs, deps, copts, host_copts, includes, defines, alwayslink): both are
tools/cuda/device_library.bzl's rule, this one driven by //tools/maca:mxcc, the SDK's
`mxgpu_llvm/bin/mxcc -x maca` from $MACA_PATH (//tools/maca:extensions.bzl). mxcc
compiles host code itself, so host_copts go to it unchanged. Target GPUs come from
`--//tools/maca:archs=xcore1000` (alias `--maca_archs`). Without the SDK, analysing any
maca_library fails with one sentence naming MACA_PATH.
"""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("//tools/cuda:device_library.bzl", "DeviceCompilerInfo", "device_library_rule")

def _mxcc_compiler_impl(ctx):
    if ctx.attr.sdk_error:
        fail(ctx.attr.sdk_error)
    archs = ctx.attr.archs[BuildSettingInfo].value
    if not archs:
        fail("%s is empty: name at least one MetaX architecture, e.g. xcore1000" % ctx.attr.archs.label)
    return [DeviceCompilerInfo(
        driver = ctx.files.mxcc[0],
        files = depset(transitive = [ctx.attr.mxcc.files, ctx.attr.sdk_files.files]),
        flags = ["-x", "maca"] + ctx.attr.copts + ["--offload-arch=" + arch for arch in archs],
        host_compiler_flag = None,
        host_flag_prefix = None,
        runtime = ctx.attr.runtime[CcInfo],
        mnemonic = "MacaCompile",
    )]

mxcc_compiler = rule(
    implementation = _mxcc_compiler_impl,
    doc = "mxcc as the device compiler of maca_library; fails with sdk_error when it is set.",
    attrs = {
        # Not allow_single_file: without an SDK the filegroup is empty, and the rule must
        # get as far as failing with sdk_error rather than with a file-count message.
        "mxcc": attr.label(mandatory = True, allow_files = True, cfg = "exec"),
        "sdk_files": attr.label(mandatory = True, allow_files = True, cfg = "exec"),
        "runtime": attr.label(mandatory = True, providers = [CcInfo]),
        "archs": attr.label(mandatory = True, providers = [BuildSettingInfo]),
        "copts": attr.string_list(doc = "Flags of every compile."),
        "sdk_error": attr.string(doc = "Why the SDK is missing (MACA_SDK_ERROR); empty when found."),
    },
    provides = [DeviceCompilerInfo],
)

maca_library = device_library_rule(
    compiler = Label("//tools/maca:mxcc"),
    source_extensions = [".cu", ".maca"],
    doc = "MACA sources compiled by mxcc (//tools/maca:mxcc) into a library cc rules can depend on.",
)
