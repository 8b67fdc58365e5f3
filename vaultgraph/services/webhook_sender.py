"""The webhook sender: delivers the outbox's events, at least once, beside the expiry sweeper.

Every process runs one (every replica, every worker). Each pass claims due deliveries in Neo4j
with a lease (cypher/webhooks/claim.cypher), so one worker of one replica sends an event at a
time; a worker that dies, or loses Neo4j, leaves its claims to lapse and another takes them
over: nothing is lost, and an event may arrive twice (receivers dedupe on `webhook-id`).

Each delivery runs as a task of its own, and at most `per_endpoint` of one webhook's are in
flight in a process: a claim skips the webhooks at that bound, so an endpoint that hangs (each
attempt ends at the timeout) never holds back another's deliveries.

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
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

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


def retry_in(schedule: Sequence[float], attempt: int) -> float | None:
    """Seconds until the next attempt after attempt number `attempt` (from 1) failed; None:
    that was the last."""
    return schedule[attempt - 1] if attempt <= len(schedule) else None


class WebhookSender:
    def __init__(self, repo: WebhookRepository, client: OutboundClient,
                 tenant_keys: TenantKeyCache, *, schedule: Sequence[float], lease: float,
                 timeout: float, disable_after: float, interval: float, batch: int,
                 per_endpoint: int, retention: float, ready: Callable[[], bool] = lambda: True):
        """`ready`: whether the process has started (schema applied, keys checked); no pass
        runs before, so a start-up that fails says so alone."""
        self._ready = ready
        self._repo = repo
        self._client = client
        self._keys = tenant_keys
        self._schedule = tuple(schedule)
        self._lease = lease
        self._timeout = timeout
        self._disable_after = disable_after
        self._interval = interval
        self._batch = batch
        self._per_endpoint = per_endpoint
        self._retention = retention
        self._in_flight: Counter[str] = Counter()
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
            self._task = asyncio.create_task(self.run(), name="webhook-sender")

    def wake(self) -> None:
        """Look for due deliveries now rather than at the next interval."""
        self._wake.set()

    async def stop(self, grace: float = 15.0) -> None:
        """Stop claiming; deliveries under way get `grace` seconds to finish (a cancelled one
        keeps its claim until the lease lapses, then another worker sends it)."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            claimed = 0
            if not self._ready():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self._interval)
                continue
            try:
                claimed = await self.pass_once()
                await self._prune_now_and_then()
                failures = 0
            except Exception as exc:  # Neo4j down, say: tried again, less often each time
                failures += 1
                log.warning("webhook sender pass failed; trying again shortly",
                            extra={"error": type(exc).__name__, "failures": failures})
            if claimed and not self._stopping.is_set():
                continue  # there may be more due: claim again at once (bounded by `batch`)
            self._wake.clear()
            wait = min(self._interval * 2 ** min(failures, 10), MAX_BACKOFF) if failures else (
                self._interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def pass_once(self) -> int:
        """Claim what this process may take on now and start sending it; how many claimed."""
        room = self._batch - sum(self._in_flight.values())
        if room <= 0:
            return 0
        claim = uuid.uuid4().hex
        claimed = await self._repo.claim(limit=room, lease=self._lease, claim=claim,
                                         per_endpoint=self._per_endpoint,
                                         in_flight=dict(self._in_flight))
        for item in claimed:
            webhook_id = item.delivery["webhook_id"]
            if self._in_flight[webhook_id] >= self._per_endpoint:
                # Claimed beyond the bound in one pass: its lease lapses and it is sent then.
                continue
            self._in_flight[webhook_id] += 1
            task = asyncio.create_task(self._deliver(item, claim))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(claimed)

    async def _deliver(self, item: Claimed, claim: str) -> None:
        delivery = item.delivery
        webhook_id = delivery["webhook_id"]
        try:
            started = time.perf_counter()
            outcome, status, error, response = await self._send(item)
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            success = outcome == "success"
            attempt = int(delivery.get("attempts") or 0) + 1
            wait = None if success else retry_in(self._schedule, attempt)
            metrics.WEBHOOK_ATTEMPTS.labels(outcome).inc()
            if success:
                metrics.WEBHOOK_LAG.observe(max(0.0, time.time() - _epoch(delivery["at"])))
            elif wait is None:
                metrics.WEBHOOK_FAILED.inc()
            disabled = await self._record(
                webhook_id=webhook_id, event_id=delivery["event_id"], claim=claim,
                success=success, outcome=outcome, status=status, error=error,
                duration_ms=duration_ms, response=response, retry_in=wait)
            if disabled:
                metrics.WEBHOOK_DISABLED.inc()
                log.warning("webhook disabled after failing every delivery",
                            extra={"webhook_id": webhook_id})
            log.info("webhook attempt", extra={
                "webhook_id": webhook_id, "event_id": delivery["event_id"],
                "event_type": delivery["type"], "attempt": attempt, "outcome": outcome,
                "status": status, "ms": duration_ms})
        except Exception as exc:
            log.warning("webhook delivery not recorded; it is sent again when its lease lapses",
                        extra={"webhook_id": webhook_id, "error": type(exc).__name__})
        finally:
            self._in_flight[webhook_id] -= 1
            if self._in_flight[webhook_id] <= 0:
                del self._in_flight[webhook_id]
            self._wake.set()

    async def _send(self, item: Claimed) -> tuple[str, int | None, str | None, str | None]:
        """(outcome, HTTP status, error, the answer's first kilobyte)."""
        delivery, webhook = item.delivery, item.webhook
        try:
            keys = self._keys.get(delivery["tenant_id"], item.tenant)
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

    async def _record(self, **outcome) -> bool | None:
        """Record an attempt, retrying while Neo4j is away for as long as the lease lasts
        (past it, another worker may send the event again: at least once)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self._lease
        pause = 0.1
        while True:
            try:
                return await self._repo.complete(disable_after=self._disable_after, **outcome)
            except Unavailable:
                if loop.time() + pause >= until or self._stopping.is_set():
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)

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
