"""The performance targets, declared once, and their verdict on a bench run.

Each target reads the bench's results (ours, the peers in the same run) and says
PASS or FAIL with the figures it judged, or `n/a` when the run holds no case it
applies to (a subset of ops, a peer not requested). The kernel targets judge the
nvidia backend's rows only (a run without nvidia gets one line saying so); the
host-cost targets judge every backend of the overhead table, cpu included.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
LARGE_TENSOR_BYTES = 256 << 20
LARGE_TENSOR_FRACTION_OF_COPY = 0.90
SOFTMAX_GEOMEAN_VS_TORCH = 1.5
SOFTMAX_LONG_ROWS = (2**17, 2**20)
SOFTMAX_LONG_ROW_F32_GBPS = 3600.0
REDUCE_SUM_GEOMEAN_VS_TORCH = 1.2
ELEMENTWISE_MIN_ELEMENTS = 2**20
# Host cost per call: ort.<op>(x) against torch's call, ort.<op>_() against p.run(),
# and p.run() against the driver's own launch of an empty kernel (GPU backends).
# The row-length sweep (tools/bench/sweep.py), per op, over every point of a run.
SWEEP_VS_BEST_PEER = 1.0
SWEEP_FRACTION_OF_COPY = 0.90
SWEEP_COPY_FROM_LENGTH = 256
SWEEP_COPY_DTYPES = ("f32", "bf16")
SWEEP_LONG_ROW = 2**17
SWEEP_LONG_ROW_GBPS = 3600.0
SWEEP_NEIGHBOUR_FRACTION = 0.9
# The tilelang backend against the nvidia one, case by case in one run.
TILELANG_VS_NVIDIA = 0.8
TILELANG_FLOOR_VS_NVIDIA = 0.5
TILELANG_RUN_US = 10.0
OP_CALL_VS_TORCH = 1.2
OUT_VARIANT_ABOVE_RUN_US = 1.0
RUN_ABOVE_LAUNCH_US = 0.5


def _shapes(result) -> list[tuple[int, ...]]:
    return [tuple(int(n) for n in text.split("x")) for text in re.findall(r"\d+(?:x\d+)*", result.shapes)]


def _largest_tensor_bytes(result) -> int:
    return max(math.prod(shape) for shape in _shapes(result)) * ELEMENT_BYTES[result.dtype]


def _row_length(result) -> int:
    return _shapes(result)[0][-1]


def _ratio(result, peer: str) -> float | None:
    timing = result.peers.get(peer)
    return None if timing is None else timing.ratio


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _worst(results, value: Callable, label: str = "x") -> str:
    worst = min(results, key=value)
    return f"worst {worst.op} {worst.case} {value(worst):.2f}{label}"


@dataclass
class Verdict:
    target: str
    passed: bool | None  # None: the run has no case the target applies to
    detail: str

    def line(self) -> str:
        status = "n/a " if self.passed is None else ("PASS" if self.passed else "FAIL")
        return f"{status}  {self.target}: {self.detail}"


def _every(target: str, cases, value: Callable, minimum: float, label: str) -> Verdict:
    cases = [r for r in cases if value(r) is not None]
    if not cases:
        return Verdict(target, None, "no case in this run")
    failing = [r for r in cases if value(r) < minimum]
    detail = f"{len(cases) - len(failing)}/{len(cases)} cases; {_worst(cases, value, label)}"
    return Verdict(target, not failing, detail)


def _geomean_target(target: str, cases, peer: str, minimum: float) -> Verdict:
    ratios = [_ratio(r, peer) for r in cases if _ratio(r, peer) is not None]
    if not ratios:
        return Verdict(target, None, f"no {peer} ratios in this run")
    mean = _geomean(ratios)
    return Verdict(target, mean >= minimum, f"geometric mean {mean:.2f}x over {len(ratios)} cases")


def tilelang_targets(results, overheads) -> list[Verdict]:
    """The tilelang backend's kernels against the nvidia backend's on the same
    cases of the same run (time ratio: nvidia / tilelang), and its p.run() host time."""
    nvidia = {(r.op, r.case, r.dtype): r for r in results if r.backend == "nvidia"}
    pairs = [(r, nvidia[(r.op, r.case, r.dtype)]) for r in results
             if r.backend == "tilelang" and (r.op, r.case, r.dtype) in nvidia]

    class Pair:
        def __init__(self, tilelang, cuda):
            self.op, self.case = tilelang.op, f"{tilelang.case}_{tilelang.dtype}"
            self.ratio = cuda.us / tilelang.us

    cases = [Pair(t, c) for t, c in pairs]
    verdicts = [
        _every(f"tilelang >= {TILELANG_VS_NVIDIA}x the nvidia backend on every case", cases,
               lambda p: p.ratio, TILELANG_VS_NVIDIA, "x"),
        _every(f"tilelang no case below {TILELANG_FLOOR_VS_NVIDIA}x the nvidia backend", cases,
               lambda p: p.ratio, TILELANG_FLOOR_VS_NVIDIA, "x"),
    ]
    rows = [o for o in overheads if o.backend == "tilelang"]
    target = f"tilelang: p.run() <= {TILELANG_RUN_US:g} us of host time"
    if rows:
        passed, detail = _worst_host(rows, lambda o: o.run_us - TILELANG_RUN_US,
                                     lambda o: f"p.run() {o.run_us:.1f} us")
        verdicts.append(Verdict(target, passed, detail))
    else:
        verdicts.append(Verdict(target, None, "host cost not measured in this run"))
    return verdicts


def evaluate(results, overheads, backends: Sequence[str], launch_floor_us: float | None = None) -> list[Verdict]:
    host = overhead_targets(overheads, launch_floor_us)
    if "tilelang" in backends and "nvidia" in backends:
        host = [*tilelang_targets(results, overheads), *host]
    if "nvidia" not in backends:
        return [Verdict("kernel targets", None,
                        f"they apply to the nvidia backend, not {', '.join(backends)}"), *host]
    results = [r for r in results if r.backend == "nvidia"]
    by_op = {op: [r for r in results if r.op == op] for op in {r.op for r in results}}
    softmax = by_op.get("softmax", [])
    softmax_backward = by_op.get("softmax_backward", [])
    reduce_sum = by_op.get("reduce_sum", [])
    elementwise = [r for op in ("copy", "vector_add", "relu") for r in by_op.get(op, [])]
    long_f32_rows = [
        r for r in softmax
        if r.dtype == "f32" and SOFTMAX_LONG_ROWS[0] <= _row_length(r) <= SOFTMAX_LONG_ROWS[1]
    ]
    return [
        _every("every op >= 90 % of copy bandwidth on tensors >= 256 MiB",
               [r for r in results if _largest_tensor_bytes(r) >= LARGE_TENSOR_BYTES],
               lambda r: r.pct_copy_bw / 100, LARGE_TENSOR_FRACTION_OF_COPY, " of copy"),
        _every("softmax >= 1.0x Liger on every case Liger runs", softmax,
               lambda r: _ratio(r, "liger"), 1.0, "x"),
        _every("softmax >= 1.0x torch on every case", softmax, lambda r: _ratio(r, "torch"), 1.0, "x"),
        _geomean_target("softmax geometric mean >= 1.5x torch", softmax, "torch", SOFTMAX_GEOMEAN_VS_TORCH),
        _every("softmax f32 rows of 2^17..2^20 >= 3.6 TB/s", long_f32_rows,
               lambda r: r.gbps, SOFTMAX_LONG_ROW_F32_GBPS, " GB/s"),
        _every("softmax_backward >= 1.0x torch on every case", softmax_backward,
               lambda r: _ratio(r, "torch"), 1.0, "x"),
        _every("softmax_backward >= 1.0x Liger on every case Liger runs", softmax_backward,
               lambda r: _ratio(r, "liger"), 1.0, "x"),
        _geomean_target("reduce_sum geometric mean >= 1.2x torch", reduce_sum, "torch",
                        REDUCE_SUM_GEOMEAN_VS_TORCH),
        _every("reduce_sum >= 1.0x torch on every case", reduce_sum, lambda r: _ratio(r, "torch"), 1.0, "x"),
        _every("copy, vector_add, relu >= 1.0x torch on every case >= 1 Mi elements",
               [r for r in elementwise if _largest_tensor_bytes(r) // ELEMENT_BYTES[r.dtype] >= ELEMENTWISE_MIN_ELEMENTS],
               lambda r: _ratio(r, "torch"), 1.0, "x"),
        *host,
    ]


def _worst_host(rows, value: Callable, label: str) -> tuple[bool, str]:
    worst = max(rows, key=value)
    return all(value(o) <= 0 for o in rows), f"{len(rows)} ops; worst {worst.op} {label(worst)}"


def _ours_like_torch(o) -> float:
    return o.op_call_us if o.torch_writes_out else o.op_us


def overhead_targets(overheads, launch_floor_us: float | None) -> list[Verdict]:
    """The host-cost targets, per backend of the overhead table."""
    verdicts = []
    for backend in sorted({o.backend for o in overheads}):
        rows = [o for o in overheads if o.backend == backend]
        with_torch = [o for o in rows if o.peers.get("torch") is not None]
        target = (f"{backend}: ort.<op> host time <= {OP_CALL_VS_TORCH}x torch's call of the same "
                  f"form (op_() against an out= or copy_ peer, op() against an allocating one)")
        if with_torch:
            passed, detail = _worst_host(
                with_torch, lambda o: _ours_like_torch(o) - OP_CALL_VS_TORCH * o.peers["torch"],
                lambda o: f"{'op_()' if o.torch_writes_out else 'op()'} {_ours_like_torch(o):.1f} us "
                          f"against torch's {o.peers['torch']:.1f} us "
                          f"({_ours_like_torch(o) / o.peers['torch']:.2f}x)")
            verdicts.append(Verdict(target, passed, detail))
        else:
            verdicts.append(Verdict(target, None, "torch not measured in this run"))
        passed, detail = _worst_host(
            rows, lambda o: o.op_call_us - o.run_us - OUT_VARIANT_ABOVE_RUN_US,
            lambda o: f"op_() {o.op_call_us:.1f} us, p.run() {o.run_us:.1f} us")
        verdicts.append(Verdict(f"{backend}: ort.<op>_() <= p.run() + {OUT_VARIANT_ABOVE_RUN_US} us",
                                passed, detail))
        if backend != "cpu":
            target = f"{backend}: p.run() within {RUN_ABOVE_LAUNCH_US} us of the driver's empty-kernel launch"
            if launch_floor_us is None:
                verdicts.append(Verdict(target, None, "the launch floor was not measured"))
            else:
                passed, detail = _worst_host(
                    rows, lambda o: o.run_us - launch_floor_us - RUN_ABOVE_LAUNCH_US,
                    lambda o: f"{o.run_us:.1f} us against the launch's {launch_floor_us:.1f} us")
                verdicts.append(Verdict(target, passed, detail))
    return verdicts


def _point_name(p) -> str:
    return f"{p.dtype} {p.axis} axis {p.mode} {p.rows}x{p.row_length}"


def _every_point(target: str, points, value: Callable, minimum: float, label: str) -> Verdict:
    judged = [(p, value(p)) for p in points]
    judged = [(p, v) for p, v in judged if v is not None]
    if not judged:
        return Verdict(target, None, "no point in this run")
    failing = [(p, v) for p, v in judged if v < minimum]
    worst, worst_value = min(judged, key=lambda pair: pair[1])
    detail = f"{len(judged) - len(failing)}/{len(judged)} points; worst {_point_name(worst)} {worst_value:.2f}{label}"
    if failing:
        shown = ", ".join(f"{p.dtype} {p.axis} {p.mode} {p.row_length} {v:.2f}" for p, v in failing[:12])
        detail += f"; below: {shown}" + (f" and {len(failing) - 12} more" if len(failing) > 12 else "")
    return Verdict(target, not failing, detail)


def _vs_best_peer(p) -> float | None:
    best = p.best_peer()
    return None if best is None else p.gbps / best[1]


def _vs_aligned_neighbours(points) -> Callable:
    """GB/s of a point whose row length is not a power of two over the slower of
    the powers of two around it (same dtype, axis and mode); None for the others."""
    by_series = {}
    for p in points:
        by_series[(p.dtype, p.axis, p.mode, p.row_length)] = p

    def value(p) -> float | None:
        if p.row_length & (p.row_length - 1) == 0:
            return None
        below = 1 << (p.row_length.bit_length() - 1)
        neighbours = [by_series.get((p.dtype, p.axis, p.mode, n)) for n in (below, 2 * below)]
        speeds = [n.gbps for n in neighbours if n is not None]
        return p.gbps / min(speeds) if speeds else None

    return value


def sweep_targets(op: str, points) -> list[Verdict]:
    """The row-length targets on one op's sweep points (tools/bench/sweep.py)."""
    input_bytes = lambda p: p.rows * p.row_length * ELEMENT_BYTES[p.dtype]  # noqa: E731
    return [
        _every_point(f"{op} >= {SWEEP_VS_BEST_PEER:.1f}x the best peer at every point", points, _vs_best_peer,
                     SWEEP_VS_BEST_PEER, "x"),
        _every_point(f"{op} >= {SWEEP_FRACTION_OF_COPY:.0%} of the copy of the same bytes at every row length "
                     f">= {SWEEP_COPY_FROM_LENGTH} ({', '.join(SWEEP_COPY_DTYPES)})",
                     [p for p in points if p.row_length >= SWEEP_COPY_FROM_LENGTH and p.dtype in SWEEP_COPY_DTYPES],
                     lambda p: p.gbps / p.copy_gbps, SWEEP_FRACTION_OF_COPY, " of copy"),
        _every_point(f"{op} rows >= 2^17 at >= {SWEEP_LONG_ROW_GBPS / 1000:.1f} TB/s on inputs >= 256 MiB",
                     [p for p in points if p.row_length >= SWEEP_LONG_ROW and input_bytes(p) >= LARGE_TENSOR_BYTES],
                     lambda p: p.gbps, SWEEP_LONG_ROW_GBPS, " GB/s"),
        _every_point(f"{op} no row length below {SWEEP_NEIGHBOUR_FRACTION}x of its aligned neighbours "
                     f"(the slower power of two around it)", points, _vs_aligned_neighbours(points),
                     SWEEP_NEIGHBOUR_FRACTION, "x"),
    ]
