"""The application buckets (services/ratelimits.py): a request may weigh more than one unit
(`take(key, cost)`, what `api/ratelimit.py` `charge` spends)."""

from __future__ import annotations

from vaultgraph.services.ratelimits import TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_cost_spends_that_many_units_or_none():
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=10, clock=clock)
    assert buckets.take("app", 4).remaining == 6
    assert buckets.take("app").remaining == 5
    refused = buckets.take("app", 7)
    assert (refused.allowed, refused.remaining, refused.retry_after) == (False, 5, 2)
    assert buckets.peek("app").remaining == 5  # the refusal spent nothing
    clock.now = 2.0
    assert buckets.take("app", 7).allowed


def test_a_cost_above_the_burst_passes_only_on_a_full_bucket():
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=3, clock=clock)
    assert buckets.take("app", 50).allowed
    assert buckets.peek("app").remaining == 0
    assert not buckets.take("app", 50).allowed
    clock.now = 3.0
    assert buckets.take("app", 50).allowed


def test_a_zero_cost_spends_nothing():
    buckets = TokenBuckets(rate=1.0, burst=2, clock=Clock())
    assert buckets.take("app", 0).remaining == 2


def test_spend_takes_one_token_when_there_and_none_when_not():
    now = [0.0]
    buckets = TokenBuckets(rate=1, burst=2, clock=lambda: now[0])
    assert [buckets.spend("app") for _ in range(3)] == [True, True, False]
    assert buckets.peek("app").remaining == 0
    now[0] = 1.0  # one token back a second
    assert buckets.spend("app") and not buckets.spend("app")
