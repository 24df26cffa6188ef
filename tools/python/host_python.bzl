"""Repository-rule helpers for running the host's Python and pip.

Shared by the virtualenv (//tools/python) and CUDA wheel (//tools/cuda) repositories.
pip runs non-isolated on purpose: the machine's pip configuration (find-links, local
indexes, constraints, certificates) decides where wheels come from, while the
`--require-hashes` lock files decide exactly which bytes are accepted.
"""

# pip settings that change where wheels come from; a change refetches the repository.
PIP_ENVIRON = [
    "PIP_CERT",
    "PIP_CONFIG_FILE",
    "PIP_CONSTRAINT",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_INDEX_URL",
    "PIP_NO_INDEX",
    "PIP_TRUSTED_HOST",
]

def execute_or_fail(rctx, arguments, what, timeout = 600, environment = {}):
    """Runs `arguments` in the repository directory; fails with its output if it fails.

    Returns:
      The command's stdout.
    """
    result = rctx.execute(arguments, timeout = timeout, environment = environment)
    if result.return_code != 0:
        fail("%s failed with exit code %d:\n%s\n%s" % (what, result.return_code, result.stdout, result.stderr))
    return result.stdout

def host_python(rctx, interpreter):
    """The absolute path of the real interpreter behind `interpreter` on PATH.

    Version managers such as pyenv put shims on PATH; resolving through sys.executable
    gives the interpreter itself, whose changes then refetch the repository. A pyenv
    shim of a version that is not the active one (`python3.12` while 3.11 is global)
    answers only when asked for that version, so a name `pythonX.Y` is asked with
    PYENV_VERSION=X.Y (which anything but pyenv ignores).
    """
    found = rctx.which(interpreter)
    if not found:
        fail("no `%s` on PATH: a Python 3 interpreter is needed to run pip" % interpreter)
    version = interpreter[len("python"):]
    environment = {"PYENV_VERSION": version} if "." in version else {}
    python = execute_or_fail(
        rctx,
        [found, "-c", "import sys; print(sys.executable)"],
        "asking %s for its executable" % found,
        environment = environment,
    ).strip()
    rctx.watch(python)
    return python
