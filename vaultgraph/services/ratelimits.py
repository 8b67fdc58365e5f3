"""Token buckets: requests per application, and failed authentications per client address.

Buckets live in this process (docs/bulk-and-idempotency.md: with N replicas each holds its own,
so set the rate to the budget divided by N). Checking one costs no I/O: a shared store would add a
database round trip and a contended write to every request.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

# Buckets kept at most; the least recently used beyond it are dropped (a dropped bucket would
# be full again by then, or soon: its owner has been quiet the longest).
MAX_BUCKETS = 100_000


class Verdict(NamedTuple):
    """One check of a bucket: allowed or not, and what the RateLimit-* headers say. A named
    tuple: every authenticated request makes one (a frozen dataclass costs twice as much)."""

    allowed: bool
    limit: int
    remaining: int
    reset: int  # seconds until the bucket is full again
    retry_after: int  # seconds until one more request is allowed (0 when allowed)


class TokenBuckets:
    """`rate` tokens a second up to `burst`, one bucket per key; `rate <= 0`: no limit."""

    def __init__(self, *, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def _level(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) * self.rate)

    def _store(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)

    def _verdict(self, allowed: bool, tokens: float, cost: float = 1) -> Verdict:
        return Verdict(
            allowed=allowed, limit=self.burst, remaining=max(0, math.floor(tokens)),
            reset=max(0, math.ceil((self.burst - tokens) / self.rate)),
            retry_after=0 if allowed else max(1, math.ceil((cost - tokens) / self.rate)))

    def take(self, key: str, cost: float = 1) -> Verdict:
        """Spend `cost` tokens when the bucket holds them, else none (a refused request costs
        nothing more). A cost above the burst is charged as the burst: such a request passes
        when the bucket is full, rather than never."""
        cost = min(max(0, cost), self.burst)
        allowed, tokens = self._spend(key, cost)
        return self._verdict(allowed, tokens, cost)

    def spend(self, key: str) -> bool:
        """`take(key).allowed`, without the verdict: for a caller that reads it only when the
        token was not there (`peek` then gives it)."""
        return self._spend(key, 1)[0]

    def _spend(self, key: str, cost: float) -> tuple[bool, float]:
        now = self._clock()
        tokens = self._level(key, now)
        allowed = tokens >= cost
        if allowed:
            tokens -= cost
        self._store(key, tokens, now)
        return allowed, tokens

    def peek(self, key: str) -> Verdict:
        """Whether a token is there, spending none."""
        tokens = self._level(key, self._clock())
        return self._verdict(tokens >= 1, tokens)

    def give(self, key: str) -> None:
        """Give one token back (one `take` spent for what turned out not to count)."""
        now = self._clock()
        self._store(key, min(float(self.burst), self._level(key, now) + 1), now)


class FailedAuthentications:
    """The failed-authentication budget of each client address, spent before a key is looked up.

    A look-up awaits Neo4j. Checked before it and spent only after the 401, the budget let
    every request sent at once pass the check (500 bad keys at once: 500 look-ups and 401s
    against a budget of 20). So a request spends one token first and gets it back as soon as
    its key authenticates, or when it ends with no answer on its key (a 503, say); a 401 keeps
    it spent. Requests from one address with one key share the reservation while their key is
    being looked up, as they share the look-up: a burst of good requests (every client behind
    one proxy) spends no more than one token for a moment, whatever its size."""

    def __init__(self, buckets: TokenBuckets):
        self.buckets = buckets
        self._pending: dict[tuple[str, str], Reservation] = {}

    @property
    def enabled(self) -> bool:
        return self.buckets.enabled

    def reserve(self, address: str, key: str) -> tuple[Verdict | None, Reservation | None]:
        """The reservation the request holds until it ends, when allowed (and no verdict:
        nothing reads it, and a good key gives the token back at once); when not, the
        verdict (what Retry-After says) and none."""
        pending = self._pending.get((address, key))
        if pending is not None:
            pending.users += 1
            return None, pending
        if not self.buckets.spend(address):
            return self.buckets.peek(address), None
        reservation = self._pending[(address, key)] = Reservation(self, address, key)
        return None, reservation

    def _settle(self, reservation: Reservation, *, refund: bool) -> None:
        if reservation.settled:
            return
        reservation.settled = True
        if self._pending.get(reservation.pair) is reservation:
            del self._pending[reservation.pair]  # a later request with this key spends anew
        if refund:
            self.buckets.give(reservation.pair[0])


class Reservation:
    """One token of an address's failure budget, held while a key is being looked up."""

    __slots__ = ("_owner", "pair", "settled", "users")

    def __init__(self, owner: FailedAuthentications, address: str, key: str):
        self._owner = owner
        self.pair = (address, key)
        self.users = 1
        self.settled = False

    def authenticated(self) -> None:
        """The key is good: the token goes back."""
        self._owner._settle(self, refund=True)

    def failed(self) -> None:
        """The key was refused (401): the token stays spent."""
        self._owner._settle(self, refund=False)

    def release(self) -> None:
        """One request holding the reservation ended; the last one gives the token back if
        nothing was decided about the key."""
        self.users -= 1
        if self.users == 0:
            self._owner._settle(self, refund=True)


class RateLimits:
    """The two throttles a request meets: its application's budget, and (for a client address
    whose keys keep failing) the failed-authentication budget."""

    def __init__(self, *, rate: float, burst: int, auth_failures: int,
                 auth_failure_window: float, clock: Callable[[], float] = time.monotonic):
        self.applications = TokenBuckets(rate=rate, burst=burst, clock=clock)
        self.auth_failures = FailedAuthentications(TokenBuckets(
            rate=auth_failures / auth_failure_window if auth_failures > 0 else 0,
            burst=auth_failures, clock=clock))
