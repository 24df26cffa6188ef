"""docs_check's rules for quoted code and example operators, on a small fake workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import docs_check

SOURCE = "int a;\nint b;\nint c;\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "MODULE.bazel").write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cc").write_text(SOURCE)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("")
    return tmp_path


def problems(root: Path, page: str) -> list[str]:
    (root / "docs" / "page.md").write_text(page)
    return docs_check.check(root).get("docs/page.md", [])


def test_an_excerpt_that_matches_its_lines_passes(root):
    assert problems(root, "`src/k.cc` lines 2–3\n```cpp\nint b;\nint c;\n```\n") == []
    assert problems(root, "`src/k.cc` lines 1-1:\n~~~\nint a;\n~~~\n") == []


@pytest.mark.parametrize(
    "page, problem",
    [
        ("`src/k.cc` lines 2–3\n```cpp\nint b;\nint d;\n```\n", "the quoted code differs from the file"),
        ("`src/k.cc` lines 1–2\n```cpp\nint b;\nint c;\n```\n", "the quoted code differs from the file"),
        ("`src/k.cc` lines 3–4\n```cpp\nint c;\n```\n", "the file has 3 lines"),
        ("`src/k.cc` lines 1–1\n\n```cpp\nint a;\n```\n", "no fenced block on the next line"),
        ("`src/gone.cc` lines 1–1\n```cpp\nint a;\n```\n", "no such file"),
    ],
)
def test_an_excerpt_that_drifted_fails(root, page, problem):
    found = problems(root, page)
    assert len(found) == 1 and found[0].endswith(problem), found


def test_comments_inside_an_excerpt_are_not_labels(root):
    (root / "src" / "c.cc").write_text("// a comment\n//pkg:target\n")
    assert problems(root, "`src/c.cc` lines 1–2\n```cpp\n// a comment\n//pkg:target\n```\n") == []


def test_example_operator_references_are_checked_against_the_generated_files(root):
    header = "<!-- docs_check: new_op --name=gelu --kind=elementwise -->\n"
    assert problems(root, header + "`ops/gelu/gelu_functor.h`, `//ops/gelu:test_cpu`, `//ops/gelu`\n") == []
    assert problems(root, header + "`ops/gelu/gelu_functr.h` and `//ops/gelu:tests`\n") == [
        "label //ops/gelu:tests",
        "path ops/gelu/gelu_functr.h",
    ]


def test_new_op_output_must_be_what_new_op_prints(root):
    header = "<!-- docs_check: new_op --name=gelu --kind=elementwise -->\n"
    stale = header + "```\nnew_op: wrote 9 files in /tmp/ws:\n  ops/gelu/gelu.h\n```\n"
    assert problems(root, stale) == ["new_op output differs from what new_op prints now (--write)"]
    regenerated = docs_check.regenerated_new_op_output(stale)
    assert "new_op: wrote 5 files in /tmp/ws:\n  ops/gelu/BUILD.bazel\n" in regenerated
    assert problems(root, regenerated) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
