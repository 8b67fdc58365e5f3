"""Run by tests/keys/test_concurrency.py in a process of its own (a native crash in the PKCS#11
module must fail that test, not kill pytest): `CALLERS` threads, released together, each wrap a
fresh key under the token's KEK and unwrap it `ROUNDS` times through one key ring, the pool of
`VAULTGRAPH_PKCS11_SESSIONS` sessions shared by all of them. Prints one JSON line: the round
trips made, how many came back different, the errors by type and the pool's size."""

from __future__ import annotations

import collections
import json
import os
import sys
import threading

from vaultgraph.keys.custody import open_custody
from vaultgraph.settings import Settings


def main(callers: int, rounds: int) -> dict:
    custody = open_custody(Settings.from_env())
    ring = custody.ring
    start = threading.Barrier(callers)
    made = collections.Counter()

    def caller(n: int) -> None:
        start.wait()
        for i in range(rounds):
            key = os.urandom(32)
            try:
                blob = ring.wrap(key, tenant_id=f"tenant-{n}", slot=f"dek:d{i}")
                same = ring.unwrap(blob, tenant_id=f"tenant-{n}", slot=f"dek:d{i}") == key
            except Exception as exc:  # counted: the test names what failed
                made[type(exc).__name__] += 1
            else:
                made["round trips"] += 1
                made["different"] += not same

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        custody.close()
    assert custody.token is not None
    return {**made, "sessions": custody.token.size}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))
