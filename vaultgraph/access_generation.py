"""The access generation the workers of one `serve --workers N` share: a change to who may do
what (a key revoked, an application deleted or its rules and permissions replaced) made through
one worker holds at once on all of them.

The supervisor creates one page of shared memory (an anonymous file: nothing is left on disk,
even after a SIGKILL) before it starts the workers, which inherit its descriptor. It holds one
64-bit counter per worker. A worker that changes access adds one to its own counter before it
answers; every worker reads all of them on each authentication and, when they differ from what
it saw last, drops its cached principals. One writer per counter: no lock, and a read racing a
write can only race a change that has not been answered yet.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from collections.abc import Mapping

ENV = "_VAULTGRAPH_ACCESS_GENERATION"  # "<fd>:<workers>:<this worker's slot>", set per worker
COUNTER = struct.Struct("<Q")


def create(workers: int) -> int:
    """A new shared page for `workers` counters, all 0: its descriptor, inheritable. The caller
    passes it to the workers (with `worker_env`) and closes it once they are started."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("vaultgraph-access-generation", 0)
    else:  # pragma: no cover - no memfd (macOS): an unlinked temporary file
        fd, path = tempfile.mkstemp(prefix="vaultgraph-access-")
        os.unlink(path)
    os.ftruncate(fd, workers * COUNTER.size)
    os.set_inheritable(fd, True)
    return fd


def worker_env(fd: int, workers: int, slot: int) -> dict[str, str]:
    return {ENV: f"{fd}:{workers}:{slot}"}


class AccessGeneration:
    """One worker's view of the shared counters."""

    def __init__(self, fd: int, workers: int, slot: int):
        if not 0 <= slot < workers:
            raise ValueError(f"slot {slot} of {workers}")
        self._map = mmap.mmap(fd, workers * COUNTER.size)
        self._offset = slot * COUNTER.size
        self._own = COUNTER.unpack_from(self._map, self._offset)[0]

    @classmethod
    def inherited(cls, environ: Mapping[str, str] = os.environ) -> AccessGeneration | None:
        """The page the supervisor handed this worker, or None (a single process)."""
        value = environ.get(ENV)
        if not value:
            return None
        fd, workers, slot = (int(part) for part in value.split(":"))
        return cls(fd, workers, slot)

    def read(self) -> bytes:
        """Every worker's counter, as one value to compare with an earlier read."""
        return self._map[:]

    def bump(self) -> None:
        """This worker changed access: every worker's next read differs from its last."""
        self._own += 1
        COUNTER.pack_into(self._map, self._offset, self._own)
