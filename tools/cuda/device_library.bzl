"""Libraries compiled by a GPU device compiler: the rule behind cuda_library (and maca_library).

`device_library_rule()` makes a rule whose targets compile each device source with the
compiler a DeviceCompilerInfo target describes and return CcInfo, so cc_library,
cc_binary(linkshared = True) and pybind11 extensions can depend on them. Everything that
differs between vendors lives in that compiler target: the driver and its files, the
flags of every compile (language, standard, target architectures), how the driver is
told about the host C++ compiler, and the device runtime library. A MetaX toolchain is
one more compiler rule returning DeviceCompilerInfo plus one `device_library_rule` call.
"""

load("@bazel_skylib//lib:paths.bzl", "paths")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain", "use_cc_toolchain")

DeviceCompilerInfo = provider(
    doc = "A device compiler, as device library rules drive it.",
    fields = {
        "driver": "File: the compiler driver (nvcc, mxcc), built for the exec platform.",
        "files": "depset of File: everything the driver runs or reads.",
        "flags": "list of str: flags of every compile, target architectures included.",
        "host_compiler_flag": "str or None: the flag naming the host C++ compiler " +
                              "(nvcc: -ccbin); None when the driver compiles host code itself.",
        "host_flag_prefix": "str or None: the flag forwarding the next option to the host " +
                            "compiler (nvcc: -Xcompiler); None to pass host options as they are.",
        "runtime": "CcInfo: the device runtime every library links.",
        "mnemonic": "str: the compile actions' mnemonic.",
    },
)

_HEADER_EXTENSIONS = [".h", ".hh", ".hpp", ".cuh", ".inc", ".inl"]

def _host_flags(compiler, flags):
    if not compiler.host_flag_prefix:
        return flags
    forwarded = []
    for flag in flags:
        forwarded.extend([compiler.host_flag_prefix, flag])
    return forwarded

def _package_include_dirs(ctx):
    """The `includes` attribute as directories in the source tree and the output tree."""
    dirs = []
    for include in ctx.attr.includes:
        source_dir = paths.normalize(paths.join(ctx.label.workspace_root, ctx.label.package, include))
        dirs.extend([source_dir, paths.join(ctx.bin_dir.path, source_dir)])
    return dirs

def _compile(ctx, compiler, cc_toolchain, compilation_context, source, private_headers):
    # The source's own path keeps objects of equal basenames in different folders apart.
    object_path = paths.replace_extension(source.short_path.replace("../", "external/", 1), ".o")
    output = ctx.actions.declare_file(paths.join("_objs", ctx.label.name, object_path))
    args = ctx.actions.args()
    if compiler.host_compiler_flag:
        args.add(compiler.host_compiler_flag, cc_toolchain.compiler_executable)
    args.add_all(compiler.flags)
    args.add_all(_host_flags(compiler, ["-fPIC"] + ctx.attr.host_copts))
    args.add_all(ctx.attr.copts)

    # Workspace-relative includes ("ops/softmax/softmax.h") resolve from the execroot
    # and the output tree, as cc rules' -iquote does.
    args.add_all(
        depset([".", ctx.bin_dir.path], transitive = [compilation_context.quote_includes], order = "preorder"),
        format_each = "-I%s",
        uniquify = True,
    )
    args.add_all(compilation_context.includes, format_each = "-I%s", uniquify = True)

    # The drivers want `-isystem` and its directory as two arguments.
    args.add_all(compilation_context.system_includes, before_each = "-isystem", uniquify = True)
    args.add_all(compilation_context.external_includes, before_each = "-isystem", uniquify = True)
    args.add_all(compilation_context.defines, format_each = "-D%s", uniquify = True)
    args.add("-c", source)
    args.add("-o", output)
    ctx.actions.run(
        executable = compiler.driver,
        arguments = [args],
        inputs = depset(
            [source] + private_headers,
            transitive = [compilation_context.headers, compiler.files, cc_toolchain.all_files],
        ),
        outputs = [output],
        mnemonic = compiler.mnemonic,
        progress_message = "Compiling %s for the device" % source.short_path.replace("%", "%%"),
        # The same environment as the C++ compile actions (--action_env).
        use_default_shell_env = True,
    )
    return output

def _device_library_impl(ctx):
    compiler = ctx.attr._compiler[DeviceCompilerInfo]
    cc_toolchain = find_cc_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    dep_cc_infos = [dep[CcInfo] for dep in ctx.attr.deps] + [compiler.runtime]
    compilation_context = cc_common.merge_compilation_contexts(
        compilation_contexts = [cc_common.create_compilation_context(
            headers = depset(ctx.files.hdrs),
            system_includes = depset(_package_include_dirs(ctx)),
            defines = depset(ctx.attr.defines),
        )] + [info.compilation_context for info in dep_cc_infos],
    )
    private_headers = [f for f in ctx.files.srcs if "." + f.extension in _HEADER_EXTENSIONS]
    objects = [
        _compile(ctx, compiler, cc_toolchain, compilation_context, source, private_headers)
        for source in ctx.files.srcs
        if "." + source.extension not in _HEADER_EXTENSIONS
    ]
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        name = ctx.label.name,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        # Every object is position independent, so it serves both link modes.
        compilation_outputs = cc_common.create_compilation_outputs(
            objects = depset(objects),
            pic_objects = depset(objects),
        ),
        linking_contexts = [info.linking_context for info in dep_cc_infos],
        alwayslink = ctx.attr.alwayslink,
        disallow_dynamic_library = True,
    )
    return [
        DefaultInfo(files = depset(objects)),
        CcInfo(compilation_context = compilation_context, linking_context = linking_context),
    ]

def device_library_rule(compiler, source_extensions, doc):
    """A rule compiling `source_extensions` sources with `compiler` into a CcInfo library.

    Args:
      compiler: Label of a target providing DeviceCompilerInfo.
      source_extensions: extensions of the files `srcs` compiles, e.g. [".cu"].
      doc: the rule's documentation.

    Returns:
      The rule; assign it to a global of a .bzl file.
    """
    return rule(
        implementation = _device_library_impl,
        doc = doc,
        attrs = {
            "srcs": attr.label_list(
                allow_files = source_extensions + _HEADER_EXTENSIONS,
                doc = "Device sources, each compiled to one object, and private headers.",
            ),
            "hdrs": attr.label_list(
                allow_files = _HEADER_EXTENSIONS,
                doc = "Public headers, visible to dependents.",
            ),
            "deps": attr.label_list(
                providers = [CcInfo],
                doc = "cc_library or device libraries whose headers these sources include.",
            ),
            "copts": attr.string_list(doc = "Extra device compiler flags."),
            "host_copts": attr.string_list(doc = "Extra flags for the host C++ compiler."),
            "includes": attr.string_list(
                doc = "Package-relative include directories, for these sources and dependents.",
            ),
            "defines": attr.string_list(doc = "Preprocessor defines, for these sources and dependents."),
            "alwayslink": attr.bool(
                default = True,
                doc = "Link every object even if nothing references it: kernels and the " +
                      "backend registrations in static initialisers are reached only at run time.",
            ),
            "_compiler": attr.label(default = compiler, providers = [DeviceCompilerInfo]),
        },
        toolchains = use_cc_toolchain(),
        fragments = ["cpp"],
        provides = [CcInfo],
    )
