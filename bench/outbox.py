"""The webhook_create workload's outbox: its webhooks, the bare side's deliveries, and what
each side left undelivered.

The bare side delivers as a plain client of the outbox would, built the way the service's
sender is (vaultgraph/services/webhook_sender.py; its class is not run: the service side is
where it is measured), with its catalog statements (`webhooks/claim`, `webhooks/complete`,
through `WebhookRepository` over the bare driver, as the other bare workloads use the token
repositories) and its settings (`VAULTGRAPH_WEBHOOK_*`, read from the environment the service
gets, for one process):

- one claimer: a claim takes at most what the process may still hold (`webhook_max_in_flight`
  less what it holds, so the statement scans ten times that, as the sender's does), of a
  webhook at most its share less what it holds (`webhook_sender.Shares`: its lanes,
  `webhook_endpoint_concurrency`, until an attempt succeeds; then paced by its slowest attempt
  lately, between lanes times the timeouts that fit in the lease and half what the process
  may hold); a webhook
  at its share is skipped;
- per webhook a queue of claimed deliveries served by that many lanes, each POST with the
  same body and Standard Webhooks headers (`vaultgraph.webhooks`), the secret decrypted with
  the tenant's key; an attempt's outcome is named as the sender names it (`success`, `status`,
  `redirect`, `timeout`, `unreachable`, `error`), whatever went wrong;
- one recorder: the outcomes of the attempts that ended, recorded in one statement while
  others go on (those ending meanwhile go in the next);
- the claimer runs after a create (as the sender is woken by its process's writes for a
  tenant it has delivered for lately), when a webhook whose last claim took all it was
  offered has half its share left, when the recorder brings what the process holds to half
  its bound after a claim that took all the room, and otherwise every
  `webhook_poll_interval` seconds; wakes during a claim make one more.

`counts()` gives the claims (and how many found nothing) and the outcome statements run, so a
window's statements a delivery can be set beside the service's transactions a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from vaultgraph.crypto import CryptoError
from vaultgraph.repository.webhooks import Claimed, WebhookRepository
from vaultgraph.services.webhook_sender import (
    ANSWER_KEPT,
    IDLE_FORGET,
    MAX_BACKOFF,
    RECORD_BATCH,
    Shares,
    lease_margin,
    more_due,
    retry_in,
    slowest_lately,
)
from vaultgraph.services.webhooks import SECRET_FIELD
from vaultgraph.settings import Settings
from vaultgraph.webhooks import TOKEN_CREATED, headers, new_secret, payload

DRAIN_POLL = (0.1, 1.0)  # a drain's first wait between readings, doubled up to the second

# Deliveries of a webhook by state (the webhook_delivery_key index seeks on its prefix).
STATES = ("MATCH (d:WebhookDelivery {webhook_id: $id}) WHERE d.event_id IS NOT NULL "
          "RETURN d.state AS state, count(*) AS n")
# A webhook's attempts' durations (the POST, from its start to the answer's end: an event loop
# running late shows in it), read after a window (the webhook_attempt index seeks on its prefix).
ATTEMPTS = ("MATCH (a:WebhookAttempt {webhook_id: $id}) WHERE a.at IS NOT NULL "
            "RETURN count(a) AS n, percentileCont(a.duration_ms, 0.5) AS p50, "
            "percentileCont(a.duration_ms, 0.99) AS p99")
# A webhook's pending deliveries, read within a measured window: sought among the pending ones
# only (webhook_delivery_due), so each reading costs what is pending, not what was delivered.
PENDING = ("MATCH (d:WebhookDelivery) USING INDEX d:WebhookDelivery(state, next_at) "
           "WHERE d.state = 'pending' AND d.next_at IS NOT NULL AND d.webhook_id = $id "
           "RETURN count(d) AS n")


def shares(settings: Settings) -> Shares:
    """What a claim may take of one webhook: the sender's rule (`webhook_sender.Shares`), from
    the same settings."""
    return Shares.of(
        max(1, settings.webhook_max_in_flight), max(1, settings.webhook_endpoint_concurrency),
        settings.webhook_lease, settings.webhook_timeout)


@dataclass(slots=True)
class _Held:
    item: Claimed
    claim: str
    deadline: float  # loop time by which its attempt must have ended


@dataclass(slots=True)
class _Endpoint:
    queue: deque[_Held] = field(default_factory=deque)  # claimed, not started
    sending: int = 0
    healthy: bool = False  # its last attempt succeeded
    slowest: float = 0.0  # seconds, its slowest attempt lately
    refill: bool = False  # a claim took all it was offered: claim again once half is sent
    used: float = 0.0

    @property
    def held(self) -> int:
        return len(self.queue) + self.sending


class BareDeliveries:
    """The bare side's delivery loop (see the module's docstring); `delivered` and `failed`
    count its attempts' outcomes, `errors` the claims or records that failed (Neo4j, say:
    their deliveries wait for their lease) and the attempts that failed other than on the
    network (recorded as `error`)."""

    def __init__(self, repo: WebhookRepository, keys: Any, session: aiohttp.ClientSession,
                 settings: Settings):
        if settings.webhook_poll_interval <= 0:
            raise ValueError("VAULTGRAPH_WEBHOOK_POLL_INTERVAL <= 0: the service's sender does "
                             "not run, so there is nothing to compare the bare loop with")
        self.repo = repo
        self.keys = keys  # the tenant's TenantKeys: the bare client holds them unwrapped
        self.session = session
        self.batch = max(1, settings.webhook_max_in_flight)
        self.per_endpoint = max(1, settings.webhook_endpoint_concurrency)
        self.shares = shares(settings)
        self.lease = settings.webhook_lease
        self.timeout_s = settings.webhook_timeout
        self.margin = lease_margin(self.lease, self.timeout_s)
        self.timeout = aiohttp.ClientTimeout(total=settings.webhook_timeout)
        self.interval = settings.webhook_poll_interval
        self.schedule = settings.webhook_retry_schedule_seconds
        self.disable_after = settings.webhook_disable_after
        self.delivered = 0
        self.failed = 0
        self.errors = 0
        self.first_error: str | None = None
        self.claims = 0  # claim statements run
        self.empty_claims = 0  # of which found nothing
        self.records = 0  # outcome statements run
        self._endpoints: dict[str, _Endpoint] = {}
        self._tenants: dict[str, float] = {}  # tenants delivered for lately: last seen
        self._holding = 0
        self._outcomes: list[dict] = []
        self._recorder: asyncio.Task | None = None
        self._refill = False
        self._sending: set[asyncio.Task] = set()
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()

    def counts(self) -> dict[str, int]:
        return {"claims": self.claims, "empty_claims": self.empty_claims,
                "records": self.records, "delivered": self.delivered, "failed": self.failed}

    def wake(self, tenant_id: str | None = None) -> None:
        """A create committed for `tenant_id`: claim now if its deliveries were sent lately
        (None: claim now)."""
        if tenant_id is None or tenant_id in self._tenants:
            self._wake.set()

    def start(self) -> BareDeliveries:
        self._stopping.clear()
        self._task = asyncio.create_task(self.run(), name="bare-deliveries")
        return self

    async def stop(self, grace: float = 15.0) -> None:
        """Claim no more; the claims not started given back; the attempts under way and their
        records awaited `grace` seconds, then cancelled: nothing is left running."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        unsent = [h for e in self._endpoints.values() for h in e.queue]
        for endpoint in self._endpoints.values():
            endpoint.queue.clear()
        self._holding -= len(unsent)
        if unsent:
            with contextlib.suppress(Exception):  # else they wait for their lease
                await self.repo.release([
                    {"webhook_id": h.item.delivery["webhook_id"],
                     "event_id": h.item.delivery["event_id"], "claim": h.claim}
                    for h in unsent])
        running = {t for t in (*self._sending, self._recorder) if t is not None and not t.done()}
        if running:
            await asyncio.wait(running, timeout=grace)
        if self._recorder is not None and not self._recorder.done():
            running.add(self._recorder)  # started by the last attempts meanwhile
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _error(self, exc: BaseException) -> None:
        self.errors += 1
        self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:200]

    async def run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            self._wake.clear()  # a wake while this claim runs calls for another one
            try:
                await self.pass_once()
                failures = 0
            except Exception as exc:  # counted and reported; tried again, less often each time
                failures += 1
                self._error(exc)
            if self._stopping.is_set():
                break
            wait = (min(self.interval * 2 ** min(failures, 10), MAX_BACKOFF) if failures
                    else self.interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _share(self, endpoint: _Endpoint) -> int:
        return self.shares.share(endpoint.healthy, endpoint.slowest)

    async def pass_once(self) -> int:
        """One claim, its deliveries queued to their lanes; how many it claimed."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        room = self.batch - self._holding
        self._refill = False
        if room <= 0:
            self._refill = True
            return 0
        seen = time.monotonic()
        for tenant_id, at in list(self._tenants.items()):
            if seen - at > IDLE_FORGET:
                del self._tenants[tenant_id]
        shares: dict[str, int] = {}
        for webhook_id, endpoint in list(self._endpoints.items()):
            if endpoint.held == 0 and now - endpoint.used > IDLE_FORGET:
                del self._endpoints[webhook_id]
            elif endpoint.held or endpoint.healthy:
                shares[webhook_id] = self._share(endpoint) - endpoint.held
        claim = uuid.uuid4().hex
        deadline = now + self.lease - self.margin
        self.claims += 1
        claimed = await self.repo.claim(limit=room, lease=self.lease, claim=claim,
                                        room=shares, room_default=self.per_endpoint)
        if not claimed:
            self.empty_claims += 1
        self._holding += len(claimed)
        taken: dict[str, int] = {}
        for item in claimed:
            webhook_id = item.delivery["webhook_id"]
            endpoint = self._endpoints.get(webhook_id)
            if endpoint is None:
                endpoint = self._endpoints[webhook_id] = _Endpoint()
            endpoint.used = now
            self._tenants[item.delivery["tenant_id"]] = seen
            endpoint.queue.append(_Held(item, claim, deadline))
            taken[webhook_id] = taken.get(webhook_id, 0) + 1
        for webhook_id, due in more_due(shares, taken, self.per_endpoint).items():
            self._endpoints[webhook_id].refill = due
        for webhook_id in taken:
            self._start(self._endpoints[webhook_id])
        if len(claimed) >= room:
            self._refill = True
        return len(claimed)

    def _start(self, endpoint: _Endpoint) -> None:
        """The endpoint's queued deliveries its free lanes allow, started."""
        loop = asyncio.get_running_loop()
        while endpoint.queue and endpoint.sending < self.per_endpoint:
            held = endpoint.queue.popleft()
            if loop.time() + self.timeout_s > held.deadline:  # left to its lease
                self._holding -= 1
                continue
            endpoint.sending += 1
            task = asyncio.create_task(self._deliver(held, endpoint))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _deliver(self, held: _Held, endpoint: _Endpoint) -> None:
        delivery = held.item.delivery
        try:
            started = time.perf_counter()
            outcome, status, error, response = await self.send(held.item)
            seconds = time.perf_counter() - started
            success = outcome == "success"
            endpoint.slowest = slowest_lately(endpoint.slowest, seconds)
            if success:
                self.delivered += 1
            else:
                self.failed += 1
            endpoint.healthy = success
            attempt = int(delivery.get("attempts") or 0) + 1
            self._outcomes.append({
                "webhook_id": delivery["webhook_id"], "event_id": delivery["event_id"],
                "claim": held.claim, "success": success, "outcome": outcome, "status": status,
                "error": error, "duration_ms": round(seconds * 1000, 2),
                "response": response,
                "retry_in": None if success else retry_in(self.schedule, attempt)})
            if self._recorder is None or self._recorder.done():
                self._recorder = asyncio.create_task(self._record_all(), name="bare-record")
        finally:
            endpoint.sending -= 1
            endpoint.used = asyncio.get_running_loop().time()
            if not self._stopping.is_set():
                self._start(endpoint)
                if endpoint.refill and endpoint.held <= self._share(endpoint) // 2:
                    endpoint.refill = False
                    self._wake.set()

    async def _record_all(self) -> None:
        while self._outcomes:
            batch = self._outcomes[:RECORD_BATCH]
            del self._outcomes[:RECORD_BATCH]
            try:
                self.records += 1
                disabled = await self.repo.complete(batch, disable_after=self.disable_after)
            except Exception as exc:  # their deliveries are sent again when the leases lapse
                self._error(exc)
                disabled = []
            finally:
                self._holding -= len(batch)
            for webhook_id in disabled:
                endpoint = self._endpoints.get(webhook_id)
                if endpoint is not None:
                    self._holding -= len(endpoint.queue)
                    endpoint.queue.clear()
            if self._refill and self._holding <= self.batch // 2:
                self._refill = False
                self._wake.set()

    async def send(self, item: Claimed) -> tuple[str, int | None, str | None, str | None]:
        """One attempt: (outcome, HTTP status, error, the answer's first kilobyte), whatever
        went wrong (the sender's outcome names; aiohttp's errors for its outbound client's)."""
        delivery, webhook = item.delivery, item.webhook
        try:
            secrets = [self.keys.decrypt(webhook["secret_ct"], token_id=webhook["id"],
                                         field=SECRET_FIELD).decode()]
            if webhook.get("previous_signs") and webhook.get("previous_secret_ct"):
                secrets.append(self.keys.decrypt(webhook["previous_secret_ct"],
                                                 token_id=webhook["id"],
                                                 field=SECRET_FIELD).decode())
        except CryptoError:
            return "error", None, "the webhook's secret could not be decrypted", None
        except Exception as exc:  # an attempt's failure, never the loop's
            self._error(exc)
            return "error", None, type(exc).__name__, None
        try:
            body = payload(delivery)
            async with self.session.post(
                    webhook["url"], data=body, timeout=self.timeout,
                    headers=headers(secrets, delivery["event_id"], int(time.time()), body),
                    allow_redirects=False) as resp:
                status = resp.status
                text = (await resp.content.read(ANSWER_KEPT)).decode("utf-8", errors="replace")
        except TimeoutError:
            return "timeout", None, "the destination did not answer in time", None
        except aiohttp.ClientError:
            return "unreachable", None, "the destination could not be reached", None
        except Exception as exc:  # an attempt's failure, never the loop's
            self._error(exc)
            return "error", None, type(exc).__name__, None
        if 200 <= status < 300:
            return "success", status, None, text
        if 300 <= status < 400:
            return "redirect", status, "a redirect (never followed)", text
        return "status", status, None, text


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
    await repo.update(tenant_id=tenant_id, id=webhook_id, prefixes=["/"],  # the operator's
                      changes={"status": "disabled"}, actor=None)


async def states(driver, database: str, webhook_id: str) -> dict[str, int]:
    """The webhook's deliveries by state (pending, delivered, failed, paused)."""
    records, _, _ = await driver.execute_query(STATES, id=webhook_id, database_=database)
    return {r["state"]: r["n"] for r in records}


async def attempt_ms(driver, database: str, webhook_id: str) -> dict:
    """The webhook's attempts: how many, and their durations' p50 and p99 in ms."""
    records, _, _ = await driver.execute_query(ATTEMPTS, id=webhook_id, database_=database)
    r = records[0]
    return {"attempts": r["n"],
            "attempt_p50_ms": None if r["p50"] is None else round(r["p50"], 1),
            "attempt_p99_ms": None if r["p99"] is None else round(r["p99"], 1)}


async def pending(driver, database: str, webhook_id: str) -> int:
    """The webhook's deliveries not yet sent, or sent and not yet recorded."""
    records, _, _ = await driver.execute_query(PENDING, id=webhook_id, database_=database)
    return records[0]["n"]


async def drain(driver, database: str, webhook_id: str, within: float) -> tuple[float, int]:
    """Wait until none of the webhook's deliveries is pending, at most `within` seconds:
    (seconds waited, pending at the end)."""
    began, pause = time.monotonic(), DRAIN_POLL[0]
    while True:
        left = await pending(driver, database, webhook_id)
        if left == 0 or time.monotonic() - began > within:
            return round(time.monotonic() - began, 1), left
        # Read soon, then less often: few readings (they cost the side's client and its
        # Neo4j), and a short drain still timed closely.
        await asyncio.sleep(pause)
        pause = min(2 * pause, DRAIN_POLL[1])
