"""Module extension: the MetaX MACA SDK, found through the MACA_PATH environment variable.

    maca = use_extension("//tools/maca:extensions.bzl", "maca")
    maca.sdk(name = "maca")
    use_repo(maca, "maca")

MACA cannot be pinned like the CUDA wheels (no public package carries it), so the
repository links the SDK installed at $MACA_PATH, the directory holding
mxgpu_llvm/bin/mxcc. Without a usable SDK the repository is still created, with empty
targets and `MACA_SDK_ERROR`, the sentence saying why: fetching never fails, so cpu and
nvidia builds are unaffected, and only a build that compiles MACA (--config=metax)
fails, at analysis, with that sentence (see //tools/maca:mxcc). Changing MACA_PATH
refetches the repository. The targets are described in maca.BUILD.bazel.
"""

_MXCC = "mxgpu_llvm/bin/mxcc"

def _sdk_error(root):
    """Why root is not a usable SDK, as one sentence, or "" when it is."""
    if not root:
        reason = "MACA_PATH is not set"
    elif not root.startswith("/"):
        reason = "MACA_PATH=%s is not an absolute path" % root
    else:
        reason = "MACA_PATH=%s has no %s" % (root, _MXCC)
    return ("MACA SDK not found: %s; set MACA_PATH to the MetaX SDK root (the directory " +
            "holding %s) to build --config=metax") % (reason, _MXCC)

def _maca_sdk_repository_impl(rctx):
    root = rctx.os.environ.get("MACA_PATH", "").rstrip("/")
    usable = root.startswith("/") and rctx.path("%s/%s" % (root, _MXCC)).exists
    if usable:
        rctx.symlink(root, "sdk")
    rctx.file("sdk.bzl", "MACA_SDK_ERROR = %r\n" % ("" if usable else _sdk_error(root)))
    rctx.template("BUILD.bazel", rctx.attr._build_file)

maca_sdk_repository = repository_rule(
    implementation = _maca_sdk_repository_impl,
    environ = ["MACA_PATH"],
    attrs = {"_build_file": attr.label(default = ":maca.BUILD.bazel")},
    doc = "The MACA SDK at $MACA_PATH, or empty targets and the reason it is missing.",
)

_sdk_tag = tag_class(attrs = {"name": attr.string(mandatory = True, doc = "Repository name.")})

def _maca_impl(module_ctx):
    for module in module_ctx.modules:
        for sdk in module.tags.sdk:
            maca_sdk_repository(name = sdk.name)

maca = module_extension(
    implementation = _maca_impl,
    tag_classes = {"sdk": _sdk_tag},
)
