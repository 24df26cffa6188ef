"""A thread-safe mapping of at most `capacity` entries that drops the oldest, the
lock it and prepared objects take, which a forked child finds free, and how
parameter values key such caches."""

from __future__ import annotations

import os
import threading
from typing import Generic, Hashable, Sequence, TypeVar

Value = TypeVar("Value")

# Forks this process has come through: a lock made before the last one may be
# held by a thread that does not exist in this child, and is made anew.
_forks = 0
_renewing = threading.Lock()


def _after_fork_in_child() -> None:
    global _forks, _renewing
    _forks += 1
    _renewing = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ForkSafeLock:
    """A non-reentrant lock (`with lock:`) that a forked child finds free, where a
    thread of the parent held it at the fork. One at-fork hook serves every lock,
    so making many costs no registration."""

    __slots__ = ("_lock", "_forks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forks = _forks

    def __enter__(self) -> ForkSafeLock:
        if self._forks != _forks:
            with _renewing:
                if self._forks != _forks:
                    self._lock = threading.Lock()
                    self._forks = _forks
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()


def params_key(params: Sequence[float]) -> tuple[str, ...]:
    """Parameter values as a cache key: their exact bits, so -0.0 and 0.0 (equal
    as floats, yet a slope of each gives other zeros) key different entries."""
    return tuple(float(value).hex() for value in params)


class BoundedCache(Generic[Value]):
    """Entries by key, the oldest inserted dropped once `capacity` are kept. Reads
    take no lock (a dict lookup is atomic under the GIL); writes take one."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: dict[Hashable, Value] = {}
        self._lock = ForkSafeLock()

    def get(self, key: Hashable) -> Value | None:
        return self._entries.get(key)

    def put(self, key: Hashable, value: Value) -> None:
        with self._lock:
            if key not in self._entries and len(self._entries) >= self.capacity:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = value

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
