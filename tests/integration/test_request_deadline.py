"""`VAULTGRAPH_REQUEST_TIMEOUT` is a request's database time in all (docs/configuration.md): every
statement of one request (authentication, the change) draws on one budget set when the request
started, not a fresh timeout each; time spent elsewhere (the body arriving) is not charged, and
the idempotency bookkeeping has its own timeout."""

from __future__ import annotations

from factories import database

from vaultgraph import deadline as deadline_module


async def test_a_request_s_statements_draw_on_one_budget(client, admin_headers, monkeypatch):
    db = database(client.server.app)
    seen: list[tuple[object, float, float]] = []
    own = db._deadline

    def spy(budgeted: bool = True) -> float:
        budget = deadline_module.deadline.get() if budgeted else None
        remaining = budget.remaining if budget is not None else -1.0
        seen.append((budget, remaining, own(budgeted)))
        return seen[-1][2]

    monkeypatch.setattr(db, "_deadline", spy)
    resp = await client.post("/tokens", json={"type": "token", "data": 1}, headers={
        **admin_headers, "Idempotency-Key": "one-budget"})
    assert resp.status == 201, await resp.text()
    # The create drew on the request's budget; the claim and keeping the answer did not (their
    # own timeout). (The audit writer's batches run in a task of their own, without one.)
    charged = [(budget, remaining) for budget, remaining, _ in seen if budget is not None]
    assert len(charged) >= 1
    assert len({id(budget) for budget, _ in charged}) == 1
    timeout = db.timeout
    assert all(0 < remaining <= timeout for _, remaining in charged)
    [budget] = {id(b): b for b, _ in charged}.values()
    assert budget.remaining < timeout  # what the statements took was spent
