"""`VAULTGRAPH_REQUEST_TIMEOUT` is a request's database time in all (README Configuration): every
statement of one request (idempotency bookkeeping, the change) runs against one deadline set when
the request started, not a fresh timeout each."""

from __future__ import annotations

from factories import database

from vaultgraph.repository import database as db_module


async def test_a_request_s_statements_share_one_deadline(client, admin_headers, monkeypatch):
    db = database(client.server.app)
    seen: list[tuple[float | None, float]] = []
    own = db._deadline

    def spy() -> float:
        at = own()
        seen.append((db_module.deadline.get(), at))
        return at

    monkeypatch.setattr(db, "_deadline", spy)
    resp = await client.post("/tokens", json={"type": "token", "data": 1}, headers={
        **admin_headers, "Idempotency-Key": "one-deadline"})
    assert resp.status == 201, await resp.text()
    # The claim, the create and keeping the answer: three statements, one deadline, the
    # request's. (The audit writer's batches run in a task of their own, without one.)
    mine = [at for set_, at in seen if set_ is not None]
    assert len(mine) >= 3
    assert set(mine) == {mine[0]}
    assert all(at == set_ for set_, at in seen if set_ is not None)
