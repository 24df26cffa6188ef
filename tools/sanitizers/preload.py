"""Runs a command with the AddressSanitizer runtime preloaded.

`--config=asan` passes this as Bazel's --run_under. The tests are Python, and the
interpreter is not built with ASan, so the runtime that our instrumented libraries
need must be in the process before them: LD_PRELOAD, with the libraries that the C++
compiler which built them ships (`gcc -print-file-name=libasan.so`; CC overrides gcc).
libstdc++ is preloaded too: ASan wraps C++ `throw` when it starts and must find the
real one then, and Python itself does not link libstdc++.
"""

from __future__ import annotations

import os
import subprocess
import sys


def compiler_library(compiler: str, name: str) -> str:
    found = subprocess.run(
        [compiler, f"-print-file-name={name}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(found):
        sys.exit(f"preload: {compiler} has no {name}; install its runtime "
                 "(Debian, gcc 12: libasan8 and libstdc++-12-dev)")
    return found


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: preload.py COMMAND [ARGS...]")
    compiler = os.environ.get("CC", "gcc")
    preload = [compiler_library(compiler, name) for name in ("libasan.so", "libstdc++.so")]
    if os.environ.get("LD_PRELOAD"):
        preload.append(os.environ["LD_PRELOAD"])
    os.execvpe(sys.argv[1], sys.argv[1:], dict(os.environ, LD_PRELOAD=" ".join(preload)))


if __name__ == "__main__":
    main()
