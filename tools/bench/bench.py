"""The oprt benchmark: every operator's benchmark cases against PyTorch, in one run.

    bazel run //tools:bench -- --op=all [--backend=nvidia] [--dtype=f32] [--shapes=8192x8192]

Per case: median latency, bytes moved and FLOPs from the operator's declared
formulas (ops/<op>/cases.py), GB/s, the share of this device's copy bandwidth
measured at start-up, and the same for the PyTorch peer timed in the same process,
interleaved with ours, with the speed ratio (peer time / our time: > 1 is faster).
"""

from __future__ import annotations

import importlib
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace

import torch
from absl import app, flags

import operator_runtime as ort
from operator_runtime.ops import OPERATORS
from operator_runtime_testing.cases import DTYPE_NAMES, BenchmarkCase, out_shape
from tools.bench.report import write_report

FLAGS = flags.FLAGS
flags.DEFINE_string("op", "all", "Operator name, a comma list, or 'all'.")
flags.DEFINE_string("backend", None, "oprt backend (default: nvidia when a GPU is present, else cpu).")
flags.DEFINE_string("dtype", "all", "f32, f16, bf16, a comma list, or 'all'.")
flags.DEFINE_string("shapes", None, "Override the cases' input shapes, e.g. '8192x8192,1024x32768'.")
flags.DEFINE_integer("warmup", 5, "Untimed runs before timing.")
flags.DEFINE_integer("iters", 50, "Timed runs per case (the median is reported).")
flags.DEFINE_boolean("cold_l2", True, "On GPUs, rotate input buffers so each run reads from HBM, not L2.")
flags.DEFINE_string("json_out", None, "Write every result as JSON to this path.")
flags.DEFINE_string("report", None, "Write a Markdown page with the table and PNG plots to this path.")
flags.DEFINE_float("max_mb", None, "Skip (and list) cases moving more MB than this "
                   "(default: no limit on GPUs, 300 on the cpu backend).")

DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
L2_BYTES = 64 << 20  # H100/H200 have 50-60 MB of L2; rotate past that.


@dataclass
class Result:
    op: str
    case: str
    dtype: str
    shapes: str
    backend: str
    us: float
    bytes: int
    flops: int
    gbps: float
    pct_copy_bw: float
    peer_us: float
    peer_gbps: float
    speedup: float


def _device(backend: str) -> torch.device:
    return torch.device("cpu") if backend == "cpu" else torch.device("cuda")


def _timer(device: torch.device):
    """Returns time_once(fn) -> seconds for one call, honest for the device."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def time_once(fn) -> float:
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3

        return time_once

    def time_once(fn) -> float:
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin

    return time_once


def _median_times(runs, device: torch.device) -> list[float]:
    """Interleaves the callables in `runs` (ours, then the peer's, ...), each
    call on its next buffer set, and returns each one's median seconds."""
    time_once = _timer(device)
    for _ in range(FLAGS.warmup):
        for run in runs:
            run.next()()
    samples = [[] for _ in runs]
    for _ in range(FLAGS.iters):
        for run, times in zip(runs, samples):
            times.append(time_once(run.next()))
    return [statistics.median(times) for times in samples]


class _Rotation:
    """Cycles through calls bound to different buffer sets (cold L2 on GPUs)."""

    def __init__(self, calls):
        self.calls, self.index = calls, 0

    def next(self):
        call = self.calls[self.index % len(self.calls)]
        self.index += 1
        return call


def _buffer_sets(case: BenchmarkCase, out_shape, device: torch.device) -> int:
    if device.type != "cuda" or not FLAGS.cold_l2:
        return 1
    size = sum(math.prod(s) for s in (*case.shapes, out_shape)) * torch.empty((), dtype=case.dtype).element_size()
    return max(1, min(16, math.ceil(2 * L2_BYTES / max(size, 1))))


def copy_bandwidth(device: torch.device) -> float:
    """This device's copy bandwidth in GB/s (bytes read + written), measured now."""
    elements = (256 << 20) // 4 if device.type == "cuda" else (64 << 20) // 4
    src = torch.randn(elements, device=device)
    dst = torch.empty_like(src)
    (seconds,) = _median_times([_Rotation([lambda: dst.copy_(src)])], device)
    return 2 * src.numel() * 4 / seconds / 1e9


def _cases(op: str, spec_module) -> list[BenchmarkCase]:
    cases = spec_module.benchmark_cases()
    if FLAGS.dtype != "all":
        wanted = {DTYPES[name] for name in FLAGS.dtype.split(",")}
        cases = [case for case in cases if case.dtype in wanted]
    if FLAGS.shapes:
        shapes = [tuple(int(n) for n in text.split("x")) for text in FLAGS.shapes.split(",")]
        dtypes = sorted({case.dtype for case in cases}, key=str)
        template = cases[0]
        cases = [
            replace(template, name="x".join(map(str, shape)), shapes=(shape,) * len(template.shapes), dtype=dtype)
            for shape in shapes
            for dtype in dtypes
        ]
    return cases


def bench_case(op: str, spec, case: BenchmarkCase, backend: str, copy_gbps: float) -> Result:
    device = _device(backend)
    info = spec.info
    params = {name: case.params.get(name, info.default(name)) for name in info.param_names}
    shape = out_shape(op, case.shapes, case.params)
    calls, peer_calls = [], []
    for _ in range(_buffer_sets(case, shape, device)):
        inputs = [torch.randn(s, device=device).to(case.dtype) for s in case.shapes]
        out = torch.empty(shape, dtype=case.dtype, device=device)
        prepared = getattr(ort, f"prepare_{op}")(out, *inputs, **params, backend=backend)
        calls.append(prepared.run)
        peer_calls.append(lambda inputs=inputs, out=out: spec.peer(out, *inputs, **params))
    ours, peer = _median_times([_Rotation(calls), _Rotation(peer_calls)], device)
    moved, flops = spec.bytes(case), spec.flops(case)
    gbps = moved / ours / 1e9
    return Result(
        op=op,
        case=case.name,
        dtype=DTYPE_NAMES[case.dtype],
        shapes=" ".join("x".join(map(str, s)) for s in case.shapes),
        backend=backend,
        us=ours * 1e6,
        bytes=moved,
        flops=flops,
        gbps=gbps,
        pct_copy_bw=100 * gbps / copy_gbps,
        peer_us=peer * 1e6,
        peer_gbps=moved / peer / 1e9,
        speedup=peer / ours,
    )


HEADER = (
    f"{'op':<11} {'dtype':<5} {'case':<30} {'us':>10} {'MB':>9} {'GFLOP':>8} {'GB/s':>8} "
    f"{'%copy':>6} {'torch us':>10} {'torch GB/s':>10} {'ratio':>6}"
)


def _row(r: Result) -> str:
    return (
        f"{r.op:<11} {r.dtype:<5} {r.case:<30} {r.us:>10.1f} {r.bytes / 1e6:>9.1f} {r.flops / 1e9:>8.3f} "
        f"{r.gbps:>8.1f} {r.pct_copy_bw:>6.1f} {r.peer_us:>10.1f} {r.peer_gbps:>10.1f} {r.speedup:>6.2f}"
    )


def main(argv) -> int:
    del argv
    available = ort.available_backends()
    backend = FLAGS.backend or ("nvidia" if "nvidia" in available and torch.cuda.is_available() else "cpu")
    if backend not in available:
        print(f"bench: backend {backend!r} is not available here (available: {', '.join(available)})", file=sys.stderr)
        return 2
    device = _device(backend)
    ops = list(OPERATORS) if FLAGS.op == "all" else FLAGS.op.split(",")
    specs = {}
    for op in ops:
        if op not in OPERATORS:
            print(f"bench: unknown op {op!r} (known: {', '.join(OPERATORS)})", file=sys.stderr)
            return 2
        specs[op] = importlib.import_module(f"ops.{op}.cases")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    copy_gbps = copy_bandwidth(device)
    header = (f"device: {name}; backend: {backend}; copy bandwidth {copy_gbps:.0f} GB/s; "
              f"median of {FLAGS.iters} runs after {FLAGS.warmup} warm-up; peer: torch {torch.__version__}")
    print(header)
    work = [(op, case) for op in ops for case in _cases(op, specs[op])]
    max_mb = FLAGS.max_mb if FLAGS.max_mb is not None else (300.0 if backend == "cpu" else math.inf)
    skipped = [f"{op} {case.name}" for op, case in work if specs[op].OP.bytes(case) / 1e6 > max_mb]
    if skipped:
        print(f"skipped {len(skipped)} cases moving more than {max_mb:g} MB (--max_mb): {', '.join(skipped)}")
    work = [(op, case) for op, case in work if specs[op].OP.bytes(case) / 1e6 <= max_mb]
    print(HEADER)
    results = []
    for index, (op, case) in enumerate(work, 1):
        if sys.stderr.isatty():
            print(f"[{index}/{len(work)}] {op} {case.name} ...", end="\r", file=sys.stderr, flush=True)
        result = bench_case(op, specs[op].OP, case, backend, copy_gbps)
        results.append(result)
        print(_row(result), flush=True)
    if FLAGS.report:
        write_report(FLAGS.report, header, HEADER, [_row(r) for r in results], results, copy_gbps)
    if FLAGS.json_out:
        with open(FLAGS.json_out, "w") as f:
            json.dump({"device": name, "backend": backend, "copy_gbps": copy_gbps,
                       "results": [asdict(r) for r in results]}, f, indent=1)
    return 0


if __name__ == "__main__":
    app.run(main)
