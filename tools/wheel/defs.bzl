"""oprt_wheel: a wheel from files, named and tagged as PEP 427 says (tools/wheel/make_wheel.py).

rules_python's py_wheel is not usable with the rules_python this workspace gets (its
wheelmaker tool is missing), so the few lines of zip writing live here.
"""

def _oprt_wheel_impl(ctx):
    tag = "%s-%s-%s" % (ctx.attr.python_tag, ctx.attr.abi, ctx.attr.platform)
    out = ctx.actions.declare_file("%s-%s-%s.whl" % (ctx.attr.distribution, ctx.attr.version, tag))
    args = ctx.actions.args()
    args.add("--out", out)
    args.add("--name", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--tag", tag)
    args.add("--summary", ctx.attr.summary)
    args.add("--build-info", ctx.file.build_info)
    files = ctx.files.srcs
    for file in files:
        path = file.short_path
        for prefix in ctx.attr.strip_path_prefixes:
            if path.startswith(prefix + "/"):
                path = path[len(prefix) + 1:]
        args.add("%s=%s" % (path, file.path))
    ctx.actions.run(
        executable = ctx.executable._make_wheel,
        arguments = [args],
        inputs = files + [ctx.file.build_info],
        outputs = [out],
        mnemonic = "OprtWheel",
        progress_message = "Writing wheel %s" % out.short_path,
    )
    return [DefaultInfo(files = depset([out]))]

oprt_wheel = rule(
    implementation = _oprt_wheel_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = True, doc = "Files of the wheel, at their workspace paths."),
        "strip_path_prefixes": attr.string_list(doc = "Leading folders removed from those paths."),
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "python_tag": attr.string(mandatory = True),
        "abi": attr.string(mandatory = True),
        "platform": attr.string(mandatory = True),
        "summary": attr.string(),
        "build_info": attr.label(
            mandatory = True,
            allow_single_file = [".py"],
            doc = "_C's operator_runtime/_build_info.py: its Python tag and the torch release it needs.",
        ),
        "_make_wheel": attr.label(
            default = "//tools/wheel:make_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
    doc = "A .whl of srcs; the file name carries distribution, version and the three tags.",
)
