"""Fails when README.md or docs/**/*.md names a missing path or label, or quotes code that changed.

What is checked (one rule per kind of reference):

- Link targets, `[text](target)` and `![alt](target)`: every target that is not a URL
  (`scheme:`) or a pure `#anchor` must exist, relative to the Markdown file's folder,
  with any `#anchor` removed.
- Inline code spans: a span without whitespace whose first `/`-separated component is an
  existing top-level entry of the workspace (`runtime`, `ops`, `docs`, `.ci`, ...) is a
  repository path and must exist. Spans starting elsewhere (`oprt-bundle/run_tests.sh`,
  `~/.cache/...`, `ac/<sha256>`, URLs, flags) are not repository paths and are skipped,
  and so is anything under `bazel-*` (build outputs). A typo in the first component
  therefore goes unnoticed; every later component is checked.
- Bazel labels `//pkg` and `//pkg:name`, anywhere in the text, fenced blocks included:
  `pkg/BUILD.bazel` must exist and, with `:name` (default: the package's last
  component), the name must be a target there: a `name = "..."` in the BUILD file, a
  file of the package, a name a macro (`oprt_operator`, `operator_runtime_binding`, ...:
  `_MACRO_TARGETS`) declares when the BUILD file calls it, or `<name>.so` of a
  `pybind_extension`. Patterns (`//...`, `:all`)
  and labels of other repositories (`@repo//...`, `@//...`) are skipped, and so is a bare
  `//` (a C++ comment in a code block).
- Placeholders: `<op>` (any `<...>`) and `*` match any one component and `{h,cc}`
  expands to each alternative; a reference with placeholders must match at least one
  existing path (`ops/<op>/<op>_functor.h`).
- Quoted code: a line that is only a code span naming a file and a line range, then a
  fenced block on the very next line, declares an excerpt; the block must equal those
  lines of the file exactly, so a page fails when the code it quotes changes:

      `runtime/elementwise/elementwise_cuda.cuh` lines 64–101
      ```cpp
      ...lines 64 to 101 of the file, unchanged...
      ```

  The range is `lines A–B` (en dash or `-`, A ≤ B, 1-based, inclusive); a trailing `:` is
  allowed. Such a declaration line without a fenced block right after it is an error.
  Labels inside a verified excerpt are source text, not references, and are not checked.
- Example operators: a page that walks through generating an operator declares it with
  `<!-- docs_check: new_op --name=<name> --kind=<kind> -->`; its references to
  `ops/<name>/...` and `//ops/<name>:...` are then checked against the files
  `tools/new_op/new_op.py` would generate instead of the tree, and a fenced block that
  starts `new_op: wrote` must be what new_op prints for it (in the workspace the block
  names), so its file list and count are new_op's own. `--write` rewrites those blocks
  from new_op instead of checking them.

The workspace is read through the runfiles: this file's runfiles entry is a symlink into
the source tree, so resolving it gives the real checkout. Bazel cannot declare every file
of every package as an input, so the test is tagged `external` and always runs.

Run: `tools/bazel test //tools:docs_check` (or `python3 tools/docs_check.py [--write]`).
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "new_op"))
import new_op  # noqa: E402  (tools/new_op/new_op.py, beside this file)

# The names macros declare without a `name = "..."` in the BUILD file that calls them:
# oprt_operator (ops/defs.bzl, with ops/metax.bzl and ops/tilelang.bzl) besides the operator's own name,
# metax_runtime_libraries (ops/metax.bzl) in //runtime, and operator_runtime_binding
# (python/defs.bzl) besides its wheel, with the prefix "" of //python's own _C.
_MACRO_TARGETS = {
    "oprt_operator(": (
        "header",
        "frontend",
        "cpu",
        "nvidia",
        "metax",
        "metax_compat",
        "metax_compat_kernels",
        "cases",
        "bundle_files",
        "test_cpu",
        "test_nvidia",
        "test_metax",
        "test",
        "tilelang_kernels",
        "tilelang_compile_test",
        "test_tilelang",
        "test_tilelang_eager",
        "test_tilelang_lazy",
    ),
    "operator_runtime_binding(": (
        "torch_kernels",
        "operator_runtime/_C",
        "operator_runtime/_C.so",
        "build_info",
        "operator_runtime/_build_info.py",
    ),
    "metax_runtime_libraries(": tuple(
        f"{prefix}{variant}{suffix}"
        for variant in ("metax", "metax_compat")
        for prefix, suffix in (("", "_backend"), ("elementwise_", ""), ("reduction_", ""))
    ),
}
_OPERATOR_MACRO_TARGETS = _MACRO_TARGETS["oprt_operator("]

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LABEL = re.compile(r"(?<![\w@:/.])//([\w\-./<>*]*)(?::([\w\-./+<>*]+))?")
_NAME_ATTRIBUTE = re.compile(r"\bname\s*=\s*\"([^\"]+)\"")
_PYBIND_NAME = re.compile(r"pybind_extension\(\s*name\s*=\s*\"([^\"]+)\"")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
_EXCERPT = re.compile(
    r"^`(?P<path>[^`\s]+)` lines (?P<first>\d+)[–-](?P<last>\d+):?[ \t]*\n"
    r"(?P<fence>(?P<marks>```|~~~)[^\n]*\n(?P<body>.*?)^(?P=marks)[ \t]*$)?",
    re.MULTILINE | re.DOTALL,
)
_EXAMPLE_OPERATOR = re.compile(r"<!-- docs_check: new_op --name=(\w+) --kind=(\w+) -->")
_NEW_OP_OUTPUT = re.compile(r"^```\n(new_op: wrote \d+ files in (\S+):\n.*?)^```$", re.MULTILINE | re.DOTALL)


def workspace_root() -> Path:
    root = Path(__file__).resolve().parents[1]
    if not (root / "MODULE.bazel").is_file():
        sys.exit(f"docs_check: {root} is not the workspace root (no MODULE.bazel)")
    return root


def expand_braces(pattern: str) -> list[str]:
    """`a.{h,cc}` -> [`a.h`, `a.cc`]; nested braces are not used in the docs."""
    parts = re.split(r"\{([^{}]*)\}", pattern)
    choices = [[part] if i % 2 == 0 else part.split(",") for i, part in enumerate(parts)]
    return ["".join(combination) for combination in itertools.product(*choices)]


def matches(root: Path, relative: str) -> list[Path]:
    """The existing paths under `root` that `relative` (no braces) names; `<...>` and `*`
    match one component, `**` any number."""
    pattern = re.sub(r"<[^<>/]*>", "*", relative).rstrip("/")
    if "*" not in pattern:
        return [root / pattern] if (root / pattern).exists() else []
    matched = glob.glob(glob.escape(str(root)) + "/" + pattern, recursive=True)
    return [Path(match) for match in sorted(matched)]


def path_exists(root: Path, relative: str) -> bool:
    """Whether every brace alternative of `relative` names an existing path under `root`."""
    return all(matches(root, candidate) for candidate in expand_braces(relative))


def prose_and_spans(text: str) -> tuple[str, list[str]]:
    """The text without fenced blocks, and the inline code spans in it."""
    prose = _FENCE.sub("", text)
    return prose, [match.group(2).strip() for match in _CODE_SPAN.finditer(prose)]


def broken_links(root: Path, doc: Path, prose: str) -> list[str]:
    problems = []
    for target in (match.group(1) for match in _LINK.finditer(prose)):
        path = target.split("#", 1)[0]
        if not path or _URL.match(path):
            continue
        resolved = (doc.parent / path).resolve()
        if not resolved.exists():
            problems.append(f"link {target}")
    return problems


def broken_paths(root: Path, spans: list[str]) -> list[str]:
    top_level = {entry.name for entry in root.iterdir() if not entry.name.startswith("bazel-")}
    problems = []
    for span in spans:
        if re.search(r"\s", span) or "://" in span or "/" not in span:
            continue
        if span.split("/", 1)[0] not in top_level:
            continue
        if not path_exists(root, span):
            problems.append(f"path {span}")
    return problems


def target_names(build_file: Path) -> set[str]:
    text = build_file.read_text()
    names = set(_NAME_ATTRIBUTE.findall(text))
    names.update(name + ".so" for name in _PYBIND_NAME.findall(text))
    for call, declared in _MACRO_TARGETS.items():
        if call in text:
            names.update(declared)
    return names


def label_exists(root: Path, package: str, name: str | None) -> bool:
    for package_dir in matches(root, package):
        build_file = package_dir / "BUILD.bazel"
        if not build_file.is_file():
            continue
        wanted = name if name is not None else package_dir.name
        pattern = re.sub(r"<[^<>/]*>", "*", wanted)
        if any(fnmatch.fnmatchcase(target, pattern) for target in target_names(build_file)):
            return True
        if path_exists(package_dir, wanted):
            return True
    return False


def broken_labels(root: Path, text: str) -> list[str]:
    problems = []
    for match in _LABEL.finditer(text):
        package, name = match.group(1).rstrip("/"), match.group(2)
        if package.endswith("...") or name in ("all", "*") or (not package and name is None):
            continue
        if not label_exists(root, package, name):
            problems.append(f"label {match.group(0)}")
    return problems


def drifted_excerpts(root: Path, text: str) -> tuple[str, list[str]]:
    """The text without its excerpts' fenced blocks, and the excerpts that do not match
    their files."""
    problems = []
    for match in _EXCERPT.finditer(text):
        where = f"excerpt {match.group('path')} lines {match.group('first')}-{match.group('last')}"
        source = root / match.group("path")
        first, last = int(match.group("first")), int(match.group("last"))
        if match.group("fence") is None:
            problems.append(f"{where}: no fenced block on the next line")
        elif not source.is_file():
            problems.append(f"{where}: no such file")
        else:
            lines = source.read_text().splitlines(keepends=True)
            if not 1 <= first <= last <= len(lines):
                problems.append(f"{where}: the file has {len(lines)} lines")
            elif "".join(lines[first - 1 : last]) != match.group("body"):
                problems.append(f"{where}: the quoted code differs from the file")
    return _EXCERPT.sub("", text), problems


def example_operator_files(text: str) -> dict[str, set[str]]:
    """The files each example operator a page declares would have, by operator name."""
    examples = {}
    for name, kind in _EXAMPLE_OPERATOR.findall(text):
        files = new_op.planned_files(new_op.Request(name, kind))
        examples[name] = {str(path) for path in files}
    return examples


def regenerated_new_op_output(text: str) -> str:
    """text with each `new_op: wrote` block replaced by what new_op prints for the page's
    example operator (the first one it declares) in the workspace the block names."""
    examples = _EXAMPLE_OPERATOR.findall(text)
    if not examples:
        return text
    request = new_op.Request(*examples[0])
    written = new_op.paths_written(new_op.planned_files(request))

    def regenerate(match: re.Match) -> str:
        return "```\n" + new_op.report(request, written, Path(match.group(2))) + "```"

    return _NEW_OP_OUTPUT.sub(regenerate, text)


def broken_example_references(examples: dict[str, set[str]], spans: list[str], text: str):
    """Problems in references to example operators, and the spans and text without them."""
    problems, others = [], []
    for span in spans:
        name = next((name for name in examples if span.startswith(f"ops/{name}/")), None)
        if name is None:
            others.append(span)
        elif not any(
            re.fullmatch(re.sub(r"<[^<>/]*>", "[^/]+", re.escape(span.rstrip("/"))) + "(/.*)?", path)
            for path in examples[name]
        ):
            problems.append(f"path {span}")
    for name in examples:
        for match in re.finditer(rf"//ops/{name}\b(?::([\w\-./+]+))?", text):
            if match.group(1) not in (None, name, *_OPERATOR_MACRO_TARGETS):
                problems.append(f"label {match.group(0)}")
        text = re.sub(rf"//ops/{name}\b(?::[\w\-./+]+)?", "", text)
    return problems, others, text


def check(root: Path) -> dict[str, list[str]]:
    """Broken references per Markdown file (relative path -> sorted problems)."""
    docs = [root / "README.md"] + sorted((root / "docs").glob("**/*.md"))
    report = {}
    for doc in docs:
        original = doc.read_text()
        text, excerpt_problems = drifted_excerpts(root, original)
        if regenerated_new_op_output(original) != original:
            excerpt_problems.append("new_op output differs from what new_op prints now (--write)")
        prose, spans = prose_and_spans(text)
        example_problems, spans, text = broken_example_references(
            example_operator_files(text), spans, text
        )
        problems = (
            excerpt_problems
            + example_problems
            + broken_links(root, doc, prose)
            + broken_paths(root, spans)
            + broken_labels(root, text)
        )
        if problems:
            report[str(doc.relative_to(root))] = sorted(set(problems))
    return report


def write_new_op_output(root: Path) -> None:
    for doc in sorted((root / "docs").glob("**/*.md")):
        text = doc.read_text()
        if regenerated_new_op_output(text) != text:
            doc.write_text(regenerated_new_op_output(text))
            print(f"docs_check: rewrote the new_op output in {doc.relative_to(root)}")


def main() -> int:
    root = workspace_root()
    if sys.argv[1:] == ["--write"]:
        write_new_op_output(root)
    report = check(root)
    if not report:
        print("docs_check: every path and label in README.md and docs/ exists")
        return 0
    for doc, problems in report.items():
        for problem in problems:
            print(f"{doc}: {problem}" if problem.startswith("excerpt") else f"{doc}: {problem} does not exist")
    return 1


if __name__ == "__main__":
    sys.exit(main())
