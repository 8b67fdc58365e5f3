"""What one range index entry costs on disk, by the form of its key (docs/adr/0026): a UUID
as text, as a 16-byte array, as two 64-bit integers in one array or in two properties, as one
integer; and a time as a zoned DateTime or as an integer. Writes `BENCH_KEYS_ENTRIES` nodes
per form in time order, one tenant-like value shared by all (as the audit trail's indexes
receive them), into a fresh Neo4j of its own, stops it (a clean stop checkpoints) and divides
each index's size by the number of entries.

    BENCH_KEYS_ENTRIES=30000 .venv/bin/python -m bench.audit_index_keys
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import UTC, datetime, timedelta

import neo4j

from .audit_storage import _size, fresh_neo4j

# form: (the index's properties, the value of `t` or None)
FORMS = {
    "uuid_text_and_datetime": ("e.t, e.at", "text"),
    "bytes16_and_datetime": ("e.t, e.at", "bytes"),
    "long_array2_and_datetime": ("e.t, e.at", "longs"),
    "two_longs_and_datetime": ("e.h, e.l, e.at", None),
    "one_long_and_datetime": ("e.h, e.at", None),
    "one_long_and_long_time": ("e.h, e.atl", None),
    "datetime_alone": ("e.at", None),
    "long_time_alone": ("e.atl", None),
}


async def _write(neo, entries: int) -> dict[str, str]:
    driver = neo4j.AsyncGraphDatabase.driver(neo.uri, auth=("neo4j", neo.resolve_password()))
    try:
        for n, (props, _) in enumerate(FORMS.values()):
            await driver.execute_query(f"CREATE INDEX form_{n} FOR (e:Form{n}) ON ({props})")
        u = uuid.uuid4()
        hi = int.from_bytes(u.bytes[:8], "big", signed=True)
        lo = int.from_bytes(u.bytes[8:], "big", signed=True)
        values = {"text": str(u), "bytes": u.bytes, "longs": [hi, lo], None: None}
        start = datetime.now(UTC)
        for first in range(0, entries, 1000):
            rows = [{"at": (at := start + timedelta(microseconds=37 * i)),
                     "atl": int(at.timestamp() * 1_000_000)}
                    for i in range(first, min(first + 1000, entries))]
            for n, (_, kind) in enumerate(FORMS.values()):
                await driver.execute_query(
                    f"UNWIND $rows AS r CREATE (e:Form{n}) "
                    "SET e.at = r.at, e.atl = r.atl, e.t = $t, e.h = $hi, e.l = $lo",
                    rows=rows, t=values[kind], hi=hi, lo=lo)
        records, _, _ = await driver.execute_query("SHOW INDEXES YIELD id, name")
        return {str(r["id"]): r["name"] for r in records}
    finally:
        await driver.close()


def main() -> int:
    entries = int(os.environ.get("BENCH_KEYS_ENTRIES", "30000"))
    with fresh_neo4j("audit-index-keys", heap="512m", pagecache="256m") as neo:
        neo.start()
        ids = asyncio.run(_write(neo, entries))
        neo.stop()
        root = neo.home / "data" / "databases" / "neo4j" / "schema" / "index"
        sizes = {ids.get(d.name): _size(d) for d in root.glob("*/*") if d.is_dir()}
    names = list(FORMS)
    result = {names[int(name.split("_")[1])]: round(size / entries, 1)
              for name, size in sorted(sizes.items(), key=lambda kv: str(kv[0]))
              if name and name.startswith("form_")}
    print(json.dumps({"entries": entries, "bytes_per_entry": result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
