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
  defs.bzl           PYTHON (the venv interpreter), EXT_SUFFIX (".cpython-311-x86_64-linux-gnu.so")
                     and PYTHON_TAG ("cp311").
It is fetched once and refetched when the lock, the host interpreter or a PIP_* setting
changes (about 40 s: torch comes from local disk, the rest from the package index).
"""

load(":host_python.bzl", "PIP_ENVIRON", "execute_or_fail", "host_python")

# Everything the BUILD file and defs.bzl need to know about the venv's interpreter.
_PROBE = """
import json, os, sys, sysconfig
import pybind11, torch
print(json.dumps({
    "include": sysconfig.get_paths()["include"],
    "pybind11_include": pybind11.get_include(),
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "torch": os.path.dirname(torch.__file__),
    "torch_cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
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
