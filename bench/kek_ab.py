"""What keeping the key-encryption key in a PKCS#11 token costs (docs/key-custody.md): the same
create/get pair through the real app, once with the `file` provider and once with `pkcs11`
(a SoftHSM2 token this run initialises in a temporary directory, unless VAULTGRAPH_PKCS11_* name
one), each in two phases:

- cold: `tenants` tenants, each with one token, written by one app; a fresh app (empty caches)
  then reads all of them, `concurrency` at a time: every read unwraps a tenant's keys.
- steady: `requests` create-then-get pairs on one warm tenant, `concurrency` at a time: the
  tenant's keys are cached, so the token should cost nothing.

Reported per provider and phase: requests per second, p50 and p99 latency (ms); written to
`bench/results/kek-ab-latest.json` and a dated copy. Needs a Neo4j (the settings' URI):

    .venv/bin/vaultgraph neo4j run -- .venv/bin/python -m bench.kek_ab
    BENCH_KEK_TENANTS=500 BENCH_KEK_REQUESTS=5000 BENCH_KEK_CONCURRENCY=64 ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from vaultgraph.api.typedefs import services_key
from vaultgraph.app import create_app
from vaultgraph.crypto import KeyRing
from vaultgraph.settings import Settings

from .environment import say
from .run import provenance, write_results

SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"


def _softhsm(root: Path) -> dict[str, str]:
    """A throwaway SoftHSM2 token; the settings that name it."""
    tokens = root / "tokens"
    tokens.mkdir()
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n"
                    "log.level = ERROR\n")
    os.environ["SOFTHSM2_CONF"] = str(conf)  # before this process loads the module
    pin = secrets.token_hex(4)
    util = shutil.which("softhsm2-util")
    if util is None:
        raise SystemExit("[bench] SoftHSM2 is not installed (apt-get install softhsm2)")
    subprocess.run([util, "--init-token", "--free", "--label", "bench",  # noqa: S603 - our own
                    "--so-pin", secrets.token_hex(4), "--pin", pin], check=True,
                   capture_output=True, timeout=60)
    pin_file = root / "pin"
    pin_file.write_text(pin + "\n")
    return {"pkcs11_module": SOFTHSM, "pkcs11_token_label": "bench",
            "pkcs11_pin_file": str(pin_file)}


def _latencies(samples: list[float], seconds: float) -> dict:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"requests": len(samples), "rps": round(len(samples) / seconds, 1),
            "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p99_ms": round(p99 * 1000, 2)}


async def _client(settings: Settings) -> TestClient:
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    return client


async def _timed(requests, concurrency: int) -> dict:
    """Run the awaitable factories `requests`, `concurrency` at a time; their latencies."""
    todo = iter(requests)
    samples: list[float] = []

    async def lane() -> None:
        for make in todo:
            began = time.perf_counter()
            status = await make()
            samples.append(time.perf_counter() - began)
            if status >= 300:
                raise RuntimeError(f"unexpected status {status}")

    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return _latencies(samples, time.perf_counter() - began)


async def measure(settings: Settings, tenants: int, requests: int, concurrency: int) -> dict:
    writer = await _client(settings)
    try:
        made = []
        for n in range(tenants):
            tenant = await writer.server.app[services_key].tenants.create(f"bench {n}")
            resp = await writer.post("/tokens", json={"type": "token", "data": {"n": n}},
                                     headers={"SVC-API-KEY": tenant.key})
            made.append((tenant.key, (await resp.json())["id"]))
    finally:
        await writer.close()
    reader = await _client(settings)  # empty caches: every first read unwraps

    def get(key: str, token_id: str):
        async def go() -> int:
            async with reader.get(f"/tokens/{token_id}", headers={"SVC-API-KEY": key}) as r:
                await r.read()
                return r.status
        return go

    try:
        cold = await _timed([get(k, t) for k, t in made], concurrency)
        key = made[0][0]

        def pair(n: int):
            async def go() -> int:
                async with reader.post("/tokens", json={"type": "token", "data": {"n": n}},
                                       headers={"SVC-API-KEY": key}) as r:
                    token_id = (await r.json())["id"]
                return await get(key, token_id)()
            return go

        steady = await _timed([pair(n) for n in range(requests)], concurrency)
    finally:
        await reader.close()
    return {"cold_get": cold, "steady_create_get": steady}


async def run(tenants: int, requests: int, concurrency: int) -> dict:
    base = Settings.from_env()
    # The benchmark measures custody, not the limits: one address, many first authentications.
    base = dataclasses.replace(base, rate_limit=1e6, rate_burst=1_000_000,
                               auth_failure_limit=1_000_000, log_level="WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        token = ({} if base.pkcs11_module else _softhsm(Path(tmp)))
        file_settings = dataclasses.replace(base, kek_provider="file",
                                            kek=f"b{secrets.token_hex(4)}:"
                                                + KeyRing.generate_spec().partition(":")[2])
        hsm_settings = dataclasses.replace(base, kek_provider="pkcs11", kek="",
                                           kek_file=str(Path(tmp) / "none"),
                                           pkcs11_key_label=f"bench-{secrets.token_hex(4)}",
                                           **token)
        results = {}
        for name, settings in (("file", file_settings), ("pkcs11", hsm_settings)):
            say(f"{name}: {tenants} cold tenants, {requests} create/get pairs, "
                f"{concurrency} at a time")
            results[name] = await measure(settings, tenants, requests, concurrency)
    return results


def main() -> int:
    tenants = int(os.environ.get("BENCH_KEK_TENANTS", "200"))
    requests = int(os.environ.get("BENCH_KEK_REQUESTS", "2000"))
    concurrency = int(os.environ.get("BENCH_KEK_CONCURRENCY", "32"))
    results = asyncio.run(run(tenants, requests, concurrency))
    out = {**provenance(), "tenants": tenants, "requests": requests, "concurrency": concurrency,
           "results": results}
    latest = write_results(out, "kek-ab-")
    for provider, phases in results.items():
        for phase, numbers in phases.items():
            say(f"{provider:7} {phase:18} {numbers['rps']:>9} req/s  p50 "
                f"{numbers['p50_ms']} ms  p99 {numbers['p99_ms']} ms")
    say(f"written to {latest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
