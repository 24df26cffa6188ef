"""A thread-safe mapping of at most `capacity` entries that drops the oldest."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Generic, Hashable, TypeVar

Value = TypeVar("Value")


class BoundedCache(Generic[Value]):
    """Entries by key, the oldest inserted dropped once `capacity` are kept. Reads
    take no lock (a dict lookup is atomic under the GIL); writes take one, renewed
    in a forked child, where a thread that held it does not exist."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: dict[Hashable, Value] = {}
        self._lock = threading.Lock()
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (cache := this()) and cache._renew_lock())

    def _renew_lock(self) -> None:
        self._lock = threading.Lock()

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

    def __len__(self) -> int:
        return len(self._entries)
