"""Host time per call: of any callable, and of the CUDA driver's own kernel launch.

The overhead table compares `p.run()` with the driver's floor: an empty kernel
launched by `cuLaunchKernel` through ctypes, minus the cost of a ctypes call that
does no work (`cuCtxGetCurrent`). No per-call launch of any library, ours or
torch's, goes below it, because every one of them ends in this call.
"""

from __future__ import annotations

import ctypes
import statistics
import time

import torch

# An empty kernel; the driver compiles the PTX for the GPU it runs on.
_EMPTY_KERNEL_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry oprt_empty() { ret; }
"""


def _check(driver: ctypes.CDLL, result: int, call: str) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        driver.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"launch floor: {call} failed: {(name.value or b'?').decode()}")


def host_us_per_call(call, calls: int, device: torch.device) -> float:
    """Median host µs per call over 5 batches of `calls // 5` back-to-back calls.

    GPU calls are not synchronized inside a batch (the queue is drained between
    batches); with tiny tensors each kernel takes about its launch, so the host,
    not the device, sets the pace. The first batch warms caches up and is dropped.
    """
    batch = max(1, calls // 5)
    per_call = []
    for _ in range(6):
        if device.type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        for _ in range(batch):
            call()
        per_call.append((time.perf_counter() - begin) / batch)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return statistics.median(per_call[1:]) * 1e6


def driver_launch_us(calls: int) -> float:
    """µs of host time per cuLaunchKernel of an empty kernel on torch's current stream."""
    torch.cuda.init()
    driver = ctypes.CDLL("libcuda.so.1")
    module, function, context = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    _check(driver, driver.cuModuleLoadData(ctypes.byref(module), _EMPTY_KERNEL_PTX), "cuModuleLoadData")
    try:
        _check(driver, driver.cuModuleGetFunction(ctypes.byref(function), module, b"oprt_empty"),
               "cuModuleGetFunction")
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        launch, no_op = driver.cuLaunchKernel, driver.cuCtxGetCurrent
        one, block, none = ctypes.c_uint(1), ctypes.c_uint(32), ctypes.c_void_p()
        context_out = ctypes.byref(context)
        gpu = torch.device("cuda")
        launch_us = host_us_per_call(
            lambda: launch(function, one, one, one, block, one, one, 0, stream, none, none), calls, gpu)
        no_op_us = host_us_per_call(lambda: no_op(context_out), calls, gpu)
        _check(driver, driver.cuCtxSynchronize(), "cuCtxSynchronize")
    finally:
        driver.cuModuleUnload(module)
    return launch_us - no_op_us
