"""The failed-authentication budget (services/ratelimits.py): spent before a key is looked up,
given back when the key is good or nothing was decided, shared by one address's requests with
one key while that key is being looked up."""

from __future__ import annotations

from vaultgraph.services.ratelimits import FailedAuthentications, TokenBuckets


def budget(limit: int = 2) -> FailedAuthentications:
    return FailedAuthentications(TokenBuckets(rate=limit / 3600, burst=limit,
                                              clock=lambda: 0.0))


def test_look_ups_in_flight_spend_the_budget_before_any_answer():
    failures = budget(2)
    held = [failures.reserve("10.0.0.1", f"vg_guess{i}") for i in range(3)]
    assert [r is not None for _, r in held] == [True, True, False]
    assert held[2][0].retry_after >= 1
    assert failures.reserve("10.0.0.2", "vg_other")[1] is not None  # per address


def test_a_401_keeps_its_token_spent_and_a_good_key_gives_it_back():
    failures = budget(2)
    _, bad = failures.reserve("a", "vg_bad")
    bad.failed()
    bad.release()
    _, good = failures.reserve("a", "vg_good")
    good.authenticated()
    good.release()
    assert failures.buckets.peek("a").remaining == 1
    _, undecided = failures.reserve("a", "vg_unknown")  # the look-up failed: a 503
    undecided.release()
    assert failures.buckets.peek("a").remaining == 1


def test_requests_with_one_key_share_one_reservation_while_it_is_looked_up():
    failures = budget(1)
    _, first = failures.reserve("a", "vg_key")
    _, second = failures.reserve("a", "vg_key")
    assert second is first
    first.authenticated()
    first.release()
    second.release()
    assert failures.buckets.peek("a").remaining == 1
    # Once decided, a further request with the key spends anew: a bad key repeated is
    # counted each time it is looked up again.
    _, again = failures.reserve("a", "vg_key")
    assert again is not first
    again.failed()
    again.release()
    assert failures.reserve("a", "vg_key")[1] is None
