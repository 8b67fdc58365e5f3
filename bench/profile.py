"""py-spy on the service process while a workload runs; a summary of where the time goes."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import sys
from collections import Counter
from pathlib import Path


def py_spy() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


async def record(pid: int, seconds: float, out: Path) -> Path | None:
    """Collapsed stacks (one `frame;frame;... count` a line) of `pid` and its child processes
    (the workers, when the service runs several) for `seconds`."""
    binary = py_spy()
    if binary is None:
        return None
    proc = await asyncio.create_subprocess_exec(
        binary, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
        "--rate", "250", "--format", "raw", "--nonblocking", "--subprocesses",
        "--output", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0 or not out.exists():  # noqa: ASYNC240 - once, after py-spy
        print(f"[bench] py-spy failed: {err.decode(errors='replace')[-500:]}", file=sys.stderr)
        return None
    return out


def compress(collapsed: Path) -> Path:
    """`collapsed` gzipped beside itself (a tenth of the size), the plain file removed."""
    kept = collapsed.with_name(collapsed.name + ".gz")
    with collapsed.open("rb") as plain, gzip.open(kept, "wb", compresslevel=9) as packed:
        shutil.copyfileobj(plain, packed)
    collapsed.unlink()
    return kept


def _frame_name(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)": keep function and file.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3", "/work/main/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where})"


# Where a sample's innermost frame sits, by file path: the cost centres worth reporting.
CATEGORIES = (
    ("neo4j driver", ("neo4j/",)),
    ("logging", ("logging/", "vaultgraph/logs.py")),
    ("liquid templates", ("liquid/",)),
    ("marshmallow", ("marshmallow/",)),
    ("crypto", ("cryptography/", "vaultgraph/crypto.py", "hmac.py", "hashlib")),
    ("aiohttp", ("aiohttp/", "multidict/", "yarl/")),
    ("socket I/O + event loop", ("asyncio/", "selectors.py")),
    ("vaultgraph", ("vaultgraph/",)),
)


def category(frame: str) -> str:
    for name, markers in CATEGORIES:
        if any(m in frame for m in markers):
            return name
    return "other"


def summarize(collapsed: Path, top: int = 15) -> dict:
    """Inclusive and self shares of samples per function (a frame counts once per stack)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_name(f) for f in stack.split(";")
                  if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        for f in set(frames):
            inclusive[f] += n
        own[frames[-1]] += n
        by_category[category(frames[-1])] += n

    def share(counter: Counter[str], n: int = top) -> list[tuple[str, float]]:
        return [(name, round(100 * c / total, 1)) for name, c in counter.most_common(n)]

    app = Counter({f: c for f, c in inclusive.items()
                   if "vaultgraph/" in f and "vaultgraph/cli/" not in f and "<module>" not in f})
    return {"samples": total, "self_by_category_pct": share(by_category),
            "vaultgraph_inclusive_pct": share(app, 25),
            "inclusive_pct": share(inclusive), "self_pct": share(own)}
