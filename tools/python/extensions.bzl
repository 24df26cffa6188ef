"""Module extension: a Python virtualenv built from a hash-pinned lock, and its toolchain.

    python_venv = use_extension("//tools/python:extensions.bzl", "python_venv")
    python_venv.venv(name = "python_venv", requirements_lock = "//tools/python:requirements_lock.txt")
    use_repo(python_venv, "python_venv")
    register_toolchains("@python_venv//:toolchain")

The repository holds `venv/` (made from the host `python3`, then
`pip install --require-hashes --no-deps --only-binary=:all:` of the lock) and exposes
  :toolchain         the Python toolchain every py_binary/py_test runs with,
  :python_headers    cc_library of the interpreter's C headers,
  :pybind11          cc_library of the pybind11 headers installed in the venv,
  :torch             cc_library of torch's C++ API (headers, libc10, libtorch_cpu),
  build_info.py      PYTHON_TAG and TORCH_RELEASE ("2.13"), what a _C built here needs,
  defs.bzl           PYTHON (the venv interpreter), EXT_SUFFIX (".cpython-311-x86_64-linux-gnu.so")
                     and PYTHON_TAG ("cp311").
It is fetched once and refetched when the lock, the host interpreter or a PIP_* setting
changes (about 40 s: torch comes from local disk, the rest from the package index).

A second venv with another `interpreter` ("python3.12") and a lock of torch and pybind11
only gives the headers and libraries to build _C for another host (//python:BUILD.bazel's
wheels per interpreter); nothing imports torch in it.
"""

load(":host_python.bzl", "PIP_ENVIRON", "execute_or_fail", "host_python")

# Everything the BUILD file and defs.bzl need to know about the venv's interpreter and
# torch. torch is found, not imported: a CUDA build of torch installed without its
# nvidia-* packages (a venv that only gives headers for another host's wheel) does not
# import. Its C++ ABI is read off libc10.so, whose std::string symbols are tagged
# B5cxx11 under _GLIBCXX_USE_CXX11_ABI=1 only.
_PROBE = """
import importlib.metadata, importlib.util, json, os, re, sys, sysconfig
import pybind11
torch = importlib.util.find_spec("torch").submodule_search_locations[0]
with open(os.path.join(torch, "lib", "libc10.so"), "rb") as libc10:
    cxx11_abi = int(b"B5cxx11" in libc10.read())
print(json.dumps({
    "include": sysconfig.get_paths()["include"],
    "pybind11_include": pybind11.get_include(),
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "torch": torch,
    "torch_release": re.match(r"\\d+\\.\\d+", importlib.metadata.version("torch")).group(),
    "torch_cxx11_abi": cxx11_abi,
    "python_tag": "cp%d%d" % sys.version_info[:2],
}))
"""

def _python_venv_repository_impl(rctx):
    python = host_python(rctx, rctx.attr.interpreter)
    lock = rctx.path(rctx.attr.requirements_lock)
    rctx.report_progress("creating the virtualenv with " + python)
    execute_or_fail(rctx, [python, "-m", "venv", "venv"], "python -m venv")
    venv_python = str(rctx.path("venv/bin/python3"))
    rctx.report_progress("installing " + str(rctx.attr.requirements_lock))
    execute_or_fail(
        rctx,
        [
            venv_python,
            "-m",
            "pip",
            "install",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
            "--no-compile",
            "--disable-pip-version-check",
            "--requirement",
            str(lock),
        ],
        "pip install of " + str(rctx.attr.requirements_lock),
        timeout = 3600,
    )
    probe = json.decode(execute_or_fail(rctx, [venv_python, "-c", _PROBE], "probing the virtualenv"))

    # Stable in-repository names for headers that live in the host interpreter's prefix
    # and in the venv's site-packages.
    rctx.symlink(probe["include"], "python_include")
    rctx.symlink(probe["pybind11_include"], "pybind11_include")
    rctx.symlink(probe["torch"] + "/include", "torch_include")
    rctx.symlink(probe["torch"] + "/lib", "torch_lib")
    rctx.file("defs.bzl", "\n".join([
        '"""Facts about the virtualenv\'s interpreter."""',
        "",
        "# The interpreter every Python target runs with.",
        "PYTHON = %r" % venv_python,
        "",
        "# The file-name suffix Python expects of an extension module.",
        "EXT_SUFFIX = %r" % probe["ext_suffix"],
        "",
        "# The interpreter's wheel tag (python and ABI), e.g. cp311.",
        "PYTHON_TAG = %r" % probe["python_tag"],
        "",
    ]))

    # What a _C built against this venv needs at run time, as a module of the package
    # (operator_runtime/_build_info.py): the wheel's requirement and the import-time
    # check both read it.
    rctx.file("build_info.py", "\n".join([
        '"""What operator_runtime._C was built for (written by tools/python/extensions.bzl)."""',
        "",
        "# The interpreter's wheel tag: _C is compiled against its headers.",
        "PYTHON_TAG = %r" % probe["python_tag"],
        "",
        "# The torch release (major.minor) whose C++ API _C's torch kernels compile against;",
        "# another release's libtorch may lack or change the symbols they bind to.",
        "TORCH_RELEASE = %r" % probe["torch_release"],
        "",
    ]))
    rctx.template("BUILD.bazel", rctx.attr._build_template, substitutions = {
        "{python}": venv_python,
        "{torch_cxx11_abi}": str(probe["torch_cxx11_abi"]),
    })

python_venv_repository = repository_rule(
    implementation = _python_venv_repository_impl,
    attrs = {
        "requirements_lock": attr.label(
            mandatory = True,
            allow_single_file = True,
            doc = "pip requirements file pinning every package with --hash=sha256:...",
        ),
        "interpreter": attr.string(
            default = "python3",
            doc = "Host interpreter on PATH the venv is made from.",
        ),
        "_build_template": attr.label(default = ":venv.BUILD.bazel.tpl"),
    },
    environ = PIP_ENVIRON,
    doc = "A Python virtualenv with the locked packages, plus its toolchain and C headers.",
)

_venv_tag = tag_class(attrs = {
    "name": attr.string(mandatory = True, doc = "Repository name."),
    "requirements_lock": attr.label(mandatory = True),
    "interpreter": attr.string(default = "python3"),
})

def _python_venv_impl(module_ctx):
    for module in module_ctx.modules:
        for venv in module.tags.venv:
            python_venv_repository(
                name = venv.name,
                requirements_lock = venv.requirements_lock,
                interpreter = venv.interpreter,
            )

python_venv = module_extension(
    implementation = _python_venv_impl,
    tag_classes = {"venv": _venv_tag},
)
