"""Runs the shared harness for one operator on one backend.

    python op_test_main.py --op=softmax --backend=cpu [pytest args...]

Bazel's per-operator py_test targets run this. It exits non-zero when any test
fails, when no test passed (nothing collected or everything deselected), and
at once, with a message, when the backend cannot run on this machine: a GPU
backend without its GPU fails rather than skips.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import pytest


class _PassCounter:
    """Counts tests whose call phase passed."""

    def __init__(self) -> None:
        self.passed = 0

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" and report.passed:
            self.passed += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", required=True)
    parser.add_argument("--backend", required=True)
    args, pytest_args = parser.parse_known_args(argv)

    import operator_runtime as ort

    available = ort.available_backends()
    if args.backend not in available:
        python_backend = ort.backends.python_backend(args.backend)
        reason = f": {python_backend.unavailable_reason()}" if python_backend else ""
        print(
            f"FAILED: the {args.op} tests need backend {args.backend!r}, which cannot run here{reason} "
            f"(available: {', '.join(available)}); a GPU backend needs its device and driver",
            file=sys.stderr,
        )
        return 1

    harness = importlib.util.find_spec("operator_runtime_testing.harness").origin
    command = [
        harness,
        "-p", "operator_runtime_testing.plugin",
        f"--op={args.op}",
        f"--backend={args.backend}",
        "-p", "no:cacheprovider",
        "--import-mode=importlib",
        "-rfE",
        *pytest_args,
    ]
    junit_xml = os.environ.get("XML_OUTPUT_FILE")
    if junit_xml:
        command.append(f"--junitxml={junit_xml}")
    counter = _PassCounter()
    status = int(pytest.main(command, plugins=[counter]))
    if status == 0 and counter.passed == 0:
        print(f"FAILED: no {args.op} test ran on backend {args.backend!r}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
