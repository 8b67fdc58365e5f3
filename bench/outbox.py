"""The webhook_create workload's outbox: its webhooks, the bare side's deliveries, and what
each side left undelivered.

The bare side delivers as a plain client of the outbox would, with the catalog statements the
service's sender runs (`webhooks/claim`, `webhooks/complete`, through `WebhookRepository` over
the bare driver, as the other bare workloads use the token repositories) and the same
settings (`VAULTGRAPH_WEBHOOK_*`, read from the environment the service gets): a claim takes
the due deliveries a healthy endpoint may hold (at most `webhook_max_in_flight`, of one webhook
its lanes times lease ÷ timeout), posts each with the same body and Standard Webhooks headers
(`vaultgraph.webhooks.payload` and `headers`, the secret decrypted with the tenant's key) on
`webhook_endpoint_concurrency` lanes, and records the outcomes in one statement. Two such
passes run at once, each with half the share and half the lanes, so claims and records
overlap the posts (as the sender claims again once half its share is sent) within the same
bounds. A pass claims again at once while claims find work, after a create (as the service's
sender is woken by its process's writes), or every `webhook_poll_interval` seconds. The
product's sender class is not run: the service side is where it is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import aiohttp

from vaultgraph.repository.webhooks import Claimed, WebhookRepository
from vaultgraph.services.webhooks import SECRET_FIELD
from vaultgraph.settings import Settings
from vaultgraph.webhooks import TOKEN_CREATED, headers, new_secret, payload

PASSES = 2  # delivery passes under way at once
ANSWER_KEPT = 1024  # bytes of an endpoint's answer kept with the attempt, as the sender keeps

# Deliveries of a webhook by state (the webhook_delivery_key index seeks on its prefix).
STATES = ("MATCH (d:WebhookDelivery {webhook_id: $id}) WHERE d.event_id IS NOT NULL "
          "RETURN d.state AS state, count(*) AS n")
# A webhook's pending deliveries, read within a measured window: sought among the pending ones
# only (webhook_delivery_due), so each reading costs what is pending, not what was delivered.
PENDING = ("MATCH (d:WebhookDelivery) USING INDEX d:WebhookDelivery(state, next_at) "
           "WHERE d.state = 'pending' AND d.next_at IS NOT NULL AND d.webhook_id = $id "
           "RETURN count(d) AS n")


def healthy_share(settings: Settings) -> int:
    """What a claim may take of one webhook whose last attempt succeeded: its lanes times the
    attempts that fit in a lease if each took the whole timeout (the sender's rule, from the
    same settings), at most what a process holds."""
    lease, timeout = settings.webhook_lease, settings.webhook_timeout
    margin = min(1.0, max(0.0, lease - timeout) / 2)
    depth = max(1, int((lease - margin) // timeout)) if timeout > 0 else 1
    return min(max(1, settings.webhook_max_in_flight),
               max(1, settings.webhook_endpoint_concurrency) * depth)


class BareDeliveries:
    """The bare side's delivery loop (see the module's docstring); `delivered` and `failed`
    count its attempts' outcomes."""

    def __init__(self, repo: WebhookRepository, keys: Any, session: aiohttp.ClientSession,
                 settings: Settings):
        self.repo = repo
        self.keys = keys  # the tenant's TenantKeys: the bare client holds them unwrapped
        self.session = session
        # Per pass (PASSES at once): half of what one process may hold and send.
        self.limit = max(1, settings.webhook_max_in_flight // PASSES)
        self.share = max(1, healthy_share(settings) // PASSES)
        self.lanes = max(1, settings.webhook_endpoint_concurrency // PASSES)
        self.lease = settings.webhook_lease
        self.timeout = aiohttp.ClientTimeout(total=settings.webhook_timeout)
        self.interval = settings.webhook_poll_interval or 0.5
        self.schedule = settings.webhook_retry_schedule_seconds
        self.disable_after = settings.webhook_disable_after
        self.delivered = 0
        self.failed = 0
        self.errors = 0  # passes that failed (Neo4j, say): tried again at the next wake
        self.first_error: str | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    def wake(self) -> None:
        """A create committed: its event may be due."""
        self._wake.set()

    def start(self) -> BareDeliveries:
        self._stopping.clear()
        self._tasks = [asyncio.create_task(self.run(), name=f"bare-deliveries-{n}")
                       for n in range(PASSES)]
        return self

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        await asyncio.gather(*self._tasks)
        self._tasks = []

    async def run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                if await self.pass_once():
                    continue
            except Exception as exc:  # counted and reported; its claims lapse, then are sent
                self.errors += 1
                self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:200]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    async def pass_once(self) -> int:
        """One claim, its posts and their outcomes recorded; how many it claimed."""
        claim = uuid.uuid4().hex
        claimed = await self.repo.claim(limit=self.limit, lease=self.lease, claim=claim,
                                        room={}, room_default=self.share)
        if not claimed:
            return 0
        outcomes: list[dict] = [{}] * len(claimed)
        todo = iter(enumerate(claimed))

        async def lane() -> None:
            for n, item in todo:
                outcomes[n] = await self.send(item, claim)

        await asyncio.gather(*(lane() for _ in range(min(self.lanes, len(claimed)))))
        await self.repo.complete(outcomes, disable_after=self.disable_after)
        return len(claimed)

    async def send(self, item: Claimed, claim: str) -> dict:
        """One attempt: its outcome, as `webhooks/complete` records it."""
        delivery, webhook = item.delivery, item.webhook
        secrets = [self.keys.decrypt(webhook["secret_ct"], token_id=webhook["id"],
                                     field=SECRET_FIELD).decode()]
        if webhook.get("previous_signs") and webhook.get("previous_secret_ct"):
            secrets.append(self.keys.decrypt(webhook["previous_secret_ct"],
                                             token_id=webhook["id"],
                                             field=SECRET_FIELD).decode())
        body = payload(delivery)
        started = time.perf_counter()
        status, error, response = None, None, None
        try:
            async with self.session.post(
                    webhook["url"], data=body, timeout=self.timeout,
                    headers=headers(secrets, delivery["event_id"], int(time.time()), body),
                    allow_redirects=False) as resp:
                status = resp.status
                response = (await resp.content.read(ANSWER_KEPT)).decode(
                    "utf-8", errors="replace")
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = type(exc).__name__
        success = status is not None and 200 <= status < 300
        attempt = int(delivery.get("attempts") or 0) + 1
        if success:
            self.delivered += 1
        else:
            self.failed += 1
        return {"webhook_id": webhook["id"], "event_id": delivery["event_id"], "claim": claim,
                "success": success,
                "outcome": "success" if success else "status" if status else "error",
                "status": status, "error": error,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "response": response,
                "retry_in": None if success or attempt > len(self.schedule)
                else self.schedule[attempt - 1]}


async def subscribe(repo: WebhookRepository, tenant_id: str, keys: Any, url: str,
                    name: str) -> tuple[str, str]:
    """A new enabled webhook of the tenant for token.created on every container, to `url`:
    (its id, its secret), its secret stored encrypted as the service stores it."""
    webhook_id, secret = str(uuid.uuid4()), new_secret()
    created = await repo.create(
        tenant_id=tenant_id, id=webhook_id, url=url, events=[TOKEN_CREATED], containers=["/"],
        description=f"bench: {name}", actor=None,
        secret_ct=keys.encrypt(secret.encode(), token_id=webhook_id, field=SECRET_FIELD))
    if created is None:
        raise LookupError("the bench tenant does not exist")
    return webhook_id, secret


async def unsubscribe(repo: WebhookRepository, tenant_id: str, webhook_id: str) -> None:
    """The webhook disabled: later creates write no delivery for it."""
    await repo.update(tenant_id=tenant_id, id=webhook_id, changes={"status": "disabled"},
                      actor=None)


async def states(driver, database: str, webhook_id: str) -> dict[str, int]:
    """The webhook's deliveries by state (pending, delivered, failed, paused)."""
    records, _, _ = await driver.execute_query(STATES, id=webhook_id, database_=database)
    return {r["state"]: r["n"] for r in records}


async def pending(driver, database: str, webhook_id: str) -> int:
    """The webhook's deliveries not yet sent, or sent and not yet recorded."""
    records, _, _ = await driver.execute_query(PENDING, id=webhook_id, database_=database)
    return records[0]["n"]


async def drain(driver, database: str, webhook_id: str, within: float) -> tuple[float, int]:
    """Wait until none of the webhook's deliveries is pending, at most `within` seconds:
    (seconds waited, pending at the end)."""
    began = time.monotonic()
    while True:
        left = await pending(driver, database, webhook_id)
        if left == 0 or time.monotonic() - began > within:
            return round(time.monotonic() - began, 1), left
        await asyncio.sleep(0.2)
