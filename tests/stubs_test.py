"""python/operator_runtime/ops.pyi is what //python:gen_stubs renders from this
build's operator table, parses, and declares every public name of the module."""

from __future__ import annotations

import ast
import inspect
import sys
import unittest
from pathlib import Path

import operator_runtime as ort
from operator_runtime import ops
from operator_runtime._internal import stubs


def _checked_in() -> str:
    return (Path(__file__).resolve().parent.parent / stubs.STUB_PATH).read_text()


class StubsTest(unittest.TestCase):
    def test_checked_in_stub_is_current(self) -> None:
        self.assertEqual(_checked_in(), stubs.render(),
                         "ops.pyi is stale: run `tools/bazel run //python:gen_stubs` and commit it")

    def test_stub_declares_every_public_name(self) -> None:
        tree = ast.parse(_checked_in())
        declared = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        declared |= {alias.asname for node in tree.body if isinstance(node, ast.ImportFrom)
                     for alias in node.names if alias.asname}
        self.assertEqual(sorted(set(ops.__all__) - declared), [])
        for name in ("softmax", "softmax_", "prepare_softmax", "reduce_sum"):
            self.assertIn(name, declared)
            self.assertIn(name, ort.__all__)

    def test_generated_signature_matches_the_function(self) -> None:
        function = next(node for node in ast.parse(_checked_in()).body
                        if isinstance(node, ast.FunctionDef) and node.name == "reduce_sum")
        names = [a.arg for a in function.args.args] + [a.arg for a in function.args.kwonlyargs]
        self.assertEqual(names, list(inspect.signature(ort.reduce_sum).parameters))


if __name__ == "__main__":
    sys.exit(unittest.main())
