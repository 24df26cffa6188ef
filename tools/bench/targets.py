"""The nvidia performance targets, declared once, and their verdict on a bench run.

Each target reads the bench's results (ours, the peers in the same run) and says
PASS or FAIL with the figures it judged, or `n/a` when the run holds no case it
applies to (a subset of ops, a peer not requested). Targets judge the nvidia
backend's rows only; a run without nvidia gets one line saying so.
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
MAX_RUN_OVERHEAD_US = 2.0


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


def evaluate(results, overheads, backends: Sequence[str], launch_floor_us: float | None = None) -> list[Verdict]:
    if "nvidia" not in backends:
        return [Verdict("targets", None, f"they apply to the nvidia backend, not {', '.join(backends)}")]
    results = [r for r in results if r.backend == "nvidia"]
    overheads = [o for o in overheads if o.backend == "nvidia"]
    by_op = {op: [r for r in results if r.op == op] for op in {r.op for r in results}}
    softmax = by_op.get("softmax", [])
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
        _geomean_target("reduce_sum geometric mean >= 1.2x torch", reduce_sum, "torch",
                        REDUCE_SUM_GEOMEAN_VS_TORCH),
        _every("reduce_sum >= 1.0x torch on every case", reduce_sum, lambda r: _ratio(r, "torch"), 1.0, "x"),
        _every("copy, vector_add, relu >= 1.0x torch on every case >= 1 Mi elements",
               [r for r in elementwise if _largest_tensor_bytes(r) // ELEMENT_BYTES[r.dtype] >= ELEMENTWISE_MIN_ELEMENTS],
               lambda r: _ratio(r, "torch"), 1.0, "x"),
        _overhead_target(overheads, launch_floor_us),
    ]


def _overhead_target(overheads, launch_floor_us: float | None) -> Verdict:
    target = "prepared run() host overhead <= 2 us per call"
    if not overheads:
        return Verdict(target, None, "not measured in this run (--overhead)")
    worst = max(overheads, key=lambda o: o.run_us)
    torch_us = worst.peers.get("torch")
    beside = [f"torch's call {torch_us:.1f} us"] if torch_us is not None else []
    if launch_floor_us is not None:
        beside.append(f"the driver's empty-kernel launch {launch_floor_us:.1f} us")
    detail = f"worst {worst.op} {worst.run_us:.1f} us" + (f" ({'; '.join(beside)})" if beside else "")
    return Verdict(target, worst.run_us <= MAX_RUN_OVERHEAD_US, detail)
