"""Webhook payloads and signatures (checked against the standardwebhooks package), the retry
schedule, and the settings that refuse a schedule or lease that cannot work."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import orjson
import pytest
from standardwebhooks.webhooks import Webhook

from vaultgraph import webhooks
from vaultgraph.services.webhook_sender import _epoch, retry_in
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
