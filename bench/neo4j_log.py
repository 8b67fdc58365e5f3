"""What Neo4j did in the background during a measured window, read from its `debug.log`:
checkpoints (each writes the page cache's dirty pages to the store files; Neo4j Community has
no IO limit for them, so one runs at full speed and takes CPU and disk from every request
while it lasts) and cached plans discarded because statistics moved (each discard replans a
statement). A 15-second window holding either shows it in its p99; the result says so, instead
of leaving a tail unexplained."""

from __future__ import annotations

import re
from pathlib import Path

_CHECKPOINT_DONE = re.compile(
    r'Checkpoint triggered by "(?P<why>[^"]*)".*? checkpoint completed in (?P<took>[^.]+)\. '
    r"Checkpoint flushed (?P<pages>\d+) pages")
_CHECKPOINT_STARTED = "checkpoint started..."
_DISCARDED = "Discarded stale query from the query cache"
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_PART = re.compile(r"(\d+)(ms|s|m|h)\b")


def duration_ms(text: str) -> int:
    """Neo4j's way of writing a duration ("3s 113ms", "50ms", "1m 2s") in milliseconds."""
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(text))


class DebugLog:
    """Neo4j's `debug.log`, read from a mark: what it logged since, for one database."""

    def __init__(self, path: Path, database: str = "neo4j"):
        self.path = path
        self.tag = f"[{database}/"

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, offset: int) -> dict:
        """Checkpoints completed, checkpoints still running, and plans discarded since `offset`
        (a `mark()`): {"checkpoints": [{"reason", "ms", "pages"}], "checkpoint_running": bool,
        "plans_discarded": int}."""
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        return summarize(text.splitlines(), self.tag)


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
