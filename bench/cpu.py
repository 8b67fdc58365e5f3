"""CPU time per request, per process group (the service and its workers, Neo4j, the load
generator), read from /proc over a measured window: a figure a busy machine skews far less
than requests per second."""

from __future__ import annotations

import os
from collections import defaultdict
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
    load generator's tree holds the service's); `neo4j_jit`: of Neo4j's, its JIT compiler's.
    The `loadgen` group also counts its reaped children (`reaped_ticks`: wrk, which has ended
    by the time the window closes; the service and Neo4j outlive the window, so none of theirs
    is in it). `part`: "user" or "system" counts that CPU time alone."""
    parents, ticks = _table(part)
    trees = {name: _tree(pid, parents) for name, pid in groups.items()}
    out = {}
    if "neo4j" in groups:
        out["neo4j_jit"] = jit_ticks(groups["neo4j"], part)
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


def thread_ticks(pid: int | None, kinds: dict[str, tuple[str, ...]] = NEO4J_THREADS,
                 part: str = "all") -> dict[str, int]:
    """CPU ticks of a process's threads, summed by `kinds` (a name → the starts of its threads'
    names); the rest under `other` (no `other` when `kinds` is not the whole of Neo4j's)."""
    total = dict.fromkeys(kinds, 0)
    if kinds is NEO4J_THREADS:
        total["other"] = 0
    if pid is None:
        return total
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            comm = (task / "comm").read_text()
            kind = next((k for k, starts in kinds.items() if comm.startswith(starts)),
                        "other")
            if kind in total:
                total[kind] += _stat(task / "stat", part)[1]
        except OSError:
            continue
    return total


def jit_ticks(pid: int | None, part: str = "all") -> int:
    """CPU ticks a JVM's just-in-time compiler threads have spent (Neo4j warming up)."""
    return thread_ticks(pid, {"jit": NEO4J_THREADS["jit"]}, part)["jit"]


def per_request(before: dict[str, int], after: dict[str, int], requests: int) -> dict:
    """Milliseconds of CPU per request for each group (None when nothing was answered)."""
    if requests <= 0:
        return {name: None for name in after}
    return {name: round((after[name] - before.get(name, 0)) * TICK_MS / requests, 3)
            for name in after}
