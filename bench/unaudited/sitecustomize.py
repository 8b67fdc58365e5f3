"""The service without its audit trail, for the benchmark's on/off comparison only.

Python imports `sitecustomize` from the first folder on its path that holds one, at the start of
every process: the benchmark puts this folder on the service's PYTHONPATH (bench/run.py,
BENCH_AUDIT_OFF), so the supervisor and each worker it starts run with the trail switched off:
a write carries no event in its transaction, and no event is group-committed or linked. The
request path is otherwise the product's own (the middleware still notes what it would record),
so on minus off is what storing the trail costs. This folder is not part of the distribution: an
installed vault has no way to turn its trail off.
"""

from __future__ import annotations

from vaultgraph.audit import context as _context
from vaultgraph.services.audit_writer import AuditWriter as _Writer


def _no_event(*_, **__):
    return None


async def _record(self, event, arrival=None, **_):
    return None


def _record_later(self, event, arrival=None, **_):
    return None


_context.write_event = _no_event
_Writer.record = _record
_Writer.record_later = _record_later
