"""Webhook payloads and signatures (checked against the standardwebhooks package), the retry
schedule, what a claim may take of an endpoint, and the settings that refuse a schedule or
lease that cannot work."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import orjson
import pytest
from standardwebhooks.webhooks import Webhook

from vaultgraph import webhooks
from vaultgraph.services.webhook_sender import (
    Shares,
    _epoch,
    more_due,
    retry_in,
    slowest_lately,
)
from vaultgraph.settings import ConfigError, Settings

STORED = {"event_id": "e1", "type": "token.deleted", "at": "2026-11-27T17:40:12.123456789Z",
          "tenant_id": "t1", "webhook_id": "w1", "token_id": "tok", "token_type": "card",
          "containers": ["/pci/"], "application_id": "app", "reason": "deduplicated",
          "merged_into": "other", "parent_id": None, "child_id": None}


def test_a_secret_is_32_random_bytes_behind_the_prefix():
    one, two = webhooks.new_secret(), webhooks.new_secret()
    assert one.startswith("whsec_") and one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


def test_signatures_verify_with_the_reference_package_under_each_secret():
    old, new = webhooks.new_secret(), webhooks.new_secret()
    body = webhooks.payload(STORED)
    now = int(datetime.now(UTC).timestamp())
    sent = webhooks.headers([new, old], "e1", now, body)
    assert sent["webhook-id"] == "e1" and sent["webhook-timestamp"] == str(now)
    assert len(sent["webhook-signature"].split(" ")) == 2
    for secret in (new, old):
        assert Webhook(secret).verify(body, sent)["id"] == "e1"
    with pytest.raises(Exception, match="signature"):
        Webhook(webhooks.new_secret()).verify(body, sent)


@pytest.mark.parametrize(("kind", "extra"), [
    ("token.created", {}), ("token.updated", {}),
    ("token.deleted", {"reason": "deduplicated", "merged_into": "other"}),
    ("token.linked", {"parent_id": "p", "child_id": "c"}),
    ("token.unlinked", {"parent_id": "p", "child_id": "c"})])
def test_payloads_name_the_change_and_nothing_more(kind, extra):
    stored = {**STORED, "type": kind, "parent_id": extra.get("parent_id"),
              "child_id": extra.get("child_id")}
    body = orjson.loads(webhooks.payload(stored))
    assert body == {"id": "e1", "type": kind, "timestamp": STORED["at"], "tenant_id": "t1",
                    "data": {"id": "tok", "type": "card", "containers": ["/pci/"],
                             "application_id": "app", **extra}}


def test_a_test_event_names_its_webhook_and_a_system_change_says_so():
    assert orjson.loads(webhooks.payload({**STORED, "type": "webhook.test"}))["data"] == {
        "webhook_id": "w1"}
    swept = {**STORED, "application_id": None, "reason": "expired", "merged_into": None}
    assert orjson.loads(webhooks.payload(swept))["data"]["application_id"] == "system"


def test_the_retry_schedule_then_failed():
    schedule = Settings().webhook_retry_schedule_seconds
    assert schedule == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert [retry_in(schedule, n) for n in range(1, 9)] == [*schedule, None]


def test_a_healthy_endpoints_share_is_paced_by_its_slowest_attempt_lately():
    shares = Shares.of(256, 16, 60.0, 10.0)  # the defaults
    # Lanes times the 5 attempts a lease holds at the whole timeout; half of 256; attempts
    # must start within the lease less its 1 s margin and a timeout.
    assert (shares.lanes, shares.floor, shares.most, shares.window) == (16, 80, 128, 49.0)
    assert shares.share(False, 0.01) == 16  # new or failing: its lanes, however fast it was
    assert shares.share(True, 0.0) == 80  # no pace known: safe at the timeout
    assert shares.share(True, 0.02) == 128  # fast: half of what a process holds
    assert shares.share(True, 2.0) == 98  # 16 lanes x 49 s / (4 x 2 s)
    assert shares.share(True, 10.0) == 80  # as slow as the timeout: never below the floor
    # A process that holds less: the floor is all it holds, and a fast endpoint takes no more.
    small = Shares.of(40, 16, 60.0, 10.0)
    assert (small.floor, small.share(True, 0.001)) == (40, 40)


def test_a_slow_attempt_counts_for_less_with_each_success_after_it():
    slowest = slowest_lately(0.0, 2.0)
    assert slowest == 2.0
    assert slowest_lately(slowest, 3.0) == 3.0  # a slower one counts in full
    for _ in range(35):
        slowest = slowest_lately(slowest, 0.01)
    assert 0.9 < slowest < 1.0  # 2 s x 0.98 ** 35
    for _ in range(300):
        slowest = slowest_lately(slowest, 0.01)
    assert slowest == 0.01  # forgotten: the pace is the endpoint's own again


def test_more_may_be_due_of_a_webhook_that_took_all_it_was_offered_or_was_busy():
    offered = {"all": 40, "less": 40, "busy": 0, "none": 16}
    taken = {"all": 40, "less": 12, "new": 16, "new-less": 3}
    assert more_due(offered, taken, 16) == {
        "all": True, "less": False, "busy": True, "none": False, "new": True,
        "new-less": False}


def test_neo4j_times_with_nanoseconds_are_read():
    assert _epoch("2026-11-27T17:40:12.123456789Z") == datetime(
        2026, 11, 27, 17, 40, 12, 123456, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("values", "named"), [
    ({"webhook_retry_schedule": "5,soon"}, "VAULTGRAPH_WEBHOOK_RETRY_SCHEDULE"),
    ({"webhook_retry_schedule": "5,-1"}, "VAULTGRAPH_WEBHOOK_RETRY_SCHEDULE"),
    ({"webhook_lease": 10.0, "webhook_timeout": 10.0}, "VAULTGRAPH_WEBHOOK_LEASE"),
    ({"webhook_endpoint_concurrency": 0}, "VAULTGRAPH_WEBHOOK_ENDPOINT_CONCURRENCY")])
def test_settings_that_cannot_work_are_refused(values, named):
    with pytest.raises(ConfigError, match=named):
        Settings(**values)
