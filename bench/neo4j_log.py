"""What Neo4j did in the background during a measured window, read from its `debug.log`:
checkpoints (each writes the page cache's dirty pages to the store files; Neo4j Community has
no IO limit for them, so one runs at full speed and takes CPU and disk from every request
while it lasts) and cached plans discarded because statistics moved (each discard replans a
statement). A 15-second window holding either shows it in its p99; the result says so, instead
of leaving a tail unexplained. And from its JVM's `gc.log` (`vaultgraph/neo4j_local.py`): each
time the JVM stopped all its threads (a safepoint: a collection, or other VM work), and for how
long — every request in the database waits through one."""

from __future__ import annotations

import re
from pathlib import Path

_CHECKPOINT_DONE = re.compile(
    r'Checkpoint triggered by "(?P<why>[^"]*)".*? checkpoint completed in (?P<took>[^.]+)\. '
    r"Checkpoint flushed (?P<pages>\d+) pages")
_CHECKPOINT_STARTED = "checkpoint started..."
_DISCARDED = "Discarded stale query from the query cache"
_SAFEPOINT = re.compile(r'\[safepoint\s*\] Safepoint "(?P<kind>[^"]+)".*?Total: (?P<ns>\d+) ns')
NOTABLE_JVM_STOP_MS = 50  # a JVM stop this long is named in the report
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_PART = re.compile(r"(\d+)(ms|s|m|h)\b")


def duration_ms(text: str) -> int:
    """Neo4j's way of writing a duration ("3s 113ms", "50ms", "1m 2s") in milliseconds."""
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(text))


class LogTail:
    """A log file read from a mark: the lines written since."""

    def __init__(self, path: Path):
        self.path = path

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def lines_since(self, offset: int) -> list[str]:
        try:
            with self.path.open("rb") as f:
                if f.seek(0, 2) < offset:
                    offset = 0  # the log rotated within the window: read what is there
                f.seek(offset)
                return f.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            return []


class DebugLog(LogTail):
    """Neo4j's `debug.log`: what it logged since a mark, for one database."""

    def __init__(self, path: Path, database: str = "neo4j"):
        super().__init__(path)
        self.tag = f"[{database}/"

    def since(self, offset: int) -> dict:
        """Checkpoints completed, checkpoints still running, and plans discarded since `offset`
        (a `mark()`): {"checkpoints": [{"reason", "ms", "pages"}], "checkpoint_running": bool,
        "plans_discarded": int}."""
        return summarize(self.lines_since(offset), self.tag)


class PauseLog(LogTail):
    """Neo4j's `gc.log`: every time its JVM stopped all threads since a mark."""

    def since(self, offset: int) -> dict:
        return jvm_stops(self.lines_since(offset))


def summarize(lines: list[str], tag: str) -> dict:
    checkpoints, running, discarded = [], False, 0
    for line in lines:
        if tag not in line:
            continue  # another database's (system's) line, or a continuation line
        if _DISCARDED in line:
            discarded += 1
        elif _CHECKPOINT_STARTED in line:
            running = True
        elif m := _CHECKPOINT_DONE.search(line):
            # One that began before the window and ended in it counts: it ran in the window.
            running = False
            checkpoints.append({"reason": m["why"], "ms": duration_ms(m["took"]),
                                "pages": int(m["pages"])})
    return {"checkpoints": checkpoints, "checkpoint_running": running,
            "plans_discarded": discarded}


def describe(events: dict | None) -> str:
    """One phrase for the report: "checkpoint 3.1 s (67,789 pages), 2 plans discarded"."""
    if not events:
        return ""
    parts = [f"checkpoint {c['ms'] / 1000:.1f} s ({c['pages']:,} pages)"
             for c in events.get("checkpoints", [])]
    if events.get("checkpoint_running"):
        parts.append("a checkpoint still running at the end")
    if n := events.get("plans_discarded"):
        parts.append(f"{n} cached plan{'s' if n != 1 else ''} discarded")
    return ", ".join(parts)


def jvm_stops(lines: list[str]) -> dict:
    """{"jvm_stops", "jvm_stopped_ms", "jvm_longest_ms", "jvm_longest"} of safepoint lines."""
    count, total_ns, longest_ns, longest = 0, 0, 0, None
    for line in lines:
        if m := _SAFEPOINT.search(line):
            ns = int(m["ns"])
            count, total_ns = count + 1, total_ns + ns
            if ns > longest_ns:
                longest_ns, longest = ns, m["kind"]
    return {"jvm_stops": count, "jvm_stopped_ms": round(total_ns / 1e6, 1),
            "jvm_longest_ms": round(longest_ns / 1e6, 1), "jvm_longest": longest}


def describe_jvm(events: dict | None) -> str:
    """"the JVM stopped all threads for 68.4 ms (G1PauseRemark; 17 stops, 308.4 ms in all)", when
    its longest stop in the window was notable (else "")."""
    if not events or (events.get("jvm_longest_ms") or 0) < NOTABLE_JVM_STOP_MS:
        return ""
    return (f"the JVM stopped all threads for {events['jvm_longest_ms']:g} ms "
            f"({events['jvm_longest']}; {events['jvm_stops']} stops, "
            f"{events['jvm_stopped_ms']:g} ms in all)")
