"""Java Flight Recorder on Neo4j while a workload runs (BENCH_JFR=1): where the database's own
CPU goes, per side, so a difference between the service and the bare driver that the service's
py-spy profile cannot see (a statement planned again, an extra transaction, an index insert) is
named. JFR ships with the JDK that runs Neo4j: `jcmd` starts a recording, `jfr` prints it."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

# Frames that say what Neo4j was doing, innermost first: the first match in a sample's stack
# names its cost centre (the order matters: planning is reached from the query execution path).
CENTRES = (
    ("planning (cache miss)", ("org.neo4j.cypher.internal.compiler",
                               "org.neo4j.cypher.internal.planner",
                               "org.neo4j.cypher.internal.frontend",
                               "org.neo4j.cypher.internal.ast.")),
    ("query cache / preparation", ("org.neo4j.cypher.internal.QueryCache",
                                   "org.neo4j.cypher.internal.ExecutionEngine",
                                   "org.neo4j.cypher.internal.PreParser")),
    ("indexes: seeks and updates", ("org.neo4j.index.internal.gbptree",
                                    "org.neo4j.kernel.impl.api.index",
                                    "org.neo4j.kernel.api.impl", "org.neo4j.kernel.impl.index")),
    ("commit: log + apply", ("org.neo4j.kernel.impl.transaction.log",
                             "org.neo4j.kernel.impl.api.TransactionCommitProcess",
                             "org.neo4j.internal.recordstorage", "org.neo4j.kernel.impl.api.txid",
                             "org.neo4j.kernel.impl.transaction")),
    ("locks", ("org.neo4j.lock", "org.neo4j.kernel.impl.locking")),
    ("query execution", ("org.neo4j.cypher.internal.runtime", "org.neo4j.codegen",
                         "org.neo4j.cypher.internal.physicalplanning")),
    ("store reads", ("org.neo4j.kernel.impl.newapi", "org.neo4j.io.pagecache",
                     "org.neo4j.storageengine")),
    ("bolt protocol + network", ("org.neo4j.bolt", "io.netty", "org.neo4j.packstream")),
)


def jcmd() -> str | None:
    return shutil.which("jcmd")


def _centre(frames: list[str]) -> str:
    for frame in frames:
        for name, markers in CENTRES:
            if frame.startswith(markers):
                return name
    return "other"


class Recording:
    """One JFR recording of Neo4j for the whole run, copied out once per measured window.

    Started before the JVM warm-up, so what starting it costs Neo4j is paid there: JFR's
    events switched on, Neo4j's JIT compiles again. A recording started and stopped around each
    window paid it inside the window (2026-12-04, detokenize: Neo4j's JIT 2.9 ms a request in
    the first recorded window, 0.001 unrecorded). `period_ms`: JFR's execution sampling period
    (its default settings sample every 20 ms, a few hundred samples a 20 s window here)."""

    NAME = "bench-run"

    def __init__(self, pid: int, period_ms: int) -> None:
        self.pid, self.period_ms = pid, period_ms

    async def start(self) -> bool:
        said = await _jcmd(self.pid, "JFR.start", f"name={self.NAME}", "disk=true",
                           "maxage=60m", f"jdk.ExecutionSample#period={self.period_ms}ms")
        started = "Started recording" in said
        if not started:
            print(f"[bench] JFR did not start: {said[-300:]}", file=sys.stderr)
        return started

    async def dump(self, window: Window) -> bool:
        """The recording over `window`'s span, written to its file. JFR copies whole chunks,
        so it may hold a little more: `summarize` keeps the window's samples alone."""
        out = window.recording
        out.unlink(missing_ok=True)
        said = await _jcmd(self.pid, "JFR.dump", f"name={self.NAME}",
                           f"begin={_instant(window.begin)}", f"end={_instant(window.end)}",
                           f"filename={out}")
        if not out.exists():
            print(f"[bench] JFR dump failed: {said[-300:]}", file=sys.stderr)
            return False
        return True


def _instant(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _jcmd(pid: int, *args: str) -> str:
    """What the JVM answered. jcmd exits 0 whether the command did what it asked or not
    ("No recordings to dump from"): a caller checks the answer, or the file it asked for."""
    binary = jcmd()
    if binary is None:
        return "jcmd not found"
    proc = await asyncio.create_subprocess_exec(
        binary, str(pid), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return out.decode(errors="replace").strip()


@dataclass(frozen=True)
class Window:
    """A measured window's recording and its span."""
    recording: Path
    begin: datetime
    end: datetime


def samples(window: Window) -> list[tuple[str, list[str]]]:
    """The window's execution samples as (thread, frames innermost first)."""
    printed = shutil.which("jfr")
    if printed is None:
        raise RuntimeError("jfr not found")
    out = subprocess.run(  # noqa: S603 - the JDK's own tool on our own file
        [printed, "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample",
         str(window.recording)], capture_output=True, text=True, check=True).stdout
    return within(json.loads(out)["recording"]["events"], window.begin, window.end)


def within(events: list[dict], begin: datetime, end: datetime) -> list[tuple[str, list[str]]]:
    """(thread, frames) of each sample taken from `begin` to `end`, with a stack."""
    kept = []
    for event in events:
        values = event["values"]
        if not begin <= _parse_time(values["startTime"]) <= end:
            continue
        # JFR names a class by its path (org/neo4j/...), a hidden class (a lambda) by its name.
        frames = [f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
                  for f in (values.get("stackTrace") or {}).get("frames", [])]
        if frames:
            kept.append(((values.get("sampledThread") or {}).get("javaName") or "?", frames))
    return kept


def _parse_time(text: str) -> datetime:
    # JFR prints nanoseconds and an offset; Python's parser takes at most microseconds.
    head, sep, rest = text.partition(".")
    if sep:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[:min(digits, 6)] + rest[digits:]
    return datetime.fromisoformat(head + sep + rest)


def summarize(windows: list[Window], top: int = 12) -> dict:
    """Shares of the windows' execution samples by cost centre and by innermost Neo4j method."""
    try:
        taken = [sample for window in windows for sample in samples(window)]
    except RuntimeError as err:
        return {"error": str(err)}
    return tally(taken, top) | {"windows": len(windows)}


def tally(taken: list[tuple[str, list[str]]], top: int = 12) -> dict:
    centres: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for thread, frames in taken:
        threads[thread.rstrip("0123456789-[] ")] += 1
        centres[_centre(frames)] += 1
        neo = next((f for f in frames if f.startswith("org.neo4j") and "$$Lambda" not in f),
                   frames[0])
        methods[neo] += 1
    total = sum(centres.values())

    def share(counter: Counter[str], n: int) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in counter.most_common(n)] if total else []

    return {"samples": total, "by_centre_pct": share(centres, len(CENTRES) + 1),
            "innermost_neo4j_method_pct": share(methods, top),
            "threads_pct": share(threads, 6)}
