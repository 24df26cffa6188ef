"""Row-length sweeps of the reduction family: `bench --sweep=softmax`, `--sweep=softmax_backward`
or `--sweep=reduce_sum`.

One call per row length and dtype, every implementation timed in the same
process with the same timer: ours (a prepared descriptor's `run`), then each
peer (tools/bench/peers.py) on the same tensors, and a device copy of the
first input (the dashed line: the copy's GB/s, what moving bytes costs at best).

- Row lengths: powers of two from 32 to 2^22 plus odd and vocabulary lengths
  (ODD_LENGTHS), or --sweep_lengths.
- Fixed bytes (default): rows = --sweep_mb MiB of input / row bytes (rounded
  up), so every point moves about the same bytes. Few rows (--sweep_rows=1,8,64): that many rows of
  every length, as a decoder's last layer sees them.
- reduce_sum runs along the last axis (a `rows x length` input, dim=-1) and the
  leading one (`length x rows`, dim=0); softmax and softmax_backward along the
  last. Every input (softmax_backward's dy and y) is `rows x length`, normal
  values, as in the bench's table.
- Timer (GPUs): like triton.testing.do_bench, each timed call follows a write
  of L2_FLUSH_BYTES (cold L2, and the GPU busy while the host enqueues the
  call, so launch costs stay out of the figures), between CUDA events; the
  median of --iters calls. On the cpu backend: wall time, no flush.

Writes <out>/sweep_<op>.json (few rows: sweep_<op>_rows.json) and one plot per dtype and mode
(<out>/sweep_<op>_<dtype>[_rows<N>].png: GB/s against row length, log x, a line
per implementation, the copy as a dashed line), then prints the verdicts of
targets.sweep_targets.
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import torch

import operator_runtime as ort
from operator_runtime.ops import OPERATORS
from operator_runtime_testing.cases import DTYPE_NAMES, BenchmarkCase, out_shape
from tools.bench import peers as peer_lib
from tools.bench import targets
from tools.bench.report import plt, save_plot  # report selects the file-only backend

SWEEP_OPS = ("softmax", "softmax_backward", "reduce_sum")
POWER_LENGTHS = tuple(2**k for k in range(5, 23))
# Odd and vocabulary lengths: GPT-2's 50257, Llama 3's 128256, Qwen's 151936,
# and primes and other odd lengths, short ones included (no power of two
# divides them, so rows start at every offset).
ODD_LENGTHS = (33, 127, 257, 500, 777, 1000, 3001, 4000, 10007, 32000, 50257, 65521, 128256, 151936,
               1000003)
L2_FLUSH_BYTES = 256 << 20
AXES = {"softmax": ("last",), "softmax_backward": ("last",), "reduce_sum": ("last", "leading")}


@dataclass
class SweepPoint:
    op: str
    dtype: str
    axis: str  # "last" (rows x length, dim=-1) or "leading" (length x rows, dim=0)
    mode: str  # "fixed bytes" or "rows=N"
    rows: int
    row_length: int
    bytes: int  # moved per call, from the op's declared formula
    us: float
    gbps: float
    copy_gbps: float  # a device copy of the (first) input, same timer
    peers: dict[str, peer_lib.PeerTiming] = field(default_factory=dict)

    def best_peer(self) -> tuple[str, float] | None:
        """(name, GB/s) of the fastest peer that ran this point."""
        timed = [(t.gbps, name) for name, t in self.peers.items() if t.gbps]
        return None if not timed else max(timed)[::-1]


def row_lengths(text: str | None) -> list[int]:
    if text:
        return sorted({int(n) for n in text.split(",")})
    return sorted(set(POWER_LENGTHS) | set(ODD_LENGTHS))


def _times(calls, device: torch.device, warmup: int, iters: int) -> list[float]:
    """Median seconds of each call, interleaved, each after an L2 flush on GPUs."""
    if device.type != "cuda":
        samples = [[] for _ in calls]
        for _ in range(warmup):
            for call in calls:
                call()
        for _ in range(iters):
            for call, times in zip(calls, samples):
                begin = time.perf_counter()
                call()
                times.append(time.perf_counter() - begin)
        return [statistics.median(times) for times in samples]
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    for _ in range(warmup):
        for call in calls:
            call()
    events = [[] for _ in calls]
    for _ in range(iters):
        for call, pairs in zip(calls, events):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            pairs.append((start, end))
    torch.cuda.synchronize()
    return [statistics.median(start.elapsed_time(end) / 1e3 for start, end in pairs) for pairs in events]


def _shape(axis: str, rows: int, length: int) -> tuple[int, int]:
    return (rows, length) if axis == "last" else (length, rows)


def measure(op: str, spec, dtype: torch.dtype, axis: str, rows: int, length: int, mode: str,
            backend: str, peer_names, warmup: int, iters: int) -> SweepPoint:
    device = torch.device("cpu") if backend == "cpu" else torch.device("cuda")
    shape = _shape(axis, rows, length)
    dim = -1 if axis == "last" else 0
    params = {"dim": dim}
    case = BenchmarkCase(f"{rows}x{length}", (shape,) * len(OPERATORS[op].input_names), dtype, params)
    inputs = [torch.randn(input_shape, device=device).to(dtype) for input_shape in case.shapes]
    out = torch.empty(out_shape(op, case.shapes, params), dtype=dtype, device=device)
    prepared = getattr(ort, f"prepare_{op}")(out, *inputs, **params, backend=backend)
    calls, names, peers = [prepared.run], [], {}
    for name in peer_names:
        try:
            calls.append(functools.partial(peer_lib.bind(name, spec, params, out, inputs), out, *inputs))
            names.append(name)
        except peer_lib.Unavailable as reason:
            peers[name] = peer_lib.PeerTiming(unavailable=str(reason))
    x = inputs[0]
    copy_target = torch.empty_like(x)
    calls.append(functools.partial(copy_target.copy_, x))
    seconds = _times(calls, device, warmup, iters)
    prepared.destroy()
    moved = spec.bytes(case)
    for name, s in zip(names, seconds[1:-1]):
        peers[name] = peer_lib.PeerTiming(us=s * 1e6, gbps=moved / s / 1e9, ratio=s / seconds[0])
    return SweepPoint(op=op, dtype=DTYPE_NAMES[dtype], axis=axis, mode=mode, rows=rows, row_length=length,
                      bytes=moved, us=seconds[0] * 1e6, gbps=moved / seconds[0] / 1e9,
                      copy_gbps=2 * x.nbytes / seconds[-1] / 1e9, peers={n: peers[n] for n in peer_names})


def _plot(points: list[SweepPoint], peer_names, path: str, title: str) -> None:
    figure, axes = plt.subplots(figsize=(9, 4.8))
    for axis_index, axis in enumerate(sorted({p.axis for p in points}, key=["last", "leading"].index)):
        along = sorted((p for p in points if p.axis == axis), key=lambda p: p.row_length)
        style = "-" if axis_index == 0 else ":"
        suffix = "" if len(AXES[points[0].op]) == 1 else f" ({axis} axis)"
        lengths = [p.row_length for p in along]
        axes.plot(lengths, [p.gbps for p in along], style, color="C0", marker="o", markersize=3,
                  label=f"oprt{suffix}")
        for index, name in enumerate(peer_names, 1):
            timed = [(p.row_length, p.peers[name].gbps) for p in along if p.peers[name].gbps]
            if timed:
                axes.plot(*zip(*timed), style, color=f"C{index}", marker=".", label=f"{name}{suffix}")
        if axis_index == 0:  # both axes read the same bytes
            axes.plot(lengths, [p.copy_gbps for p in along], "--", color="gray", linewidth=1,
                      label="copy of the same bytes")
    axes.set_xscale("log", base=2)
    save_plot(figure, axes, "row length (elements, log)", title, path)


def _point_line(p: SweepPoint, peer_names) -> str:
    cells = [f"{p.dtype:<5} {p.axis:<7} {p.mode:<11} {p.rows:>9} {p.row_length:>8} {p.us:>10.1f} {p.gbps:>8.1f} "
             f"{100 * p.gbps / p.copy_gbps:>6.1f}"]
    for name in peer_names:
        t = p.peers[name]
        cells.append(f"{'n/a':>9} {'n/a':>6}" if t.gbps is None else f"{t.gbps:>9.1f} {t.us / p.us:>6.2f}")
    return " ".join(cells)


def header(peer_names) -> str:
    columns = [f"{'dtype':<5} {'axis':<7} {'mode':<11} {'rows':>9} {'length':>8} {'us':>10} {'GB/s':>8} {'%copy':>6}"]
    columns += [f"{peer_lib.LABELS[n] + ' GB/s':>9} {'x ' + peer_lib.LABELS[n]:>6}" for n in peer_names]
    return " ".join(columns)


def run(op: str, spec, backend: str, dtypes, peer_names, *, mb: float, rows_list, lengths_text: str | None,
        out_dir: str, warmup: int, iters: int, device_name: str) -> list[str]:
    """Sweeps op, writes its JSON and plots into out_dir; returns the verdict lines."""
    lengths = row_lengths(lengths_text)
    modes = [(f"rows={n}", n) for n in rows_list] if rows_list else [("fixed bytes", None)]
    points = []
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, f"sweep_{op}{'_rows' if rows_list else ''}.json")

    print(f"sweep {op} on {device_name}, backend {backend}: {len(lengths)} row lengths, "
          f"{'fixed ' + format(mb, 'g') + ' MiB per input' if not rows_list else 'rows ' + ','.join(map(str, rows_list))}; "
          f"peers: {peer_lib.describe(peer_names)}; median of {iters} calls"
          f"{', L2 flushed before each' if backend != 'cpu' else ''}")
    print(header(peer_names))
    for dtype in dtypes:
        element = torch.empty((), dtype=dtype).element_size()
        for axis in AXES[op]:
            for mode, fixed_rows in modes:
                for length in lengths:
                    rows = fixed_rows or max(1, math.ceil(mb * (1 << 20) / (length * element)))
                    point = measure(op, spec, dtype, axis, rows, length, mode, backend, peer_names, warmup, iters)
                    points.append(point)
                    print(_point_line(point, peer_names), flush=True)
                    # After every point, so a cut-short run keeps what it measured.
                    save(json_path, points, device=device_name, op=op, backend=backend, peers=list(peer_names))
    groups = defaultdict(list)
    for p in points:
        groups[(p.dtype, p.mode)].append(p)
    for (dtype, mode), group in groups.items():
        suffix = "" if mode == "fixed bytes" else f"_rows{group[0].rows}"
        title = f"{op} {dtype} on {device_name}, " + (f"{mb:g} MiB per input" if mode == "fixed bytes" else mode)
        _plot(group, peer_names, os.path.join(out_dir, f"sweep_{op}_{dtype}{suffix}.png"), title)
    return [v.line() for v in targets.sweep_targets(op, points)]


def save(path: str, points: list[SweepPoint], **run) -> None:
    """Writes points, with the run's description (device, op, backend, peers), as JSON."""
    with open(path, "w") as f:
        json.dump({**run, "points": [asdict(p) for p in points]}, f, indent=1)


def load(path: str) -> list[SweepPoint]:
    """The points of a saved sweep (sweep_<op>.json)."""
    with open(path) as f:
        saved = json.load(f)
    return [SweepPoint(**{**p, "peers": {n: peer_lib.PeerTiming(**t) for n, t in p["peers"].items()}})
            for p in saved["points"]]
