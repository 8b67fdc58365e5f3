"""CPU time per request, per process group (the service and its workers, Neo4j, the load
generator), read from /proc over a measured window: a figure a busy machine skews far less
than requests per second."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _fields(path: Path) -> list[str]:
    """A /proc `stat` file's fields from the third on. The command name (field 2) may hold
    spaces; the fields after it do not."""
    return path.read_text().rsplit(")", 1)[1].split()


# Which of a process's CPU times a figure counts: both (the default), or one of them alone.
PARTS = ("all", "user", "system")


def _part(user: str, system: str, part: str) -> int:
    """`part` of a process's CPU ticks, from its user and system fields."""
    return {"all": int(user) + int(system), "user": int(user), "system": int(system)}[part]


def _stat(path: Path, part: str = "all") -> tuple[int, int]:
    """(parent pid, CPU ticks: user + system, or `part` of them) from a /proc `stat` file."""
    fields = _fields(path)
    return int(fields[1]), _part(fields[11], fields[12], part)


def own_ticks(pid: int) -> int:
    """CPU ticks of `pid` alone (all its threads, none of its children's)."""
    return _stat(Path(f"/proc/{pid}/stat"))[1]


def reaped_ticks(pid: int, part: str = "all") -> int:
    """CPU ticks of `pid`'s children that ended and were waited for (cutime + cstime): a load
    generator run as a subprocess per measurement (wrk) is gone by the window's end."""
    try:
        fields = _fields(Path(f"/proc/{pid}/stat"))
    except OSError:
        return 0
    return _part(fields[13], fields[14], part)


def _table(part: str = "all") -> tuple[dict[int, int], dict[int, int]]:
    """pid → parent pid, pid → CPU ticks (user + system, or `part`) of every process now
    alive."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent, spent = _stat(entry / "stat", part)
        except OSError:
            continue  # ended while we looked
        pid = int(entry.name)
        parents[pid], ticks[pid] = parent, spent
    return parents, ticks


def _tree(root: int, parents: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in parents and pid not in found:
            found.add(pid)
            todo.extend(children[pid])
    return found


def process_tree(root: int) -> set[int]:
    """`root` and every process under it, alive now."""
    return _tree(root, _table()[0])


def snapshot(groups: dict[str, int], part: str = "all") -> dict[str, int]:
    """CPU ticks of each named process tree, leaving out the other named trees it holds (the
    load generator's tree holds the service's).
    The `loadgen` group also counts its reaped children (`reaped_ticks`: wrk, which has ended
    by the time the window closes; the service and Neo4j outlive the window, so none of theirs
    is in it). `part`: "user" or "system" counts that CPU time alone. Neo4j's JIT compiler
    threads come and go, so what they spend is read from two `threads` tables, not here."""
    parents, ticks = _table(part)
    trees = {name: _tree(pid, parents) for name, pid in groups.items()}
    out = {}
    for name, members in trees.items():
        others = set().union(*(t for n, t in trees.items() if n != name and t <= members))
        out[name] = sum(ticks[p] for p in members - others)
    if "loadgen" in groups:
        out["loadgen"] += reaped_ticks(groups["loadgen"], part)
    return out


# Neo4j's threads by what they do, by the start of their name (/proc's `comm`, 15 characters);
# any other thread is `other`.
NEO4J_THREADS = {
    "statements": ("neo4j.BoltWorke",),  # the Bolt workers: the statements themselves
    "bolt_io": ("neo4j.BoltNetwo",),
    "page_cache": ("MuninnPageCache",),  # eviction: a page's frame freed for the next fault
    "index_sampling": ("neo4j.IndexSamp",),
    "gc": ("GC Thread", "G1 "),
    "jit": ("C1 Compiler", "C2 Compiler"),
}


@dataclass(frozen=True)
class Threads:
    """A process's threads at one moment: each live thread's name and CPU ticks by its id, and
    the process's own total, which keeps the ticks of threads that have ended since."""
    total: int = 0
    each: Mapping[int, tuple[str, int]] = field(default_factory=dict)

    def since(self, earlier: Threads,
              kinds: Mapping[str, tuple[str, ...]] = NEO4J_THREADS) -> dict[str, int]:
        """CPU ticks each kind of thread (a name → the starts of its threads' names) spent
        since `earlier`, thread by thread: a thread started since counts from nought, and so
        does an id reused under another name. A pool's idle threads end and new ones start,
        so a sum over the threads alive at each end would go below nought; here what threads
        that ended since spent (the process's total less its live threads', its kind unknown)
        is `ended`, and a live thread of no kind is `other`."""
        out = dict.fromkeys(kinds, 0) | {"other": 0, "ended": 0}
        for tid, (comm, ticks) in self.each.items():
            then_comm, then_ticks = earlier.each.get(tid, (comm, 0))
            kind = next((k for k, starts in kinds.items() if comm.startswith(starts)), "other")
            out[kind] += ticks - (then_ticks if then_comm == comm else 0)
        out["ended"] = max(0, self.total - earlier.total - sum(out.values()))
        return out


def threads(pid: int | None) -> Threads:
    """`pid`'s threads now (an empty table when there is no process)."""
    if pid is None:
        return Threads()
    try:
        total = own_ticks(pid)
    except OSError:
        return Threads()
    each = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            each[int(task.name)] = ((task / "comm").read_text().rstrip("\n"),
                                    _stat(task / "stat")[1])
        except OSError:
            continue  # ended while we looked
    return Threads(total, each)


def per_request(before: dict[str, int], after: dict[str, int], requests: int) -> dict:
    """Milliseconds of CPU per request for each group (None when nothing was answered)."""
    if requests <= 0:
        return {name: None for name in after}
    return {name: round((after[name] - before.get(name, 0)) * TICK_MS / requests, 3)
            for name in after}
