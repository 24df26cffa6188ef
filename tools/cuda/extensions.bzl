"""Module extension: a hermetic CUDA toolkit unpacked from NVIDIA's PyPI wheels.

    cuda = use_extension("//tools/cuda:extensions.bzl", "cuda")
    cuda.wheels(name = "cuda", lock = "//tools/cuda:cuda_wheels.lock")
    use_repo(cuda, "cuda")

The lock lists exact wheels with their sha256 (pip requirements format). The repository
rule has the host's pip download them (non-isolated, so the machine's pip configuration
applies; `--require-hashes` fixes the bytes) and unpacks them into one tree,
`nvidia/cu13/{bin,include,lib,nvvm}`. nvcc finds its helpers through nvcc.profile
relative to itself, so no CUDA_HOME, PATH or /usr/local toolkit is involved. The
targets are described in cuda.BUILD.bazel.
"""

load("//tools/python:host_python.bzl", "PIP_ENVIRON", "execute_or_fail", "host_python")

def _cuda_wheels_repository_impl(rctx):
    python = host_python(rctx, rctx.attr.interpreter)
    rctx.report_progress("downloading the wheels in " + str(rctx.attr.lock))
    execute_or_fail(
        rctx,
        [
            python,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "--dest",
            "wheels",
            "--requirement",
            str(rctx.path(rctx.attr.lock)),
        ],
        "pip download of " + str(rctx.attr.lock),
        timeout = 1800,
    )
    for wheel in rctx.path("wheels").readdir():
        # Bazel 7's extract() knows a wheel's format only by a .zip name.
        archive = "wheels/%s.zip" % wheel.basename
        rctx.symlink(wheel, archive)
        rctx.report_progress("unpacking " + wheel.basename)
        rctx.extract(archive, output = ".")
    rctx.delete("wheels")
    rctx.template("BUILD.bazel", rctx.attr._build_file)

cuda_wheels_repository = repository_rule(
    implementation = _cuda_wheels_repository_impl,
    attrs = {
        "lock": attr.label(
            mandatory = True,
            allow_single_file = True,
            doc = "pip requirements file: one `name==version --hash=sha256:...` line per wheel.",
        ),
        "interpreter": attr.string(
            default = "python3",
            doc = "Host interpreter on PATH whose pip downloads the wheels.",
        ),
        "_build_file": attr.label(default = ":cuda.BUILD.bazel"),
    },
    environ = PIP_ENVIRON,
    doc = "A CUDA toolkit assembled from pinned PyPI wheels.",
)

_wheels_tag = tag_class(attrs = {
    "name": attr.string(mandatory = True, doc = "Repository name."),
    "lock": attr.label(mandatory = True),
    "interpreter": attr.string(default = "python3"),
})

def _cuda_impl(module_ctx):
    for module in module_ctx.modules:
        for wheels in module.tags.wheels:
            cuda_wheels_repository(
                name = wheels.name,
                lock = wheels.lock,
                interpreter = wheels.interpreter,
            )

cuda = module_extension(
    implementation = _cuda_impl,
    tag_classes = {"wheels": _wheels_tag},
)
