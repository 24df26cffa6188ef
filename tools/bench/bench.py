"""The oprt benchmark: every operator's benchmark cases against its peers, in one run.

    bazel run //tools:bench -- --op=all [--backend=nvidia,tilelang] [--dtype=f32] [--shapes=8192x8192]
        [--peers=torch,torch_compile,liger] [--nooverhead]
    bazel run //tools:bench -- --sweep=softmax [--sweep_mb=256 | --sweep_rows=1,8,64] [--sweep_lengths=...]

Per case and backend (one row each; --backend takes a comma list, e.g.
nvidia,tilelang, all on one device type): median latency, bytes moved and FLOPs from the operator's declared
formulas (ops/<op>/cases.py), GB/s, the share of this device's copy bandwidth
measured at start-up, and for each peer (tools/bench/peers.py: torch, its
torch.compile, Liger-Kernel's softmax) timed in the same process, interleaved
with ours: its latency, GB/s and the ratio `x <peer>` (peer time / our time:
> 1 is faster); "n/a" where a peer cannot run a case, with the reason below.
Repetitions are time-budgeted, as triton.testing.do_bench's: a first warm-up round
(ours and every peer once) measures what a round costs, and the case gets as many
rounds as --case_ms holds, between --min_iters and --iters. On a terminal a progress
bar shows cases done and the time left; otherwise each case prints its line as it
ends. The copy bandwidth is measured three times at start and once after the table;
measurements more than 20 %% apart print a warning that the machine is noisy.

A second table gives the host overhead of each call, in µs per call, on a tiny
tensor so kernels cost about a launch: a prepared `p.run()`, `ort.<op>_(out,
...)` and `ort.<op>(...)` (through torch.ops.oprt and the descriptor cache)
and each peer's call; on a GPU its title also gives the driver's own launch of
an empty kernel (host_cost.py), the floor under any per-call launch.

`--sweep=softmax` (or softmax_backward, reduce_sum) instead sweeps row lengths: tools/bench/sweep.py
says how; it writes JSON and plots into --sweep_out and prints its verdicts.

tools/bench/compare.py sets runs of two builds side by side (--json_out files);
tools/bench/report.py BENCH.json PREFIX redraws a saved run's plots.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, replace

import torch
from absl import app, flags

import operator_runtime as ort
from operator_runtime.ops import OPERATORS
from operator_runtime_testing.cases import DTYPE_NAMES, BenchmarkCase, out_shape
from tools.bench import peers as peer_lib
from tools.bench import sweep, targets
from tools.bench.host_cost import driver_launch_us, host_us_per_call
from tools.bench.report import write_report

FLAGS = flags.FLAGS
flags.DEFINE_string("op", "all", "Operator name, a comma list, or 'all'.")
flags.DEFINE_list("backend", None, "oprt backends, a comma list (default: nvidia when a GPU is present, else cpu).")
flags.DEFINE_string("dtype", "all", "f32, f16, bf16, a comma list, or 'all'.")
flags.DEFINE_string("shapes", None, "Override the cases' input shapes, e.g. '8192x8192,1024x32768'.")
flags.DEFINE_integer("warmup", 5, "At most this many untimed rounds per case before timing (at least 1).")
flags.DEFINE_integer("iters", 50, "At most this many timed rounds per case (the median is reported).")
flags.DEFINE_integer("min_iters", 3, "At least this many timed rounds per case, whatever --case_ms says.")
flags.DEFINE_float("case_ms", 300, "Time budget per case for its timed rounds (a round runs ours and every "
                   "peer once), as triton.testing.do_bench's rep: slow cases get fewer rounds.")
flags.DEFINE_boolean("cold_l2", True, "On GPUs, rotate input buffers so each run reads from HBM, not L2.")
flags.DEFINE_string("json_out", None, "Write every result as JSON to this path.")
flags.DEFINE_string("report", None, "Write a Markdown page with the table and PNG plots to this path.")
flags.DEFINE_list("peers", ["torch"], f"Peers timed beside oprt: any of {', '.join(peer_lib.PEER_NAMES)}.")
flags.DEFINE_boolean("overhead", True, "Also measure the host µs per call of p.run(), ort.<op>_() and the peers.")
flags.DEFINE_integer("overhead_calls", 2000, "Calls per overhead measurement (in 5 batches; the median is reported).")
flags.DEFINE_enum("sweep", None, sweep.SWEEP_OPS, "Sweep this op over row lengths instead of its cases.")
flags.DEFINE_float("sweep_mb", 256, "Sweep: MiB of input per point (rows = this / row bytes).")
flags.DEFINE_list("sweep_rows", [], "Sweep: few-rows mode, these row counts at every length (e.g. 1,8,64).")
flags.DEFINE_string("sweep_lengths", None, "Sweep: row lengths, a comma list (default: sweep.py's list).")
flags.DEFINE_string("sweep_out", "docs/performance", "Sweep: directory for JSON and plots "
                    "(relative paths are taken from the workspace under bazel run).")
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
    peers: dict[str, peer_lib.PeerTiming]


@dataclass
class Overhead:
    """Host µs per call on a tiny tensor; a peer's value is None when it cannot run."""

    op: str
    backend: str
    case: str
    run_us: float
    op_call_us: float
    op_us: float
    peers: dict[str, float | None]
    # Whether torch's call writes into out (copy_, out=) or allocates its result: the
    # host-cost target sets it against ort.<op>_() or ort.<op>() accordingly.
    torch_writes_out: bool
    unavailable: dict[str, str]


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


def _rounds(round_seconds: float) -> tuple[int, int]:
    """(more warm-up rounds, timed rounds) for a case whose round takes round_seconds:
    as many as --case_ms holds, within --warmup and [--min_iters, --iters]."""
    fits = int(FLAGS.case_ms / 1e3 / max(round_seconds, 1e-9))
    warmups = max(0, min(FLAGS.warmup - 1, fits // 4))
    return warmups, max(FLAGS.min_iters, min(FLAGS.iters, fits))


def _median_times(runs, device: torch.device) -> list[float]:
    """Interleaves the callables in `runs` (ours, then the peer's, ...), each
    call on its next buffer set, and returns each one's median seconds. A first
    warm-up round measures what a round costs, which sets the rounds (_rounds)."""
    time_once = _timer(device)
    round_seconds = sum(time_once(run.next()) for run in runs)
    warmups, iters = _rounds(round_seconds)
    for _ in range(warmups):
        for run in runs:
            run.next()()
    samples = [[] for _ in runs]
    for _ in range(iters):
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


COPY_MEASUREMENTS = 3
NOISY_COPY_SPREAD = 0.20


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


def _params(spec, case: BenchmarkCase) -> dict:
    info = spec.info
    return {name: case.params.get(name, info.default(name)) for name in info.param_names}


def _bind_peers(spec, params: dict, out: torch.Tensor, inputs) -> dict:
    """Each requested peer's call(out, *inputs), or the reason it cannot run."""
    bound = {}
    for name in FLAGS.peers:
        try:
            bound[name] = peer_lib.bind(name, spec, params, out, inputs)
        except peer_lib.Unavailable as reason:
            bound[name] = str(reason)
    return bound


def bench_case(op: str, spec, case: BenchmarkCase, backend: str, copy_gbps: float) -> Result:
    device = _device(backend)
    params = _params(spec, case)
    shape = out_shape(op, case.shapes, case.params)
    buffer_sets = []
    for _ in range(_buffer_sets(case, shape, device)):
        inputs = [torch.randn(s, device=device).to(case.dtype) for s in case.shapes]
        out = torch.empty(shape, dtype=case.dtype, device=device)
        buffer_sets.append((out, inputs))
    out, inputs = buffer_sets[0]
    bound = _bind_peers(spec, params, out, inputs)
    timed = [name for name in FLAGS.peers if callable(bound[name])]
    rotations = [_Rotation([getattr(ort, f"prepare_{op}")(out, *inputs, **params, backend=backend).run
                            for out, inputs in buffer_sets])]
    rotations += [
        _Rotation([functools.partial(bound[name], out, *inputs) for out, inputs in buffer_sets]) for name in timed
    ]
    ours, *peer_seconds = _median_times(rotations, device)
    moved, flops = spec.bytes(case), spec.flops(case)
    gbps = moved / ours / 1e9
    timings = {name: peer_lib.PeerTiming(unavailable=bound[name]) for name in FLAGS.peers}
    for name, seconds in zip(timed, peer_seconds):
        timings[name] = peer_lib.PeerTiming(us=seconds * 1e6, gbps=moved / seconds / 1e9, ratio=seconds / ours)
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
        peers=timings,
    )


def measure_overhead(op: str, spec_module, backend: str) -> Overhead:
    """Host cost per call for the op's first benchmark case in f32, shrunk to at
    most 8 elements per dim (same rank, broadcasts and params)."""
    device = _device(backend)
    spec = spec_module.OP
    template = spec_module.benchmark_cases()[0]
    shapes = tuple(tuple(min(extent, 8) for extent in shape) for shape in template.shapes)
    case = replace(template, name="x".join(map(str, shapes[0])), shapes=shapes, dtype=torch.float32)
    params = _params(spec, case)
    inputs = [torch.randn(s, device=device) for s in case.shapes]
    out = torch.empty(out_shape(op, case.shapes, case.params), device=device)
    out_variant = getattr(ort, f"{op}_")
    bound = _bind_peers(spec, params, out, inputs)
    with getattr(ort, f"prepare_{op}")(out, *inputs, **params, backend=backend) as prepared:
        run_us = host_us_per_call(prepared.run, FLAGS.overhead_calls, device)
    op_call_us = host_us_per_call(lambda: out_variant(out, *inputs, **params, backend=backend),
                                  FLAGS.overhead_calls, device)
    out_of_place = getattr(ort, op)
    op_us = host_us_per_call(lambda: out_of_place(*inputs, **params, backend=backend),
                             FLAGS.overhead_calls, device)
    peer_us = {
        name: host_us_per_call(functools.partial(call, out, *inputs), FLAGS.overhead_calls, device)
        if callable(call) else None
        for name, call in bound.items()
    }
    torch_call = bound.get("torch")
    torch_writes_out = callable(torch_call) and torch_call(out, *inputs) is out
    return Overhead(op=op, backend=backend, case=f"{case.name} f32", run_us=run_us, op_call_us=op_call_us, op_us=op_us,
                    peers=peer_us, torch_writes_out=torch_writes_out,
                    unavailable={name: call for name, call in bound.items() if not callable(call)})


def _cell(value: float | None, width: int, precision: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.{precision}f}"


# The op column holds the longest operator name.
OP_WIDTH = max(len(name) for name in OPERATORS)


def table_header() -> str:
    columns = [f"{'op':<{OP_WIDTH}} {'backend':<8} {'dtype':<5} {'case':<30} {'us':>10} {'MB':>9} {'GFLOP':>8} {'GB/s':>8} {'%copy':>6}"]
    for name in FLAGS.peers:
        label = peer_lib.LABELS[name]
        columns.append(f"{label + ' us':>10} {label + ' GB/s':>12} {'x ' + label:>9}")
    return " ".join(columns)


def _row(r: Result) -> str:
    columns = [
        f"{r.op:<{OP_WIDTH}} {r.backend:<8} {r.dtype:<5} {r.case:<30} {r.us:>10.1f} {r.bytes / 1e6:>9.1f} {r.flops / 1e9:>8.3f} "
        f"{r.gbps:>8.1f} {r.pct_copy_bw:>6.1f}"
    ]
    for name in FLAGS.peers:
        timing = r.peers[name]
        columns.append(f"{_cell(timing.us, 10, 1)} {_cell(timing.gbps, 12, 1)} {_cell(timing.ratio, 9, 2)}")
    return " ".join(columns)


def overhead_header() -> str:
    peers = " ".join(f"{peer_lib.LABELS[name]:>10}" for name in FLAGS.peers)
    return f"{'op':<{OP_WIDTH}} {'backend':<8} {'case':<16} {'p.run()':>10} {'op_()':>10} {'op()':>10} {peers}"


def _overhead_row(o: Overhead) -> str:
    peers = " ".join(_cell(o.peers[name], 10, 1) for name in FLAGS.peers)
    return (f"{o.op:<{OP_WIDTH}} {o.backend:<8} {o.case:<16} {o.run_us:>10.1f} {o.op_call_us:>10.1f} "
            f"{o.op_us:>10.1f} {peers}")


def unavailable_notes(results: list[Result], overheads: list[Overhead]) -> list[str]:
    """One line per distinct reason a peer printed n/a, with where."""
    where = defaultdict(list)
    for r in results:
        for name, timing in r.peers.items():
            if timing.unavailable:
                where[(name, timing.unavailable)].append(f"{r.op} {r.case}")
    for o in overheads:
        for name, reason in o.unavailable.items():
            where[(name, reason)].append(f"{o.op} overhead")
    notes = []
    for (name, reason), cases in where.items():
        shown = ", ".join(cases[:4]) + (f" and {len(cases) - 4} more" if len(cases) > 4 else "")
        notes.append(f"n/a {name}: {reason} ({shown})")
    return notes


def _noise_warning(copies: list[float]) -> str | None:
    """A warning when repeated copy-bandwidth measurements disagree by more than NOISY_COPY_SPREAD."""
    spread = max(copies) / min(copies) - 1
    if spread <= NOISY_COPY_SPREAD:
        return None
    return (f"warning: copy bandwidth measurements disagree by {100 * spread:.0f} % "
            f"({', '.join(f'{c:.0f}' for c in copies)} GB/s): this machine is noisy, so the ratios are too")


class _Progress:
    """A progress bar on a terminal's stderr: cases done, elapsed time and an estimate of the rest."""

    WIDTH = 24

    def __init__(self, total: int):
        self.total, self.start = total, time.monotonic()

    def show(self, done: int, label: str) -> None:
        elapsed = time.monotonic() - self.start
        left = f", ~{elapsed / done * (self.total - done):.0f} s left" if done else ""
        filled = self.WIDTH * done // max(self.total, 1)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        print(f"\r\033[K[{bar}] {done}/{self.total} {elapsed:.0f} s{left}: {label}", end="",
              file=sys.stderr, flush=True)

    def clear(self) -> None:
        print("\r\033[K", end="", file=sys.stderr, flush=True)


def _run_sweep(backends: list[str], device: torch.device) -> int:
    if len(backends) != 1:
        print("bench: --sweep takes one backend", file=sys.stderr)
        return 2
    out_dir = FLAGS.sweep_out
    if not os.path.isabs(out_dir) and "BUILD_WORKSPACE_DIRECTORY" in os.environ:
        out_dir = os.path.join(os.environ["BUILD_WORKSPACE_DIRECTORY"], out_dir)
    dtypes = list(DTYPES.values()) if FLAGS.dtype == "all" else [DTYPES[name] for name in FLAGS.dtype.split(",")]
    spec = importlib.import_module(f"ops.{FLAGS.sweep}.cases").OP
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    verdicts = sweep.run(FLAGS.sweep, spec, backends[0], dtypes, FLAGS.peers, mb=FLAGS.sweep_mb,
                         rows_list=[int(n) for n in FLAGS.sweep_rows], lengths_text=FLAGS.sweep_lengths,
                         out_dir=out_dir, warmup=FLAGS.warmup, iters=FLAGS.iters, device_name=name)
    print("\n".join(["", f"sweep targets (tools/bench/targets.py), written to {out_dir}", *verdicts]))
    return 0


def _positive_ints(text: str, separator: str) -> bool:
    return all(part.isdigit() and int(part) > 0 for part in text.split(separator))


def _flag_problem() -> str | None:
    """What is wrong with the flags absl cannot check itself, or None."""
    if FLAGS.dtype != "all" and not set(FLAGS.dtype.split(",")) <= DTYPES.keys():
        return f"--dtype={FLAGS.dtype}: expected 'all' or a comma list of {', '.join(DTYPES)}"
    if FLAGS.shapes and not all(_positive_ints(shape, "x") for shape in FLAGS.shapes.split(",")):
        return f"--shapes={FLAGS.shapes}: expected shapes like 8192x8192,1024x32768"
    if FLAGS.sweep_lengths and not _positive_ints(FLAGS.sweep_lengths, ","):
        return f"--sweep_lengths={FLAGS.sweep_lengths}: expected row lengths like 500,4096,50257"
    if not _positive_ints(",".join(FLAGS.sweep_rows) or "1", ","):
        return f"--sweep_rows={','.join(FLAGS.sweep_rows)}: expected row counts like 1,8,64"
    return peer_lib.check(FLAGS.peers)


def main(argv) -> int:
    del argv
    problem = _flag_problem()
    if problem:
        print(f"bench: {problem}", file=sys.stderr)
        return 2
    available = ort.available_backends()
    backends = FLAGS.backend or ["nvidia" if "nvidia" in available and torch.cuda.is_available() else "cpu"]
    for backend in backends:
        if backend not in available:
            print(f"bench: backend {backend!r} is not available here (available: {', '.join(available)})", file=sys.stderr)
            return 2
    if len({_device(backend) for backend in backends}) > 1:
        print(f"bench: backends {', '.join(backends)} run on different devices; bench one device at a time", file=sys.stderr)
        return 2
    backend = ",".join(backends)
    device = _device(backends[0])
    if FLAGS.sweep:
        return _run_sweep(backends, device)
    ops = list(OPERATORS) if FLAGS.op == "all" else FLAGS.op.split(",")
    specs = {}
    for op in ops:
        if op not in OPERATORS:
            print(f"bench: unknown op {op!r} (known: {', '.join(OPERATORS)})", file=sys.stderr)
            return 2
        specs[op] = importlib.import_module(f"ops.{op}.cases")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    copies = [copy_bandwidth(device) for _ in range(COPY_MEASUREMENTS)]
    copy_gbps = statistics.median(copies)
    header = (f"device: {name}; backend: {backend}; copy bandwidth {copy_gbps:.0f} GB/s (median of "
              f"{', '.join(f'{c:.0f}' for c in copies)}); median of {FLAGS.min_iters}..{FLAGS.iters} rounds per case "
              f"within {FLAGS.case_ms:g} ms, after up to {FLAGS.warmup} warm-up; peers: {peer_lib.describe(FLAGS.peers)}")
    print(header)
    noise = _noise_warning(copies)
    if noise:
        print(noise)
    work = [(op, case) for op in ops for case in _cases(op, specs[op])]
    max_mb = FLAGS.max_mb if FLAGS.max_mb is not None else (300.0 if device.type == "cpu" else math.inf)
    skipped = [f"{op} {case.name}" for op, case in work if specs[op].OP.bytes(case) / 1e6 > max_mb]
    if skipped:
        print(f"skipped {len(skipped)} cases moving more than {max_mb:g} MB (--max_mb): {', '.join(skipped)}")
    work = [(op, case) for op, case in work if specs[op].OP.bytes(case) / 1e6 <= max_mb]
    print(table_header())
    results = []
    progress = _Progress(len(work)) if sys.stderr.isatty() else None
    for index, (op, case) in enumerate(work):
        if progress:
            progress.show(index, f"{op} {case.name}")
        for one in backends:
            result = bench_case(op, specs[op].OP, case, one, copy_gbps)
            results.append(result)
            if progress:
                progress.clear()
            print(_row(result), flush=True)
    if progress:
        progress.clear()
    tables = [("", table_header(), [_row(r) for r in results])]
    overheads = []
    launch_floor_us = None
    if FLAGS.overhead:
        title = f"host overhead (µs per call, {FLAGS.overhead_calls} calls)"
        if device.type == "cuda":
            launch_floor_us = driver_launch_us(FLAGS.overhead_calls)
            title += f"; the driver's own launch of an empty kernel: {launch_floor_us:.1f} µs"
        print(f"\n{title}")
        print(overhead_header())
        for op in ops:
            for one in backends:
                overheads.append(measure_overhead(op, specs[op], one))
                print(_overhead_row(overheads[-1]), flush=True)
        tables.append((title, overhead_header(),
                       [_overhead_row(o) for o in overheads]))
    copies.append(copy_bandwidth(device))
    noise = _noise_warning(copies)
    if noise:
        print(f"\n{noise} (measured again after the table: {copies[-1]:.0f} GB/s)")
    notes = unavailable_notes(results, overheads)
    if notes:
        print("\n".join(["", *notes]))
    verdicts = [v.line() for v in targets.evaluate(results, overheads, backends, launch_floor_us)]
    print("\n".join(["", "targets (tools/bench/targets.py)", *verdicts]))
    tables.append(("targets (tools/bench/targets.py)", "", verdicts))
    if FLAGS.report:
        write_report(FLAGS.report, header, tables, notes, results, FLAGS.peers, copy_gbps)
    if FLAGS.json_out:
        with open(FLAGS.json_out, "w") as f:
            json.dump({"device": name, "backend": backend, "copy_gbps": copy_gbps, "peers": FLAGS.peers,
                       "results": [asdict(r) for r in results], "overhead": [asdict(o) for o in overheads],
                       "driver_launch_us": launch_floor_us},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    app.run(main)
