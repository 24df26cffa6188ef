"""Everything a Python program can do to oprt must end in a specific
OperatorRuntimeError or the right result, never a crash, hang, stray write or
wrong answer: prepared descriptors whose tensors changed storage, runs racing
rebinds and destroys, stale C handles, foreign (__dlpack__) buffers, torch's
negation bit, fork() while other threads use the runtime, a binding object made
without its constructor, empty views with huge strides, non-strided tensors.

Crash-prone cases run in a subprocess (a crash there fails the case instead of
the whole run), over several seeds. Bazel runs this file on cpu as
//tests:hostile_test, under --config=asan and --config=ubsan through
//tests:sanitized, and plainly (the system allocator, which hands a freed
descriptor's address to the next one, so stale handles meet reused memory);
the GPU-runner bundle runs it on the nvidia backend too.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

import operator_runtime as ort
from operator_runtime import _C, library
from operator_runtime.errors import Status
from operator_runtime_testing.c_abi import (
    BACKEND_CPU,
    ViewPointer,
    load_library,
    make_view,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
SEEDS = [0, 1, 2]
FORKS = 50


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def run_isolated(code: str, timeout: float = 120) -> str:
    """Runs code in a fresh interpreter (with this process's path and
    environment); returns its stdout and the end of its stderr, failing the test
    on a crash or a hang."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                                text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the subprocess hung for {timeout} s")
    assert result.returncode == 0, (
        f"subprocess exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"
    )
    return result.stdout + result.stderr[-3000:]


# ------------------------------------------- prepared descriptors, storage changes

STORAGE_CHANGES = textwrap.dedent('''
    import sys, torch, operator_runtime as ort
    seed, device = {seed}, "{device}"
    g = torch.Generator().manual_seed(seed)
    rows, cols = 2 + seed, 33 + 7 * seed

    def fresh():
        x = torch.randn(rows, cols, generator=g).to(device)
        return x, torch.empty_like(x)

    def refused(change, target="out"):
        x, out = fresh()
        p = ort.prepare_softmax(out, x)
        p.run()
        change(out if target == "out" else x)
        try:
            p.run()
        except ort.InvalidArgumentError as error:
            assert "prepared run" in error.message or "storage" in error.message, error.message
            print("refused", flush=True)
        else:
            raise SystemExit("a changed tensor was run")
        p.destroy()

    refused(lambda t: t.resize_(1))
    refused(lambda t: t.resize_(rows * cols * 4))
    refused(lambda t: t.t_())
    refused(lambda t: t.untyped_storage().resize_(0))
    refused(lambda t: t.untyped_storage().resize_(0), target="input")
    refused(lambda t: t.set_(torch.empty(3, device=device)))

    # Memory that moved but keeps the layout is run where it now is.
    x, out = fresh()
    p = ort.prepare_softmax(out, x)
    new_x = torch.randn(rows, cols, generator=g).to(device)
    x.data = new_x
    p.run()
    torch.testing.assert_close(out, torch.softmax(new_x, -1))
    other = torch.empty(rows, cols, device=device)
    out.set_(other.untyped_storage(), 0, (rows, cols), (cols, 1))
    p.run()
    torch.testing.assert_close(other, torch.softmax(new_x, -1))
    print("moved ok")
''')


@pytest.mark.parametrize("seed", SEEDS)
def test_prepared_tensors_whose_storage_changed(seed, device):
    output = run_isolated(STORAGE_CHANGES.format(seed=seed, device=device))
    assert output.count("refused") == 6 and "moved ok" in output, output


def test_calls_on_tensors_past_their_storage_are_refused(device):
    x = torch.randn(64, device=device)
    x.untyped_storage().resize_(16)
    with pytest.raises(ort.InvalidArgumentError, match="reaches past its storage"):
        ort.relu(x)
    out = torch.empty(64, device=device)
    out.untyped_storage().resize_(0)
    with pytest.raises(ort.OperatorRuntimeError):
        ort.relu_(out, torch.randn(64, device=device))


class _TaggedTensor(torch.Tensor):
    """A tensor subclass: _C reads it through its Python attributes."""


def test_tensor_objects_read_without_python_agree_with_their_attributes(device):
    # torch.Tensor and Parameter objects are read through torch's object layout
    # (runtime/python/torch_kernels.cc), anything else through Python; each kind
    # runs, and is refused with the same message once its storage is gone.
    assert library.TENSOR_OBJECT_READS
    base = torch.randn(6, 10, device=device)
    tensors = {
        "tensor": base.clone(), "parameter": torch.nn.Parameter(base.clone(), requires_grad=False),
        "subclass": base.clone().as_subclass(_TaggedTensor), "transposed": base.clone().t(),
        "offset": base.clone()[2:, 3:], "broadcast": base.clone()[:1].expand(6, 10),
    }
    for kind, x in tensors.items():
        out = torch.empty(x.shape, device=device)
        expected = torch.relu(x.as_subclass(torch.Tensor))
        with ort.prepare_relu(out, x) as p:
            p.run()
            torch.testing.assert_close(out, expected, msg=kind)
            # The descriptor's own run reads the tensors in _C (p.run() may take torch's op).
            out.zero_()
            p._descriptor.run(out, (x,), out.get_device())
            torch.testing.assert_close(out, expected, msg=kind)
            x.untyped_storage().resize_(0)
            with pytest.raises(ort.InvalidArgumentError, match="input reaches past its storage"):
                p.run()


# --------------------------------------------------------------- threads

THREADS = textwrap.dedent('''
    import threading, torch, operator_runtime as ort
    device, seed = "{device}", {seed}
    torch.manual_seed(seed)
    n = 1 << 20
    errors = []
    x = torch.randn(n, device=device)
    p = ort.prepare_relu(torch.empty(n, device=device), x)
    stop = threading.Event()

    def runner():
        while not stop.is_set():
            try:
                p.run()
            except ort.InvalidArgumentError as error:
                if "destroyed" not in error.message:
                    errors.append(error)

    def rebinder():
        for _ in range(200):
            p.run(torch.randn(n, device=device), out=torch.empty(n, device=device))

    threads = [threading.Thread(target=runner) for _ in range(3)] + [threading.Thread(target=rebinder)]
    for t in threads: t.start()
    threads[-1].join()
    p.destroy()  # while the runners still run
    stop.set()
    for t in threads[:-1]: t.join()
    assert not errors, errors
    q = ort.prepare_relu(torch.empty(8, device=device), torch.randn(8, device=device))
    torch.testing.assert_close(q.run(), torch.relu(q._inputs[0]))
    print("threads ok")
''')


@pytest.mark.parametrize("seed", SEEDS)
def test_rebind_and_destroy_race_runs_in_flight(seed, device):
    assert "threads ok" in run_isolated(THREADS.format(device=device, seed=seed))


def test_threads_calling_at_once_share_the_cpu_workers():
    # Large cpu calls from several threads at once, each running its pieces on
    # torch's threads (an OpenMP team per calling thread); every result is right.
    inputs = [torch.randn(64, 4096, generator=torch.Generator().manual_seed(i)) for i in range(6)]
    results: list[list[torch.Tensor]] = [[] for _ in inputs]

    def call(i: int) -> None:
        for _ in range(10):
            results[i].append(ort.softmax(inputs[i]))
            results[i].append(ort.relu(inputs[i]))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for x, outputs in zip(inputs, results):
        assert len(outputs) == 20
        for k, y in enumerate(outputs):
            torch.testing.assert_close(y, torch.softmax(x, -1) if k % 2 == 0 else torch.relu(x))


# --------------------------------------------------------- stale C handles

LIB = load_library()


def _create_relu(n: int, source: torch.Tensor, result: torch.Tensor) -> ctypes.c_void_p:
    entry = LIB.oprt_find_operator(b"relu").contents
    in_view = make_view(source.data_ptr(), torch.float32, (n,), (1,))
    out_view = make_view(result.data_ptr(), torch.float32, (n,), (1,))
    inputs = (ViewPointer * 1)(ctypes.pointer(in_view))
    desc = ctypes.c_void_p()
    created = entry.create(ctypes.byref(desc), BACKEND_CPU, ctypes.pointer(out_view), inputs, None)
    assert created == Status.SUCCESS
    return desc


def test_stale_handles_stay_dead_when_memory_is_reused():
    entry = LIB.oprt_find_operator(b"relu").contents
    small_in, small_out = torch.randn(4), torch.zeros(4)
    big_in, big_out = torch.randn(1 << 16), torch.zeros(1 << 16)
    seen = set()
    for _ in range(500):
        stale = _create_relu(1 << 16, big_in, big_out)
        seen.add(stale.value)
        assert entry.destroy(stale) == Status.SUCCESS
        live = _create_relu(4, small_in, small_out)
        inputs = (ctypes.c_void_p * 1)(big_in.data_ptr())
        # The stale handle of the big problem must not run the new small descriptor.
        assert entry.execute(stale, None, 0, big_out.data_ptr(), inputs, None) == Status.INVALID_ARG
        assert entry.destroy(stale) == Status.INVALID_ARG
        ok_inputs = (ctypes.c_void_p * 1)(small_in.data_ptr())
        assert entry.execute(live, None, 0, small_out.data_ptr(), ok_inputs, None) == Status.SUCCESS
        assert entry.destroy(live) == Status.SUCCESS
    torch.testing.assert_close(small_out, torch.relu(small_in))
    assert len(seen) == 500, "handles repeat"


def test_a_foreign_pointer_is_not_a_descriptor():
    entry = LIB.oprt_find_operator(b"copy").contents
    bogus = ctypes.c_void_p(ctypes.addressof(ctypes.create_string_buffer(64)))
    assert entry.destroy(bogus) == Status.INVALID_ARG
    assert entry.execute(ctypes.c_void_p(0xDEAD00000001), None, 0, None, None, None) == Status.INVALID_ARG


def test_empty_views_with_huge_strides_create_and_run():
    entry = LIB.oprt_find_operator(b"vector_add").contents
    huge = 1 << 62
    buffer = torch.zeros(1)
    view = make_view(buffer.data_ptr(), torch.float32, (0, huge, huge), (huge, huge, -huge + 1))
    inputs = (ViewPointer * 2)(ctypes.pointer(view), ctypes.pointer(view))
    desc = ctypes.c_void_p()
    assert entry.create(ctypes.byref(desc), BACKEND_CPU, ctypes.pointer(view), inputs, None) == Status.SUCCESS
    pointers = (ctypes.c_void_p * 2)(buffer.data_ptr(), buffer.data_ptr())
    assert entry.execute(desc, None, 0, buffer.data_ptr(), pointers, None) == Status.SUCCESS
    assert entry.destroy(desc) == Status.SUCCESS
    for name in (b"reduce_sum", b"softmax"):
        entry = LIB.oprt_find_operator(name).contents
        out_view = make_view(buffer.data_ptr(), torch.float32,
                             (0, huge) if name == b"reduce_sum" else (0, huge, huge),
                             (huge, huge) if name == b"reduce_sum" else (huge, huge, -huge + 1))
        inputs = (ViewPointer * 1)(ctypes.pointer(view))
        created = entry.create(ctypes.byref(desc), BACKEND_CPU, ctypes.pointer(out_view), inputs, None)
        assert created == Status.SUCCESS
        assert entry.destroy(desc) == Status.SUCCESS


def test_a_binding_object_made_without_its_constructor():
    descriptor = _C.Descriptor.__new__(_C.Descriptor)
    for use in (lambda: descriptor.workspace_size, lambda: descriptor.plan, descriptor.destroy,
                lambda: descriptor.execute(0, []), lambda: descriptor.run(None, [], -1)):
        with pytest.raises(ort.OperatorRuntimeError, match="not made by its constructor"):
            use()


# ---------------------------------------------------------- foreign buffers

DLPACK_NEGATIVE = '''
import numpy as np, torch, operator_runtime as ort
array = np.arange(12, dtype=np.float32)[::-1]
for call in (lambda: ort.relu(array), lambda: ort.relu_(np.zeros(12, np.float32)[::-1], torch.ones(12))):
    try:
        call()
    except ort.InvalidArgumentError as error:
        assert "negative strides" in error.message, error.message
        print("refused")
'''


def test_dlpack_negative_strides_are_refused():
    assert run_isolated(DLPACK_NEGATIVE).count("refused") == 2


def test_read_only_foreign_outputs_are_never_written(tmp_path):
    source = torch.randn(6)
    frozen = np.zeros(6, dtype=np.float32)
    frozen.flags.writeable = False
    from_bytes = np.frombuffer(bytes(24), dtype=np.float32)
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(24))
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(6,))
    for out in (frozen, from_bytes, mapped):
        with pytest.raises(ort.InvalidArgumentError, match="read-only memory"):
            ort.relu_(out, source)
        with pytest.raises(ort.InvalidArgumentError, match="read-only memory"):
            ort.prepare_relu(out, source)
    assert not frozen.any() and not from_bytes.any()
    del mapped
    assert path.read_bytes() == bytes(24)
    writable = np.zeros(6, dtype=np.float32)
    ort.relu_(writable, source)
    np.testing.assert_allclose(writable, torch.relu(source).numpy())


class _DLPackOnly:
    """Another library's tensor: nothing but the DLPack protocol, passed on from numpy."""

    def __init__(self, array, dlpack=None, device=None):
        self._array, self._dlpack, self._device = array, dlpack, device

    def __dlpack__(self, **kwargs):
        return self._dlpack(**kwargs) if self._dlpack else self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device() if self._device else self._array.__dlpack_device__()


DLPACK_ONLY = f"""
import numpy as np, torch, operator_runtime as ort
{inspect.getsource(_DLPackOnly)}
frozen = np.zeros(6, dtype=np.float32)
frozen.flags.writeable = False
reversed_ = np.arange(12, dtype=np.float32)[::-1]
huge = np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (4, 2), (2**62, 4))
for call in (lambda: ort.relu_(_DLPackOnly(frozen), torch.ones(6)),
             lambda: ort.prepare_relu(_DLPackOnly(frozen), torch.ones(6)),
             lambda: ort.relu(_DLPackOnly(reversed_)),
             lambda: ort.relu(huge), lambda: ort.relu(_DLPackOnly(huge))):
    try:
        call()
    except ort.InvalidArgumentError as error:
        print("refused:", error.message)
assert not frozen.any()
"""


def test_dlpack_only_objects_are_checked_as_numpy_arrays_are():
    """DLPack 1.0's read-only flag and the strides are read from the capsule itself:
    torch's importer ignores the flag and aborts the process on such strides."""
    refused = [line for line in run_isolated(DLPACK_ONLY).splitlines() if line.startswith("refused")]
    assert refused == [
        "refused: relu: out is read-only memory and cannot be written",
        "refused: relu: out is read-only memory and cannot be written",
        "refused: relu: input has negative strides (-1,); pass a copy with non-negative strides",
        "refused: relu: input has strides (1152921504606846976, 1) that reach past 2^63 bytes",
        "refused: relu: input has strides (1152921504606846976, 1) that reach past 2^63 bytes",
    ]


def test_failing_dlpack_producers_give_the_library_error():
    array = np.arange(6, dtype=np.float32)
    capsule = array.__dlpack__()
    torch.from_dlpack(capsule)  # consumed
    unused = "could not be taken through __dlpack__: it returned no unused DLPack capsule"
    producers = [
        ("could not be taken through __dlpack__ (KeyError: 'boom')",
         _DLPackOnly(array, dlpack=lambda **kwargs: {}["boom"])),
        ("has no usable __dlpack_device__ (AttributeError: no device)",
         _DLPackOnly(array, device=lambda: (_ for _ in ()).throw(AttributeError("no device")))),
        (unused, _DLPackOnly(array, dlpack=lambda **kwargs: capsule)),
        (unused, _DLPackOnly(array, dlpack=lambda **kwargs: "not a capsule")),
    ]
    if not torch.cuda.is_available():
        producers.append(("is on a CUDA device, and this torch sees none",
                          _DLPackOnly(array, device=lambda: (2, 0))))
    for message, producer in producers:
        with pytest.raises(ort.InvalidArgumentError) as refused:
            ort.relu(producer)
        assert refused.value.message == "relu: input " + message
    torch.testing.assert_close(ort.relu(_DLPackOnly(array)), torch.relu(torch.from_numpy(array)))


# ---------------------------------------------------------- negation bit

def test_negated_views(device):
    x = torch.randn(5, 7, device=device)
    negated = torch._neg_view(x)
    assert negated.is_neg()
    torch.testing.assert_close(ort.relu(negated, 0.25), torch.nn.functional.leaky_relu(-x, 0.25))
    torch.testing.assert_close(ort.softmax(negated, 0), torch.softmax(-x, 0))
    with pytest.raises(ort.InvalidArgumentError, match="lazily negated"):
        ort.relu_(torch._neg_view(torch.zeros(5, 7, device=device)), x)
    with ort.prepare_relu(torch.empty(5, 7, device=device), negated) as prepared:
        torch.testing.assert_close(prepared.run(), torch.relu(-x))  # resolved by torch's dispatcher
    with pytest.raises(ort.InvalidArgumentError, match="lazily negated"):
        ort.prepare_relu(torch._neg_view(torch.zeros(5, 7, device=device)), x)


def test_a_prepared_out_made_a_negated_view_through_data_is_refused(device):
    x, out, target = (torch.randn(4, 5, device=device) for _ in range(3))
    prepared = ort.prepare_relu(out, x)
    out.data = torch._neg_view(target)
    before = target.clone()
    with pytest.raises(ort.InvalidArgumentError) as refused:
        prepared.run()
    assert refused.value.message == (
        "relu: out is a lazily negated view; write into a tensor without torch's negation "
        "or conjugation bit"
    )
    assert torch.equal(target, before)
    source = torch.randn(4, 5, device=device)
    prepared = ort.prepare_relu(torch.empty(4, 5, device=device), source)
    source.data = torch.randn(4, 5, device=device, dtype=torch.bfloat16)
    with pytest.raises(ort.InvalidArgumentError, match=r"input now has shape \[4, 5\], strides \[5, 1\], "
                       r"bfloat16 on .*, but the descriptor was created for shape \[4, 5\], strides "
                       r"\[5, 1\], float32 on"):
        prepared.run()


def test_inference_tensors_are_written_only_in_inference_mode(device):
    with torch.inference_mode():
        frozen = torch.zeros(3, device=device)
    source = torch.ones(3, device=device)
    message = ("copy: out is an inference tensor; writing into one is allowed only inside "
               "torch.inference_mode(), as for torch's in-place operations")
    prepared = ort.prepare_copy(frozen, source)
    for call in (lambda: ort.copy_(frozen, source), prepared.run):
        with pytest.raises(ort.AutogradError) as refused:
            call()
        assert refused.value.message == message
    assert not frozen.any()
    with torch.inference_mode():
        ort.copy_(frozen, source)
        prepared.run()
    assert torch.equal(frozen, source)


# -------------------------------------------------------------------- fork

FORK = '''
import os, threading, time, torch, operator_runtime as ort
stop = threading.Event()

big = torch.randn(1 << 18)  # large enough that the cpu backend splits it across its workers

def churn():  # creates and destroys descriptors without pause, and keeps the cpu workers busy
    n = 1
    while not stop.is_set():
        n = n % 97 + 1
        x = torch.randn(3, n)
        ort.softmax(x)
        ort.relu(big)
        with ort.prepare_relu(torch.empty(3, n), x) as p:
            p.run()
        if n % 13 == 0:
            ort.clear_descriptor_cache()

workers = [threading.Thread(target=churn) for _ in range(2)]
for w in workers: w.start()
hung = failed = 0
for _ in range({forks}):
    time.sleep(0.002)
    pid = os.fork()
    if pid == 0:
        import faulthandler  # a child still running after 20 s prints where it is stuck
        faulthandler.dump_traceback_later(20, exit=True)
        try:
            y = ort.softmax(torch.ones(2, 5))
            with ort.prepare_copy(torch.empty(4), torch.ones(4)) as p:
                p.run()
            z = ort.relu(-big)  # the child's own workers
            ok = torch.allclose(y, torch.full((2, 5), 0.2)) and torch.equal(z, torch.relu(-big))
            os._exit(0 if ok else 3)
        except BaseException:
            os._exit(4)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            failed += os.waitstatus_to_exitcode(status) != 0
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9); os.waitpid(pid, 0); hung += 1
            break
        time.sleep(0.001)
stop.set()
for w in workers: w.join()
print(f"forks {forks} hung {{hung}} failed {{failed}}")
'''


# GCC 12's AddressSanitizer runtime intercepts vfork but not fork (`nm -D libasan.so.8`),
# so it does not hold its allocator's locks across fork(): a child forked while another
# thread allocates can hang in malloc, outside oprt (one child in 50 did, in one CI run).
# The plain and UBSan runs of this file hold the guarantee.
UNDER_ASAN = hasattr(ctypes.CDLL(None), "__asan_init")


@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer's allocator is not fork-safe (GCC 12)")
def test_fork_while_other_threads_use_the_runtime():
    output = run_isolated(FORK.format(forks=FORKS), timeout=600)
    assert f"forks {FORKS} hung 0 failed 0" in output, output


# From Python the cpu backend runs its pieces on torch's OpenMP threads, which do not
# survive fork(): in a child of a process that used them, the next parallel torch op
# never returns. oprt's calls in such a child run on the library's own threads.
FORK_AFTER_TORCH_THREADS = '''
import os, faulthandler, torch, operator_runtime as ort
big = torch.randn(64, 4096)
negated, expected = -big, (torch.relu(-big), torch.softmax(big, -1))
for _ in range(3):
    torch.relu(big); ort.relu(big); ort.softmax(big)  # the main thread's OpenMP team exists
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(30, exit=True)
    results = ort.relu(negated), ort.softmax(big)  # before any torch op in the child
    torch.set_num_threads(1)  # torch's own ops in this child run on this thread only
    ok = torch.equal(results[0], expected[0]) and torch.allclose(results[1], expected[1])
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print(f"child exited {os.waitstatus_to_exitcode(status)}")
'''


@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer's allocator is not fork-safe (GCC 12)")
def test_fork_after_the_cpu_backend_ran_on_torch_threads():
    assert "child exited 0" in run_isolated(FORK_AFTER_TORCH_THREADS, timeout=120)


# A prepared object on a Python backend serialises its runs with a lock; a child
# forked while another thread's run held it must find it free.
FORK_DURING_A_PREPARED_RUN = '''
import os, threading, time, faulthandler, torch, operator_runtime as ort
class SlowCopy:
    def available(self): return True
    def unavailable_reason(self): return None
    def runs_on(self, device): return device.type == "cpu"
    def prepare_key(self): return None
    def prepare(self, op, plan, out, inputs, params):
        class Kernel:
            def run(self, out, inputs, stream):
                time.sleep(1.0)
                out.copy_(inputs[0])
            def release(self): pass
            def destroy(self): pass
        return Kernel()
ort.register_python_backend("tilelang", SlowCopy())
x, out = torch.randn(8), torch.empty(8)
prepared = ort.prepare_copy(out, x, backend="tilelang")
threading.Thread(target=prepared.run).start()
time.sleep(0.3)  # that run holds the lock now
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(20, exit=True)
    prepared.run()
    prepared.destroy()
    os._exit(0 if torch.equal(out, x) else 3)
_, status = os.waitpid(pid, 0)
print(f"child exited {os.waitstatus_to_exitcode(status)}")
'''


@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer's allocator is not fork-safe (GCC 12)")
def test_fork_while_a_prepared_python_backend_run_holds_its_lock():
    assert "child exited 0" in run_isolated(FORK_DURING_A_PREPARED_RUN, timeout=120)


# ------------------------------------------------------- any thread count

# The cpu backend splits its work by torch's thread count, which a program sets
# (torch.set_num_threads) and which follows the machine's cores. No split changes
# an element's arithmetic (a row, or a column of neighbouring rows, is summed by one
# thread), so every count must give the one-thread result to the bit, and that
# result torch's. 16 threads once summed 40 columns in 16 blocks of 3, the last two
# starting past the end, and crashed (only on the 16-core GPU machine).
THREAD_COUNTS = textwrap.dedent('''
    import torch, operator_runtime as ort
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    # The last shape is split into a piece per thread at every count (64K elements each).
    shapes = [(8, 40), (3, 5), (1, 63), (2, 17, 3), (5, 1, 7), (64, 129), (4097, 3), (300, 1100),
              (1024, 4099)]
    # (oprt call, torch's answer), the inputs made once: torch's own results may
    # change with its thread count.
    calls = []
    for shape in shapes:
        x, dy = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
        for dim in range(x.dim()):
            y = torch.softmax(x, dim)
            calls += [
                (lambda x=x, dim=dim: ort.reduce_sum(x, dim), x.sum(dim)),
                (lambda x=x, dim=dim: ort.reduce_sum(x, dim, keepdim=True), x.sum(dim, keepdim=True)),
                (lambda x=x, dim=dim: ort.softmax(x, dim), y),
                (lambda dy=dy, y=y, dim=dim: ort.softmax_backward(dy, y, dim),
                 torch._softmax_backward_data(dy, y, dim, x.dtype)),
            ]
        calls += [
            (lambda x=x, dy=dy: ort.vector_add(x, dy[..., :1]), x + dy[..., :1]),
            (lambda x=x: ort.relu(x, 0.1), torch.nn.functional.leaky_relu(x, 0.1)),
            (lambda x=x, dy=dy: ort.relu_backward(dy, x, 0.0), dy * (x > 0)),
            (lambda x=x: ort.copy(x.transpose(0, -1)), x.transpose(0, -1)),
        ]
    one_thread = [call() for call, _ in calls]
    for threads in (1, 2, 3, 5, 7, 16, 33, 64):
        torch.set_num_threads(threads)
        for i, (call, theirs) in enumerate(calls):
            ours = call()
            assert torch.equal(ours, one_thread[i]), (threads, i)
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    print(f"thread counts ok {len(calls)}")
''')


def test_every_thread_count_gives_the_same_answer():
    assert "thread counts ok 116" in run_isolated(THREAD_COUNTS, timeout=300)


# ------------------------------------------------------- tensors oprt refuses

def test_sparse_mkldnn_and_nested_tensors_are_refused():
    dense = torch.randn(4, 4)
    tensors = {"sparse_coo": dense.to_sparse(), "sparse_csr": dense.to_sparse_csr(),
               "nested": torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])}
    if torch.backends.mkldnn.is_available():
        tensors["_mkldnn"] = dense.to_mkldnn()
    for kind, tensor in tensors.items():
        with pytest.raises(ort.InvalidArgumentError, match=f"is a {kind} tensor; oprt takes dense"):
            ort.relu(tensor)
        with pytest.raises(ort.InvalidArgumentError, match=f"is a {kind} tensor"):
            ort.copy_(tensor, tensor)


def test_non_bool_keepdim_is_refused():
    for keepdim in ("no", 0, None):
        with pytest.raises(ort.InvalidArgumentError, match="keepdim must be a bool"):
            ort.reduce_sum(torch.randn(3, 4), 1, keepdim=keepdim)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
