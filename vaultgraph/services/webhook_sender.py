"""The webhook sender: delivers the outbox's events, at least once, beside the expiry sweeper.

Every process runs one (every replica, every worker). A pass claims due deliveries in Neo4j
with a lease (cypher/webhooks/claim.cypher), so one worker of one replica sends an event at a
time; a worker that dies, or loses Neo4j, leaves its claims to lapse and another takes them
over: nothing is lost, and an event may arrive twice (receivers dedupe on `webhook-id`).

Per round trip, not per event: one claim takes a batch of due deliveries across webhooks, and
the outcomes of the attempts that ended meanwhile are recorded together in one statement
(cypher/webhooks/complete.cypher) while the next attempts go on. Connections to an endpoint are
kept alive between its deliveries (the outbound client's pool).

Per endpoint: at most `per_endpoint` attempts to one webhook are in flight in a process (its
lanes), and a claim takes of a webhook at most its share less what the process holds of it (a
claim skips the webhooks at their share). A new, failing or hanging endpoint's share is its
lanes, so one that hangs never holds back another's deliveries. A healthy one's (its last
attempt here succeeded) is what its lanes start before the lease lapses: at least what they
start if every attempt took the whole timeout (lanes times the timeouts that fit in the lease
less its margin), and while its attempts are fast up to half of what a process holds (or that
least, if larger): lanes times the time left to start them, over four times its slowest attempt
lately (a timeout counts). A webhook's next claim comes when half its share is sent, and takes
that half: its pace is half its share a claim's round trip, so a fast endpoint's deliveries are
not held back by a share sized for the timeout. A claimed delivery not started in time (the
process stalled, or the endpoint slowed past what its share assumed) is left to its lease; a
stopping sender gives its unstarted claims back.

A pass runs at once after a write committed in this process for a tenant whose deliveries it
has sent in the last minutes, or that changed a webhook (`written`, called by the database
layer: the event is then sent about a round trip after its commit), when a webhook whose
last claim took all it was offered has sent down to half its share (more of its events may
be due; attempts that ended while the claim ran do not hide that), and otherwise
every `interval` seconds (events written by other replicas, a tenant's first after a quiet
spell). Wakes that come while a pass runs make one more pass, not one each.

An attempt's outcome: a 2xx answer is a success; anything else (a redirect, which is never
followed, included), a timeout, a connection failure or a refused address is a failure,
tried again after the next wait of `schedule` (Standard Webhooks: 5 s, 5 min, 30 min, 2 h,
5 h, 10 h, 10 h) and then failed for good. A webhook that fails every delivery for
`disable_after` seconds is disabled. Logs name webhook and event ids and outcomes only: never
a URL (it may hold a secret), a header or a payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import metrics
from ..crypto import CryptoError, TenantKeyCache
from ..errors import Unavailable
from ..outbound import OutboundClient, OutboundError
from ..repository.webhooks import Claimed, WebhookRepository
from ..webhooks import headers, payload
from .webhooks import SECRET_FIELD

log = logging.getLogger(__name__)

ANSWER_KEPT = 1024  # bytes of an endpoint's answer kept with the attempt
PRUNE_EVERY = 3600.0  # seconds between prunes of old attempts
MAX_BACKOFF = 10.0  # the longest wait between passes while Neo4j fails them
LEASE_MARGIN = 1.0  # seconds an attempt must end before its lease lapses (less for a short lease)
RECORD_BATCH = 500  # outcomes recorded per statement at most
IDLE_FORGET = 300.0  # seconds after which an idle endpoint's last outcome is forgotten


def lease_margin(lease: float, timeout: float) -> float:
    """Seconds an attempt must end before its lease lapses: LEASE_MARGIN, less for a lease
    barely longer than the timeout."""
    return min(LEASE_MARGIN, max(0.0, lease - timeout) / 2)


def healthy_share(batch: int, per_endpoint: int, lease: float, timeout: float) -> int:
    """The least a claim may take of one healthy endpoint: its lanes times the attempts that
    fit in a lease if each took the whole timeout, at most what a process holds (`batch`)."""
    depth = max(1, int((lease - lease_margin(lease, timeout)) // timeout)) if timeout > 0 else 1
    return min(batch, per_endpoint * depth)


PACE_HEADROOM = 4.0  # a healthy endpoint's share allows for its attempts slowing this much
SLOWEST_DECAY = 0.98  # what an endpoint's slowest attempt counts for after each one since


def slowest_lately(slowest: float, seconds: float) -> float:
    """An endpoint's slowest attempt lately (ended by an answer or by the timeout), once one
    more took `seconds`: an old slow attempt counts for less with each attempt after it."""
    return max(seconds, slowest * SLOWEST_DECAY)


@dataclass(frozen=True, slots=True)
class Shares:
    """What a claim may take of one webhook (less what the process holds of it): `lanes` for a
    new, failing or hanging endpoint; for a healthy one at least `floor` (safe if every attempt
    took the whole timeout) and, while its attempts are fast, up to `most` (half what a process
    holds, or `floor` if larger): its lanes times the seconds a claim's deliveries have to
    start in (`window`: the lease, less its margin and an attempt's timeout) over PACE_HEADROOM
    times its slowest attempt lately."""

    lanes: int
    floor: int
    most: int
    window: float

    @classmethod
    def of(cls, batch: int, per_endpoint: int, lease: float, timeout: float) -> Shares:
        floor = healthy_share(batch, per_endpoint, lease, timeout)
        return cls(per_endpoint, floor, max(floor, batch // 2),
                   lease - lease_margin(lease, timeout) - timeout)

    def share(self, healthy: bool, slowest: float) -> int:
        if not healthy:
            return self.lanes
        if slowest <= 0 or self.window <= 0:
            return self.floor
        paced = int(self.lanes * self.window / (PACE_HEADROOM * slowest))
        return max(self.floor, min(self.most, paced))


def more_due(offered: Mapping[str, int], taken: Mapping[str, int],
             offered_new: int) -> dict[str, bool]:
    """Per webhook a claim offered room to (`offered`; one new here: `offered_new`) or took
    deliveries of (`taken`), whether more of its events may be due: it was skipped as busy or
    took all it was offered. One that took less has none due now."""
    return {webhook_id: (room := offered.get(webhook_id, offered_new)) <= 0
            or taken.get(webhook_id, 0) >= room
            for webhook_id in offered.keys() | taken.keys()}


def retry_in(schedule: Sequence[float], attempt: int) -> float | None:
    """Seconds until the next attempt after attempt number `attempt` (from 1) failed; None:
    that was the last."""
    return schedule[attempt - 1] if attempt <= len(schedule) else None


@dataclass(slots=True)
class _Held:
    """A claimed delivery, until its attempt starts: its claim, and the loop time by which the
    attempt must have ended (its lease, less a margin, counted from before the claim)."""

    item: Claimed
    claim: str
    deadline: float


@dataclass(slots=True)
class _Endpoint:
    """One webhook's deliveries in this process."""

    queue: deque[_Held] = field(default_factory=deque)  # claimed, not started
    sending: int = 0  # attempts in flight
    healthy: bool = False  # its last attempt here succeeded
    slowest: float = 0.0  # seconds its slowest attempt lately took (slowest_lately)
    refill: bool = False  # a claim took all it was offered: claim again once half is sent
    used: float = 0.0  # loop time of its last claim or attempt

    @property
    def held(self) -> int:
        return len(self.queue) + self.sending


class WebhookSender:
    def __init__(self, repo: WebhookRepository, client: OutboundClient,
                 tenant_keys: TenantKeyCache, *, schedule: Sequence[float], lease: float,
                 timeout: float, disable_after: float, interval: float, batch: int,
                 per_endpoint: int, retention: float, ready: Callable[[], bool] = lambda: True):
        """`batch`: deliveries a process holds at most (claimed, not yet recorded);
        `per_endpoint`: attempts to one webhook in flight at most. `ready`: whether the process
        has started (schema applied, keys checked); no pass runs before, so a start-up that
        fails says so alone."""
        self._ready = ready
        self._repo = repo
        self._client = client
        self._keys = tenant_keys
        self._schedule = tuple(schedule)
        self._lease = lease
        self._timeout = timeout
        self._disable_after = disable_after
        self._interval = interval
        self._batch = max(1, batch)
        self._per_endpoint = max(1, per_endpoint)
        self._margin = lease_margin(lease, timeout)
        self._shares = Shares.of(self._batch, self._per_endpoint, lease, timeout)
        self._retention = retention
        self._endpoints: dict[str, _Endpoint] = {}
        self._tenants: dict[str, float] = {}  # tenants with deliveries lately: last seen
        self._holding = 0  # deliveries claimed and not yet recorded (or given up)
        self._outcomes: list[dict] = []  # attempts ended, to record
        self._recorder: asyncio.Task | None = None
        self._refill = False  # a claim took all the room there was
        self._tasks: set[asyncio.Task] = set()
        self._task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._pruned_at = 0.0

    @property
    def task(self) -> asyncio.Task | None:
        return self._task

    def start(self) -> None:
        if self._interval > 0 and self._task is None:
            self._repo.after_write(self.written)
            self._task = asyncio.create_task(self.run(), name="webhook-sender")

    def written(self, statement: str, params: Mapping[str, Any]) -> None:
        """A write committed in this process: wake when it may have written an event for a
        tenant whose deliveries this sender has sent lately, or when it changed a webhook (a
        tenant's first events after a quiet spell, and other replicas' changes, wait for the
        poll)."""
        tenant_id = params.get("tenant_id")
        if not isinstance(tenant_id, str):
            return
        if statement.startswith("webhooks/"):
            self._tenants[tenant_id] = time.monotonic()
            self._wake.set()
        elif tenant_id in self._tenants:
            self._wake.set()

    def wake(self) -> None:
        """Look for due deliveries now rather than at the next interval."""
        self._wake.set()

    async def stop(self, grace: float = 15.0) -> None:
        """Stop claiming and give back the claims not started; attempts under way get `grace`
        seconds to finish and their outcomes to be recorded (a cancelled one keeps its claim
        until the lease lapses, then another worker sends it)."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        unsent = [held for endpoint in self._endpoints.values() for held in endpoint.queue]
        for endpoint in self._endpoints.values():
            endpoint.queue.clear()
        self._holding -= len(unsent)
        if unsent:
            with contextlib.suppress(Exception):  # not given back: they wait for their lease
                await asyncio.wait_for(self._repo.release([
                    {"webhook_id": h.item.delivery["webhook_id"],
                     "event_id": h.item.delivery["event_id"], "claim": h.claim}
                    for h in unsent]), grace)
        pending = {t for t in (*self._tasks, self._recorder) if t is not None and not t.done()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=grace)
        if self._recorder is not None and not self._recorder.done():
            pending.add(self._recorder)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            if not self._ready():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), min(self._interval, 1.0))
                continue
            self._wake.clear()  # a wake while this pass runs calls for another one
            try:
                await self.pass_once()
                await self._prune_now_and_then()
                failures = 0
            except Exception as exc:  # Neo4j down, say: tried again, less often each time
                failures += 1
                log.warning("webhook sender pass failed; trying again shortly",
                            extra={"error": type(exc).__name__, "failures": failures})
            if self._stopping.is_set():
                break
            wait = min(self._interval * 2 ** min(failures, 10), MAX_BACKOFF) if failures else (
                self._interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _share(self, endpoint: _Endpoint) -> int:
        return self._shares.share(endpoint.healthy, endpoint.slowest)

    async def pass_once(self) -> int:
        """Claim what this process may take on now and start sending it; how many claimed."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        room = self._batch - self._holding
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
        deadline = now + self._lease - self._margin
        claimed = await self._repo.claim(limit=room, lease=self._lease, claim=claim,
                                         room=shares, room_default=self._per_endpoint)
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
        for webhook_id, due in more_due(shares, taken, self._per_endpoint).items():
            self._endpoints[webhook_id].refill = due
        for webhook_id in taken:
            self._start(webhook_id, self._endpoints[webhook_id])
        if len(claimed) >= room:
            self._refill = True
        return len(claimed)

    def _start(self, webhook_id: str, endpoint: _Endpoint) -> None:
        """Start the endpoint's queued deliveries its free lanes allow."""
        loop = asyncio.get_running_loop()
        while endpoint.queue and endpoint.sending < self._per_endpoint:
            held = endpoint.queue.popleft()
            if loop.time() + self._timeout > held.deadline:
                # Too late to end before its lease lapses: left to it (sent after, by any).
                self._holding -= 1
                log.warning("webhook delivery not started before its lease ran short; it is "
                            "sent when the lease lapses", extra={"webhook_id": webhook_id})
                continue
            endpoint.sending += 1
            task = asyncio.create_task(self._deliver(held, endpoint))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, held: _Held, endpoint: _Endpoint) -> None:
        delivery = held.item.delivery
        webhook_id = delivery["webhook_id"]
        queued = False
        try:
            started = time.perf_counter()
            outcome, status, error, response = await self._send(held.item)
            seconds = time.perf_counter() - started
            duration_ms = round(seconds * 1000, 2)
            success = outcome == "success"
            attempt = int(delivery.get("attempts") or 0) + 1
            wait = None if success else retry_in(self._schedule, attempt)
            metrics.WEBHOOK_ATTEMPTS.labels(outcome).inc()
            if success:
                metrics.WEBHOOK_LAG.observe(max(0.0, time.time() - _epoch(delivery["at"])))
            elif wait is None:
                metrics.WEBHOOK_FAILED.inc()
            endpoint.slowest = slowest_lately(endpoint.slowest, seconds)  # a timeout too
            endpoint.healthy = success
            self._outcomes.append({
                "webhook_id": webhook_id, "event_id": delivery["event_id"],
                "claim": held.claim, "success": success, "outcome": outcome, "status": status,
                "error": error, "duration_ms": duration_ms, "response": response,
                "retry_in": wait})
            queued = True
            if self._recorder is None or self._recorder.done():
                self._recorder = asyncio.create_task(self._record_all(), name="webhook-record")
            log.info("webhook attempt", extra={
                "webhook_id": webhook_id, "event_id": delivery["event_id"],
                "event_type": delivery["type"], "attempt": attempt, "outcome": outcome,
                "status": status, "ms": duration_ms})
        except Exception as exc:
            log.warning("webhook delivery not recorded; it is sent again when its lease lapses",
                        extra={"webhook_id": webhook_id, "error": type(exc).__name__})
        finally:
            if not queued:
                self._holding -= 1
            endpoint.sending -= 1
            endpoint.used = asyncio.get_running_loop().time()
            if not self._stopping.is_set():
                self._start(webhook_id, endpoint)
                if endpoint.refill and endpoint.held <= self._share(endpoint) // 2:
                    endpoint.refill = False
                    self._wake.set()

    async def _record_all(self) -> None:
        """Record the outcomes of the attempts that ended, a statement at a time, while more
        attempts go on (those ending meanwhile go in the next statement)."""
        while self._outcomes:
            batch = self._outcomes[:RECORD_BATCH]
            del self._outcomes[:RECORD_BATCH]
            try:
                disabled = await self._record(batch)
            except Exception as exc:
                log.warning("webhook outcomes not recorded; their deliveries are sent again "
                            "when their leases lapse",
                            extra={"error": type(exc).__name__, "outcomes": len(batch)})
                disabled = []
            finally:
                self._holding -= len(batch)
            for webhook_id in disabled:
                metrics.WEBHOOK_DISABLED.inc()
                log.warning("webhook disabled after failing every delivery",
                            extra={"webhook_id": webhook_id})
                endpoint = self._endpoints.get(webhook_id)
                if endpoint is not None:  # its deliveries are paused: none more is sent
                    self._holding -= len(endpoint.queue)
                    endpoint.queue.clear()
            if self._refill and self._holding <= self._batch // 2:
                self._refill = False
                self._wake.set()

    async def _record(self, outcomes: list[dict]) -> list[str]:
        """Record outcomes, retrying while Neo4j is away for as long as a lease lasts (past
        it, another worker may send the events again: at least once)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self._lease
        pause = 0.1
        while True:
            try:
                return await self._repo.complete(outcomes, disable_after=self._disable_after)
            except Unavailable:
                if loop.time() + pause >= until or self._stopping.is_set():
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)

    async def _send(self, item: Claimed) -> tuple[str, int | None, str | None, str | None]:
        """(outcome, HTTP status, error, the answer's first kilobyte)."""
        delivery, webhook = item.delivery, item.webhook
        try:
            keys = await self._keys.aget(delivery["tenant_id"], item.tenant)
            secrets = [keys.decrypt(webhook["secret_ct"], token_id=webhook["id"],
                                    field=SECRET_FIELD).decode()]
            if webhook.get("previous_signs") and webhook.get("previous_secret_ct"):
                secrets.append(keys.decrypt(webhook["previous_secret_ct"],
                                            token_id=webhook["id"],
                                            field=SECRET_FIELD).decode())
        except CryptoError:
            return "error", None, "the webhook's secret could not be decrypted", None
        body = payload(delivery)
        sent = headers(secrets, delivery["event_id"], int(time.time()), body)
        try:
            answer = await self._client.request(
                "POST", webhook["url"], headers=sent, body=body, time_limit=self._timeout,
                max_answer_bytes=ANSWER_KEPT, truncate=True)
        except OutboundError as exc:
            return exc.reason, None, str(exc), None
        text = answer.body[:ANSWER_KEPT].decode("utf-8", errors="replace")
        if 200 <= answer.status < 300:
            return "success", answer.status, None, text
        if 300 <= answer.status < 400:
            return "redirect", answer.status, "a redirect (never followed)", text
        return "status", answer.status, None, text

    async def _prune_now_and_then(self) -> None:
        now = time.monotonic()
        if now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        pruned = await self._repo.prune(retention=self._retention)
        if pruned:
            log.info("webhook attempts pruned", extra={"pruned": pruned})


def _epoch(text: str) -> float:
    """Seconds since the epoch of a Neo4j datetime's text (nanoseconds cut to microseconds)."""
    head, _, rest = text.partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
