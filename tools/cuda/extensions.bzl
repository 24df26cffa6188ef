"""Module extension: a hermetic CUDA toolkit unpacked from NVIDIA's PyPI wheels.

    cuda = use_extension("//tools/cuda:extensions.bzl", "cuda")
    cuda.wheels(name = "cuda", lock = "//tools/cuda:cuda_wheels.lock", packages = [...])
    use_repo(cuda, "cuda")

The lock lists exact wheels with their sha256 (pip requirements format); each
repository takes the lock's lines of its `packages`. The repository rule has the host's
pip download them (non-isolated, so the machine's pip configuration applies;
`--require-hashes` fixes the bytes) and unpacks them into one tree: for @cuda
`nvidia/cu13/{bin,include,lib,nvvm}` (cuda.BUILD.bazel), for @cutlass the CUTLASS
headers under `cutlass_library/source/include` (cutlass.BUILD.bazel). nvcc finds its
helpers through nvcc.profile relative to itself, so no CUDA_HOME, PATH or /usr/local
toolkit is involved. A repository is fetched only when a build uses one of its targets:
@cutlass only under `--@//tools/cuda:cute=on|auto` (tools/cuda/BUILD.bazel).
"""

load("//tools/python:host_python.bzl", "PIP_ENVIRON", "execute_or_fail", "host_python")

def _requirement_name(line):
    """The normalised distribution name of a lock line, or None for comments and blanks."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    return line.split("==", 1)[0].strip().lower().replace("_", "-").replace(".", "-")

def _cuda_wheels_repository_impl(rctx):
    python = host_python(rctx, rctx.attr.interpreter)
    lines = rctx.read(rctx.attr.lock).splitlines()
    chosen = [line for line in lines if _requirement_name(line) in rctx.attr.packages]
    found = [_requirement_name(line) for line in chosen]
    missing = [name for name in rctx.attr.packages if name not in found]
    if missing:
        fail("%s pins no %s: add `NAME==VERSION --hash=sha256:...` lines for them" % (rctx.attr.lock, ", ".join(missing)))
    rctx.file("requirements.txt", "\n".join(chosen) + "\n")
    rctx.report_progress("downloading %s from %s" % (", ".join(rctx.attr.packages), rctx.attr.lock))
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
            "requirements.txt",
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
    rctx.delete("requirements.txt")
    rctx.template("BUILD.bazel", rctx.attr.build_file)

cuda_wheels_repository = repository_rule(
    implementation = _cuda_wheels_repository_impl,
    attrs = {
        "lock": attr.label(
            mandatory = True,
            allow_single_file = True,
            doc = "pip requirements file: one `name==version --hash=sha256:...` line per wheel.",
        ),
        "packages": attr.string_list(
            mandatory = True,
            doc = "Distribution names whose lock lines this repository downloads.",
        ),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
        "interpreter": attr.string(
            default = "python3",
            doc = "Host interpreter on PATH whose pip downloads the wheels.",
        ),
    },
    environ = PIP_ENVIRON,
    doc = "CUDA toolkit pieces assembled from pinned PyPI wheels.",
)

_wheels_tag = tag_class(attrs = {
    "name": attr.string(mandatory = True, doc = "Repository name."),
    "lock": attr.label(mandatory = True),
    "packages": attr.string_list(mandatory = True),
    "build_file": attr.label(mandatory = True),
    "interpreter": attr.string(default = "python3"),
})

def _cuda_impl(module_ctx):
    for module in module_ctx.modules:
        for wheels in module.tags.wheels:
            cuda_wheels_repository(
                name = wheels.name,
                lock = wheels.lock,
                packages = wheels.packages,
                build_file = wheels.build_file,
                interpreter = wheels.interpreter,
            )

cuda = module_extension(
    implementation = _cuda_impl,
    tag_classes = {"wheels": _wheels_tag},
)
