"""CI check of //tools:new_op: a generated operator builds, and its tests fail as "not implemented".

    python3 tools/new_op/ci_check.py [--nvidia] [--keep]

In a scratch copy of the workspace (the files `git ls-files` lists, tracked or untracked but
not ignored, as they are in the working tree) it runs `tools/bazel run //tools:new_op` for one
operator of each kind, one elementwise operator with named inputs and a parameter and one
normalization with two named inputs, then requires that:

- `tools/bazel build //ops/<op>/... --config=cpu` succeeds with no compiler warning in the
  generated files (with --nvidia, its front end, cpu and nvidia libraries also build under
  --config=nvidia). Warnings appear only for compiles that run, not for disk-cache hits,
  which is when neither the templates nor the headers they include changed;
- `tools/bazel test //ops/<op>:test_cpu --config=cpu` fails as a test (exit 3, not a build
  error) and its log holds the backend's "<op>: not implemented" message.

The copy has its own output base in the temporary folder and shares what can be shared:
`--config=disk` (the compile and link cache of every checkout) and Bazel's repository cache,
and the pip-installed repositories (the Python virtualenv, the CUDA wheels) are taken from
this workspace's output base with --override_repository when they are fetched there, so
nothing is downloaded again. The copy's Bazel server is shut down and the folder removed at
the end (--keep leaves the folder).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The scratch operators: one per kind, one with named inputs and a parameter (its generated
# front end builds the functor from the op table's values) and a normalization of two inputs (the
# reduction family's second input, as softmax_backward's), with new_op's arguments and
# the message each one's cpu test must show.
SCRATCH_OPERATORS = {
    "scratch_elementwise": (
        ["--kind=elementwise"],
        "scratch_elementwise: not implemented: ops/scratch_elementwise/"
        "scratch_elementwise_functor.h still sets kNotImplemented",
    ),
    "scratch_parameter": (
        ["--kind=elementwise", "--inputs=dy,x", "--params=negative_slope=0.0"],
        "scratch_parameter: not implemented: ops/scratch_parameter/"
        "scratch_parameter_functor.h still sets kNotImplemented",
    ),
    "scratch_reduction": (
        ["--kind=reduction"],
        "scratch_reduction: not implemented: write its cpu kernel in "
        "ops/scratch_reduction/cpu/scratch_reduction_cpu.cc",
    ),
    "scratch_normalization": (
        ["--kind=normalization", "--inputs=dy,y"],
        "scratch_normalization: not implemented: write its cpu kernel in "
        "ops/scratch_normalization/cpu/scratch_normalization_cpu.cc",
    ),
}
# Repositories filled by pip inside a repository rule (MODULE.bazel): Bazel's repository
# cache does not hold them, so a fresh output base would install them again.
PIP_REPOSITORIES = ("python_venv", "cuda")
TEST_FAILED = 3  # Bazel's exit code when the build succeeded and a test failed


class CheckFailed(Exception):
    pass


def log(message: str) -> None:
    print(f"new_op ci_check: {message}", flush=True)


def run(command: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    log("$ " + " ".join(command))
    begin = time.monotonic()
    result = subprocess.run(command, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log(f"  exit {result.returncode} after {time.monotonic() - begin:.1f} s")
    if check and result.returncode != 0:
        print(result.stdout[-6000:])
        raise CheckFailed(f"{' '.join(command)} failed with exit {result.returncode}")
    return result


def copy_workspace(root: Path, destination: Path) -> int:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, stdout=subprocess.PIPE,
    ).stdout.decode().split("\0")
    copied = 0
    for relative in filter(None, listed):
        source = root / relative
        if not source.is_file():  # deleted in the working tree
            continue
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        copied += 1
    return copied


def repository_overrides(root: Path) -> list[str]:
    """--override_repository flags pointing the pip repositories at root's fetched copies."""
    def answer(*command: str) -> str:
        result = subprocess.run(
            [str(root / "tools" / "bazel"), *command], cwd=root, check=True, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        return result.stdout.strip()

    output_base = answer("info", "output_base")
    mapping = json.loads(answer("mod", "dump_repo_mapping", ""))
    flags = []
    for apparent in PIP_REPOSITORIES:
        canonical = mapping.get(apparent)
        fetched = Path(output_base) / "external" / canonical if canonical else None
        if fetched is None or not (fetched / "BUILD.bazel").is_file():
            log(f"@{apparent} is not fetched in {root}'s output base: the copy fetches it itself")
            continue
        flags.append(f"--override_repository={canonical}={fetched}")
    return flags


def check_no_warnings(output: str, operators: list[str]) -> None:
    warnings = [
        line for line in output.splitlines()
        if "warning" in line.lower() and any(f"ops/{op}/" in line for op in operators)
    ]
    if warnings:
        raise CheckFailed("the generated code compiles with warnings:\n" + "\n".join(warnings))


def check_in(workspace: Path, base: Path, overrides: list[str], nvidia: bool) -> None:
    bazel = [str(workspace / "tools" / "bazel"), f"--output_base={base}"]
    cpu_flags = ["--config=cpu", "--config=disk", *overrides]
    for op, (arguments, _) in SCRATCH_OPERATORS.items():
        run([*bazel, "run", "//tools:new_op", *cpu_flags, "--", f"--name={op}", *arguments], workspace)
    # Under nvidia only each operator's own libraries: its tests would link every other
    # operator's CUDA kernels too.
    builds = [([f"//ops/{op}/..." for op in SCRATCH_OPERATORS], cpu_flags)]
    if nvidia:
        libraries = [f"//ops/{op}:{part}" for op in SCRATCH_OPERATORS for part in ("frontend", "cpu", "nvidia")]
        builds.append((libraries, ["--config=nvidia", "--config=disk", *overrides]))
    for targets, flags in builds:
        built = run([*bazel, "build", *targets, *flags], workspace)
        # Compilers warn only in actions that run, not in cache hits: the summary says which.
        log("  " + next((line for line in built.stdout.splitlines() if " processes: " in line), ""))
        check_no_warnings(built.stdout, list(SCRATCH_OPERATORS))
    for op, (_, message) in SCRATCH_OPERATORS.items():
        tested = run([*bazel, "test", f"//ops/{op}:test_cpu", *cpu_flags], workspace, check=False)
        if tested.returncode != TEST_FAILED:
            print(tested.stdout[-6000:])
            raise CheckFailed(f"//ops/{op}:test_cpu exited {tested.returncode}, not {TEST_FAILED} (tests failed)")
        test_log = (workspace / "bazel-testlogs" / "ops" / op / "test_cpu" / "test.log").read_text()
        if message not in test_log:
            print(test_log[-6000:])
            raise CheckFailed(f"//ops/{op}:test_cpu failed, but its log lacks {message!r}")
        log(f"//ops/{op}:test_cpu fails as it should: {message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvidia", action="store_true", help="also build the operators for nvidia")
    parser.add_argument("--keep", action="store_true", help="leave the scratch folder in place")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    begin = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="oprt-new-op-check-"))
    workspace, base = scratch / "ws", scratch / "output_base"
    try:
        log(f"copied {copy_workspace(root, workspace)} files of {root} to {workspace}")
        check_in(workspace, base, repository_overrides(root), args.nvidia)
    except CheckFailed as failure:
        log(f"FAILED: {failure}")
        return 1
    finally:
        if base.exists():
            run([str(workspace / "tools" / "bazel"), f"--output_base={base}", "shutdown"], workspace, check=False)
        if not args.keep:
            subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)
            shutil.rmtree(scratch, ignore_errors=True)
    log(f"passed in {time.monotonic() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
