"""py-spy on the service process while a workload runs; a summary of where the time goes."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

RATE = 250  # samples a second


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
        "--rate", str(RATE), "--format", "raw", "--nonblocking", "--subprocesses",
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
    ("logging", ("logging/", "vaultgraph/logging_setup.py")),
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


def _stacks(collapsed: Path) -> Iterator[tuple[list[str], int]]:
    """Each stack of `collapsed` (its frames outermost first, without the process and thread
    lines) and how many samples it took."""
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame_name(f) for f in stack.split(";")
                  if f and not f.startswith(("process ", "thread "))]
        if frames:
            yield frames, int(count)


def summarize(collapsed: Path, top: int = 15) -> dict:
    """Inclusive and self shares of samples per function (a frame counts once per stack)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    total = 0
    for frames, n in _stacks(collapsed):
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


def cpu_per_request(collapsed: Path, cpu_ms: float) -> dict[str, dict[str, float]]:
    """`cpu_ms`, the CPU a request cost the sampled process as the kernel counts it, split by
    category and by function (its innermost frame) in the shares of `collapsed`'s samples.
    The samples alone overstate it on a busy machine: py-spy counts a thread waiting on the
    run queue as running."""
    by_category: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for frames, n in _stacks(collapsed):
        by_category[category(frames[-1])] += n
        own[frames[-1]] += n
    per = cpu_ms / max(sum(by_category.values()), 1)
    return {"category": {k: v * per for k, v in by_category.items()},
            "function": {k: v * per for k, v in own.items()}}


def difference(service: dict[str, dict[str, float]], bare: dict[str, dict[str, float]],
               top: int = 20) -> dict:
    """What a request costs the service's process and not the bare client's (negative: the
    other way), in milliseconds, by category (all) and by function (the `top` largest either
    way), each side's total beside them."""
    def apart(kind: str, n: int | None) -> list[tuple[str, float]]:
        names = set(service[kind]) | set(bare[kind])
        diff = {k: service[kind].get(k, 0.0) - bare[kind].get(k, 0.0) for k in names}
        ranked = sorted(diff.items(), key=lambda kv: -abs(kv[1]))
        return [(k, round(v, 3)) for k, v in ranked[:n]]

    return {"service_ms": round(sum(service["category"].values()), 3),
            "bare_ms": round(sum(bare["category"].values()), 3),
            "by_category_ms": apart("category", None), "by_function_ms": apart("function", top)}
