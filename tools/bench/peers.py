"""The baselines bench.py times beside oprt, in the same process, interleaved with it.

- torch: the operator's ``OpSpec.peer`` (PyTorch's own way, eager).
- torch_compile: that same function through ``torch.compile(dynamic=False)``,
  compiled once per case before timing.
- liger: Liger-Kernel's Triton softmax (``liger_kernel.ops.softmax``): its
  forward for softmax and its backward (the kernels LigerSoftmaxFunction.backward
  launches, with the settings its forward would have chosen) for
  softmax_backward, over the last dim of rows up to 65536 long on a CUDA GPU;
  every other op or case is "n/a". Liger-Kernel is a pure-Python
  wheel on Triton, pinned with its hash in tools/bench/gpu_peers_lock.txt, the
  lock of GPU-host-only peers (the CPU build hosts have no Triton GPU).
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

PEER_NAMES = ("torch", "torch_compile", "liger")
# Short names for table columns.
LABELS = {"torch": "torch", "torch_compile": "compile", "liger": "liger"}
# liger's calculate_settings refuses rows whose next power of two exceeds this.
LIGER_MAX_ROW = 65536

PeerCall = Callable[..., Any]  # (out, *inputs)


@dataclass
class PeerTiming:
    """One peer on one case (ratio: its time over ours); all None with `unavailable`
    set when it cannot run it."""

    us: float | None = None
    gbps: float | None = None
    ratio: float | None = None
    unavailable: str | None = None


class Unavailable(Exception):
    """This peer cannot run this case; the message says why (shown beside "n/a")."""


def _liger_softmax() -> PeerCall:
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    return LigerSoftmaxFunction.apply


def check(names: Sequence[str]) -> str | None:
    """Why these peers cannot be used in this process, or None."""
    unknown = [name for name in names if name not in PEER_NAMES]
    if unknown:
        return f"unknown peer(s) {', '.join(unknown)} (known: {', '.join(PEER_NAMES)})"
    if "liger" in names:
        try:
            _liger_softmax()
        except ImportError as error:
            return (f"--peers=liger needs the liger_kernel package (pip install --no-deps --require-hashes "
                    f"-r tools/bench/gpu_peers_lock.txt; it runs on Triton GPUs), which is not importable "
                    f"here: {error}")
    return None


def describe(names: Sequence[str]) -> str:
    versions = {
        "torch": f"torch {torch.__version__}",
        "torch_compile": "torch.compile (inductor, dynamic=False)",
        "liger": "liger",
    }
    if "liger" in names:
        try:
            versions["liger"] = f"liger-kernel {importlib.metadata.version('liger-kernel')}"
        except importlib.metadata.PackageNotFoundError:  # importable without a wheel (a source checkout)
            pass
    return ", ".join(versions[name] for name in names)


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:160]


def _liger_softmax_backward(n_cols: int) -> PeerCall:
    from liger_kernel.ops.softmax import _softmax_backward
    from liger_kernel.ops.utils import calculate_settings

    block_size, num_warps = calculate_settings(n_cols)
    multi_block = n_cols > block_size
    return lambda out, dy, y: _softmax_backward(dy, y, block_size, num_warps, multi_block)


def _liger_call(op: str, params: dict[str, Any], inputs: Sequence[torch.Tensor]) -> PeerCall:
    if op not in ("softmax", "softmax_backward"):
        raise Unavailable("liger has no such op (softmax and its backward only)")
    x = inputs[0]
    if x.device.type != "cuda":
        raise Unavailable("liger needs a CUDA GPU (Triton)")
    if params["dim"] % x.dim() != x.dim() - 1:
        raise Unavailable("liger's softmax is over the last dim only")
    if x.shape[-1] > LIGER_MAX_ROW:
        raise Unavailable(f"liger's softmax takes rows of at most {LIGER_MAX_ROW} elements")
    if op == "softmax_backward":
        return _liger_softmax_backward(x.shape[-1])
    softmax = _liger_softmax()
    return lambda out, x: softmax(x)


def bind(name: str, spec, params: dict[str, Any], out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> PeerCall:
    """The peer's call(out, *inputs) for this case, or Unavailable. It is run
    once on (out, inputs) here, so torch.compile compiles before any timing."""
    eager = functools.partial(spec.peer, **params)
    if name == "torch":
        call = eager
    elif name == "torch_compile":
        # Each case compiles afresh: otherwise every case's recompile of the same
        # peer code counts against dynamo's cache limit and it falls back to eager.
        torch.compiler.reset()
        call = torch.compile(eager, dynamic=False)
    else:
        call = _liger_call(spec.name, params, inputs)
    try:
        call(out, *inputs)
    except Exception as error:  # noqa: BLE001  (a peer that fails is reported n/a, not fatal)
        raise Unavailable(f"{name} failed: {_first_line(error)}") from error
    return call
