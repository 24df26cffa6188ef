"""Lifecycle leak test: create / workspace size / execute / destroy cycles of every
operator through the C ABI, after which host memory (and device memory, on a GPU
backend) must be where it was; then 100,000 calls of ort.<op> over changing shapes,
which churn the descriptor cache: it must stay within its capacity, hold no more
memory at the end than after warm-up, and be empty once cleared.

    python tests/lifecycle_test.py --backend=cpu [--cycles=100000]

Bazel runs it on cpu as //tests:lifecycle_cpu; under --config=asan LeakSanitizer
then also checks that nothing allocated by the cycles became unreachable. The
GPU-runner bundle runs it with --backend=nvidia.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import sys
import tempfile
import time

import torch

from operator_runtime.errors import Status
from operator_runtime.operator_table import Kind
from operator_runtime_testing.c_abi import (
    BACKEND_CODES,
    ViewPointer,
    load_library,
    make_view,
    operator_names,
)

# A small problem keeps the cycles about the runtime's own bookkeeping; 33
# columns make rows that are not a whole number of vectors.
SHAPE = (4, 33)
WARMUP_CYCLES = 1_000
# Growth allowed for allocator noise: a leak of 11 bytes a cycle exceeds it.
MAX_HOST_GROWTH = 1 << 20
MAX_DEVICE_GROWTH = 1 << 20

LIB = load_library()
# LeakSanitizer's on-demand check, present when the process runs under ASan.
LEAK_CHECK = getattr(ctypes.CDLL(None), "__lsan_do_recoverable_leak_check", None)


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def device_used_bytes(backend: str) -> int:
    if backend == "cpu":
        return 0
    free, total = torch.cuda.mem_get_info()
    return total - free


class Problem:
    """One valid call of an operator, its views and buffers built once."""

    def __init__(self, name: str, backend: str):
        self.op = LIB.oprt_find_operator(name.encode()).contents
        self.backend = BACKEND_CODES[backend]
        device = "cpu" if backend == "cpu" else "cuda"
        out_shape = SHAPE[:-1] if self.op.kind == Kind.REDUCTION else SHAPE
        self.tensors = [torch.ones(out_shape, device=device)]
        self.tensors += [torch.ones(SHAPE, device=device) for _ in range(self.op.num_inputs)]
        views = [make_view(t.data_ptr(), t.dtype, t.shape, t.stride()) for t in self.tensors]
        self.views = views
        self.input_views = (ViewPointer * self.op.num_inputs)(
            *[ctypes.pointer(v) for v in views[1:]]
        )
        self.input_data = (ctypes.c_void_p * self.op.num_inputs)(
            *[t.data_ptr() for t in self.tensors[1:]]
        )
        self.workspace = None
        self.stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None

    def check(self, status: int, what: str) -> None:
        if status != Status.SUCCESS:
            message = LIB.oprt_last_error_message().decode()
            raise AssertionError(f"{self.op.name.decode()}: {what} failed ({status}): {message}")

    def cycle(self) -> None:
        desc = ctypes.c_void_p()
        self.check(self.op.create(ctypes.byref(desc), self.backend, ctypes.pointer(self.views[0]),
                                  self.input_views, None), "create")
        size = ctypes.c_size_t()
        self.check(self.op.get_workspace_size(desc, ctypes.byref(size)), "get_workspace_size")
        if size.value and (self.workspace is None or self.workspace.numel() < size.value):
            self.workspace = torch.empty(size.value, dtype=torch.uint8,
                                         device=self.tensors[0].device)
        workspace = self.workspace.data_ptr() if size.value else None
        self.check(self.op.execute(desc, workspace, size, self.tensors[0].data_ptr(),
                                   self.input_data, self.stream), "execute")
        self.check(self.op.destroy(desc), "destroy")


def run(name: str, backend: str, cycles: int) -> bool:
    problem = Problem(name, backend)
    for _ in range(WARMUP_CYCLES):
        problem.cycle()
    if backend != "cpu":
        torch.cuda.synchronize()
    host_before, device_before = resident_bytes(), device_used_bytes(backend)
    start = time.perf_counter()
    for _ in range(cycles):
        problem.cycle()
    if backend != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    host_growth = resident_bytes() - host_before
    device_growth = device_used_bytes(backend) - device_before
    # ASan holds freed blocks in quarantine, so under it resident memory moves
    # without a leak; LeakSanitizer judges the host side there instead.
    host_ok = LEAK_CHECK is not None or host_growth <= MAX_HOST_GROWTH
    ok = host_ok and device_growth <= MAX_DEVICE_GROWTH
    print(f"{name:<11} {backend:<7} {cycles} cycles in {seconds:6.2f} s "
          f"({1e6 * seconds / cycles:5.1f} us each); host memory {host_growth / 1024:+.0f} KiB, "
          f"device memory {device_growth / 1024:+.0f} KiB{'' if ok else '  FAILED'}")
    return ok


# Distinct row lengths the cache test cycles through: more than the cache holds.
CACHE_SHAPES = 600
CACHE_CAPACITY = 256


def cache_run(backend: str, calls: int) -> bool:
    """calls of every ort.<op> and ort.<op>_ (in turn) over CACHE_SHAPES layouts."""
    import operator_runtime as ort

    device = "cpu" if backend == "cpu" else "cuda"
    ort.set_descriptor_cache_capacity(CACHE_CAPACITY)
    ort.clear_descriptor_cache()
    inputs = [torch.ones(4, 1 + n, device=device) for n in range(CACHE_SHAPES)]
    outs = [torch.empty_like(x) for x in inputs]

    def call(i: int) -> None:
        x, out = inputs[i % CACHE_SHAPES], outs[i % CACHE_SHAPES]
        kind = i % 5
        if kind == 0:
            ort.softmax(x, backend=backend)
        elif kind == 1:
            ort.relu_(out, x, 0.1, backend=backend)
        elif kind == 2:
            ort.vector_add_(out, x, x, backend=backend)
        elif kind == 3:
            ort.reduce_sum(x, dim=-1, backend=backend)
        else:
            ort.copy_(out, x, backend=backend)

    for i in range(2 * CACHE_SHAPES * 5):
        call(i)
    if backend != "cpu":
        torch.cuda.synchronize()
    host_before, device_before = resident_bytes(), device_used_bytes(backend)
    largest = 0
    start = time.perf_counter()
    for i in range(calls):
        call(i)
        if i % 997 == 0:
            largest = max(largest, ort.descriptor_cache_info()["size"])
    if backend != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    host_growth = resident_bytes() - host_before
    device_growth = device_used_bytes(backend) - device_before
    info = ort.descriptor_cache_info()
    ort.clear_descriptor_cache()
    emptied = ort.descriptor_cache_info()["size"] == 0
    bounded = max(largest, info["size"]) <= CACHE_CAPACITY
    host_ok = LEAK_CHECK is not None or host_growth <= MAX_HOST_GROWTH
    ok = bounded and emptied and host_ok and device_growth <= MAX_DEVICE_GROWTH
    print(f"cache       {backend:<7} {calls} calls over {CACHE_SHAPES * 5} layouts in {seconds:6.2f} s; "
          f"size at most {max(largest, info['size'])} of {CACHE_CAPACITY}, {info['misses']} misses, "
          f"{'emptied' if emptied else 'NOT emptied'} by clear; host memory "
          f"{host_growth / 1024:+.0f} KiB, device memory {device_growth / 1024:+.0f} KiB"
          f"{'' if ok else '  FAILED'}")
    return ok


# A leak is ours when its allocation stack passes through the runtime or its binding,
# except what the binding's module initialisation allocates once for the process's life
# (pybind11's function records, which LeakSanitizer cannot see referenced).
OUR_FRAME = re.compile(r"\boprt|liboperator_runtime|operator_runtime/_C")
MODULE_INIT = re.compile(r"pybind11_init__C|PyInit__C")


def leak_sanitizer_check() -> bool:
    """Under ASan, asks LeakSanitizer for unreachable allocations now, and fails on
    any whose allocation stack passes through our code. The interpreter and torch
    keep some allocations only in places LeakSanitizer does not scan; those are
    counted and shown, not judged."""
    if LEAK_CHECK is None:
        print("LeakSanitizer: not loaded (tools/bazel test //tests:lifecycle_cpu --config=asan runs it)")
        return True
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile() as report_file:
        os.dup2(report_file.fileno(), 2)
        try:
            LEAK_CHECK()
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
        report_file.seek(0)
        report = report_file.read().decode(errors="replace")
    leaks = re.split(r"\n(?=(?:Direct|Indirect) leak of )", report)[1:]
    ours = [leak for leak in leaks if OUR_FRAME.search(leak) and not MODULE_INIT.search(leak)]
    once = sum(1 for leak in leaks if MODULE_INIT.search(leak))
    print(f"LeakSanitizer: {len(ours)} leaks from the runtime; {once} from the binding's module "
          f"initialisation (once per process) and {len(leaks) - len(ours) - once} elsewhere "
          f"(the interpreter, torch), not judged")
    for leak in ours:
        print(leak)
    return not ours


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=sorted(BACKEND_CODES))
    parser.add_argument("--cycles", type=int, default=100_000)
    args = parser.parse_args(argv)
    code = BACKEND_CODES[args.backend]
    if not LIB.oprt_backend_available(code):
        print(f"FAILED: backend {args.backend!r} cannot run here", file=sys.stderr)
        return 1
    LIB.oprt_set_backend(code)
    results = [run(name, args.backend, args.cycles) for name in operator_names(LIB)]
    results.append(cache_run(args.backend, args.cycles))
    results.append(leak_sanitizer_check())
    print("lifecycle:", "passed" if all(results) else "FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
