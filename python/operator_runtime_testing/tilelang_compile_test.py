"""Compiles every TileLang kernel of one operator without a GPU, and runs what the CPU can.

    OPRT_TILELANG_NVCC=PATH/TO/cu13/bin/nvcc python tilelang_compile_test.py --op=copy

Each kernel ops/<op>/tilelang/<op>.py registers, in both styles and every
dtype, with the compile-time arguments of the first variant the backend may
choose for it (backend.variants) for each vector width (one element, and 16
bytes) and, for row kernels, with and without the edges of rows that are not
whole vectors (`peeled`), is lowered and compiled for {"kind": "cuda",
"arch": "sm_90"} with that nvcc (CUDA_HOME is set to its toolkit) and must
leave an sm_90 cubin holding the kernel in a fresh TileLang cache; a grid
kernel (compiled for `blocks_per_sm`) must also hold a grid barrier, its
launch bounds, and a host library asking for a cooperative launch.
Elementwise kernels are also compiled for TileLang's "c" target and run on
CPU tensors in f32 and f16 (the C generator has no bfloat16), compared with
the operator's reference; row kernels use GPU fragments, which the "c" target
cannot lower, so their math is checked only by the GPU tests. Bazel's
//ops/<op>:tilelang_compile_test runs this; it needs no GPU.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import sys
import tempfile

import pytest
import torch

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SM_90 = 90

OP_ENV = "OPRT_TILELANG_TEST_OP"


def cubins(directory: pathlib.Path) -> set[pathlib.Path]:
    return set(directory.rglob("*.cubin"))


def cubin_arch(data: bytes) -> int:
    """The SM number a CUDA ELF's e_flags encode (bits 8..15 in CUDA 12+ cubins)."""
    assert data[:4] == ELF_MAGIC, "not an ELF file"
    assert int.from_bytes(data[18:20], "little") == EM_CUDA, "not a CUDA ELF"
    flags = int.from_bytes(data[48:52], "little")
    return (flags >> 8) & 0xFF


KERNEL_NAME = re.compile(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(")


@pytest.fixture(scope="module")
def compiler():
    from operator_runtime.tilelang import compiler

    return compiler


def _styles_and_dtypes(dtypes):
    return [(style, dtype) for style in ("eager", "lazy") for dtype in dtypes]


def _kernels_of(op: str, dtype: str) -> list[tuple[str, dict]]:
    """(kernel, compile-time arguments): each of op's own kernels once per vector
    width and `peeled`, as the backend may compile it."""
    from operator_runtime.tilelang import backend

    first: dict[tuple[str, int | None, bool | None], dict] = {}
    for kernel_op, kernel, consts in backend.variants(op, dtype):
        if kernel_op == op:
            first.setdefault((kernel, consts.get("vec"), consts.get("peeled")), consts)
    return [(kernel, consts) for (kernel, _, _), consts in first.items()]


@pytest.mark.parametrize("style,dtype", _styles_and_dtypes(("float32", "float16", "bfloat16")))
def test_compiles_to_an_sm90_cubin(compiler, style, dtype, tmp_path):
    from operator_runtime.tilelang import registry

    op = os.environ[OP_ENV]
    compiled = _kernels_of(op, dtype)
    # Kernels for some dtypes only (softmax's shared_rows: 16-bit) are absent from the others.
    assert {kernel for kernel, _ in compiled} <= set(registry.kernels(op))
    every_dtype = {kernel for d in ("float32", "float16", "bfloat16") for kernel, _ in _kernels_of(op, d)}
    assert sorted(every_dtype) == registry.kernels(op)
    for kernel, consts in compiled:
        if "dtype" not in consts and dtype != "float32":
            continue  # a kernel of f32 statistics only: compiled (and cached by TileLang) once
        cache = tmp_path / f"{kernel}-vec{consts.get('vec', 1)}-{'peeled' if consts.get('peeled') else 'whole'}"
        compiler.set_cache_dir(str(cache))
        source = compiler.compile_kernel(op, kernel, style, consts, {"kind": "cuda", "arch": "sm_90"}).get_kernel_source()
        (name,) = set(KERNEL_NAME.findall(source))
        (cubin,) = cubins(cache)
        data = cubin.read_bytes()
        assert cubin_arch(data) == SM_90, (kernel, consts)
        assert name.encode() in data, f"{cubin} does not define {name}"
        if "blocks_per_sm" in consts:
            # A grid kernel: a grid barrier, registers kept for blocks_per_sm blocks an SM,
            # and a host library that has TVM's runtime launch it cooperatively.
            assert "cooperative_groups::this_grid().sync();" in source
            assert f"__launch_bounds__({consts['threads']}, {consts['blocks_per_sm']})" in source
            (library,) = cache.rglob("executable.so")
            assert b"tirx.use_cooperative_launch" in library.read_bytes()


def _cpu_cases(op: str, dtype: torch.dtype):
    """(inputs, params) of a few CPU problems: odd sizes, a full and a partial block."""
    generator = torch.Generator().manual_seed(0)
    from operator_runtime.ops import OPERATORS

    info = OPERATORS[op]
    for numel in (1, 1000, 4096, 5001):
        inputs = [torch.randn(numel, generator=generator).to(dtype) for _ in info.input_names]
        inputs[0][::7] = float("nan")
        inputs[0][3::11] = -float("inf")
        slopes = [0.0, 0.1] if "negative_slope" in info.param_names else [None]
        for slope in slopes:
            yield inputs, ({} if slope is None else {"negative_slope": slope})


def _runs_on_the_c_target(op: str) -> bool:
    from operator_runtime.ops import OPERATORS, Kind

    return OPERATORS[op].kind == Kind.ELEMENTWISE


@pytest.mark.parametrize("style,dtype", _styles_and_dtypes(("float32", "float16")))
def test_runs_on_the_c_target(compiler, style, dtype, tmp_path):
    if not _runs_on_the_c_target(os.environ[OP_ENV]):
        pytest.skip(f"{os.environ[OP_ENV]}'s kernels use GPU fragments, which the c target cannot lower")
    import importlib

    spec = importlib.import_module(f"ops.{os.environ[OP_ENV]}.cases").OP
    compiler.set_cache_dir(str(tmp_path))
    kernel = compiler.compile_kernel(os.environ[OP_ENV], "flat", style, {"dtype": dtype}, "c")
    torch_dtype = getattr(torch, dtype)
    for inputs, params in _cpu_cases(os.environ[OP_ENV], torch_dtype):
        out = torch.empty_like(inputs[0])
        kernel(*inputs, out, *params.values())
        expected = spec.reference(*[tensor.clone() for tensor in inputs], **params)
        tolerance = spec.tolerances[torch_dtype]
        torch.testing.assert_close(out, expected, atol=tolerance.atol, rtol=tolerance.rtol, equal_nan=True)


class BazelShard:
    """pytest plugin for Bazel's test sharding (shard_count in ops/tilelang.bzl): the
    instances of each test function are dealt out in turn, the k-th to shard k % total,
    so the six (style, dtype) compilations land in six shards whatever order the
    functions are collected in."""

    def __init__(self, index: int, total: int):
        self.index, self.total = index, total

    def pytest_collection_modifyitems(self, config, items):
        dealt = collections.Counter()
        kept, deselected = [], []
        for item in items:
            turn = dealt[item.originalname]
            dealt[item.originalname] += 1
            (kept if turn % self.total == self.index else deselected).append(item)
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def _bazel_shard() -> list[BazelShard]:
    """The sharding plugin when Bazel runs this test in shards, after telling Bazel
    (TEST_SHARD_STATUS_FILE) that the test honours them."""
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    if total == 1:
        return []
    if os.environ.get("TEST_SHARD_STATUS_FILE"):
        pathlib.Path(os.environ["TEST_SHARD_STATUS_FILE"]).touch()
    return [BazelShard(int(os.environ["TEST_SHARD_INDEX"]), total)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", required=True)
    options, pytest_args = parser.parse_known_args(argv)
    os.environ[OP_ENV] = options.op
    os.environ.setdefault("TILELANG_CACHE_DIR", tempfile.mkdtemp(prefix="tilelang-cache-"))
    command = [__file__, "-p", "no:cacheprovider", "-rfEs", *pytest_args]
    junit_xml = os.environ.get("XML_OUTPUT_FILE")
    if junit_xml:
        command.append(f"--junitxml={junit_xml}")
    return int(pytest.main(command, plugins=_bazel_shard()))


if __name__ == "__main__":
    sys.exit(main())
