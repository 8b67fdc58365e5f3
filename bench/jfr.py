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
    ("commit: index updates", ("org.neo4j.kernel.impl.api.index", "org.neo4j.kernel.api.impl",
                               "org.neo4j.kernel.impl.index")),
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


async def record(pid: int, seconds: float, out: Path) -> Path | None:
    """A JFR recording of `pid` for `seconds`, written to `out` (JFR's default settings: low
    overhead, a sample per thread every 20 ms)."""
    binary = jcmd()
    if binary is None:
        print("[bench] jcmd not found: no JFR recording", file=sys.stderr)
        return None
    name = f"bench-{out.stem}"
    start = await asyncio.create_subprocess_exec(
        binary, str(pid), "JFR.start", f"name={name}",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    await start.communicate()
    await asyncio.sleep(seconds)
    stop = await asyncio.create_subprocess_exec(
        binary, str(pid), "JFR.stop", f"name={name}", f"filename={out}",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await stop.communicate()
    if stop.returncode != 0 or not out.exists():  # noqa: ASYNC240 - once, after jcmd
        # (JFR.stop overwrites an earlier recording of the same name)
        print(f"[bench] JFR failed: {err.decode(errors='replace')[-300:]}", file=sys.stderr)
        return None
    return out


def summarize(recording: Path, top: int = 12) -> dict:
    """Shares of execution samples by cost centre and by innermost Neo4j method."""
    printed = shutil.which("jfr")
    if printed is None:
        return {"error": "jfr not found"}
    out = subprocess.run(  # noqa: S603 - the JDK's own tool on our own file
        [printed, "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample",
         str(recording)], capture_output=True, text=True, check=True).stdout
    events = json.loads(out)["recording"]["events"]
    centres: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for event in events:
        values = event["values"]
        frames = [f"{f['method']['type']['name']}.{f['method']['name']}"
                  for f in (values.get("stackTrace") or {}).get("frames", [])]
        if not frames:
            continue
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
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
