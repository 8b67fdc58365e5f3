"""bench/audit_unwaited: with its hook loaded, the audit writer's `record` returns before the
event's batch is committed, and the event is still handed to the writer (stored as before)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from vaultgraph.services.audit_writer import CREATE, LINK, AuditWriter
from vaultgraph.settings import PROJECT_ROOT


@pytest.fixture
def unwaited(monkeypatch):
    monkeypatch.setattr(AuditWriter, "record", AuditWriter.record)  # restored afterwards
    path = PROJECT_ROOT / "bench" / "audit_unwaited" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("bench_audit_unwaited_hook", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


class Handed:
    """Stands in for the writer's queue: what `record` hands over, nothing written."""

    def __init__(self):
        self.items = []

    def _enqueue(self, item, arrival):
        self.items.append((item, arrival))


async def test_record_returns_with_the_event_handed_over_and_uncommitted(unwaited):
    queue = Handed()
    event = {"id": "e1"}
    await asyncio.wait_for(AuditWriter.record(queue, event, "arrival"), 1)
    [((handed, future, mode, stored), arrival)] = queue.items
    assert handed is event and arrival == "arrival" and (mode, stored) == (CREATE, None)
    assert not future.done()  # the answer did not wait for it
    future.set_exception(RuntimeError("the batch failed"))  # consumed: nothing unretrieved
    await asyncio.sleep(0)
    assert future.exception() is not None


async def test_a_write_events_link_is_still_marked_as_stored(unwaited):
    queue = Handed()
    await AuditWriter.record(queue, {"id": "e2"}, stored={"tenant_id": "t"})
    [((_, _, mode, stored), _)] = queue.items
    assert mode == LINK and stored == {"tenant_id": "t"}
