"""A statement's session is kept for the next statement (repository/database.py
`IdleSessions`): one that read its whole result is given back holding no connection; one whose
statement failed, or ran out of time, is closed and never given back; a managed transaction
takes and gives back the kept write sessions the same way, and sends its BEGIN with its first
statement; closing the `Database` closes those it kept, and those kept under another bookmark
manager are closed once it changes; on one server a kept session sends no bookmark, not even
its own last."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import neo4j
import pytest
from neo4j.exceptions import ClientError
from prometheus_client import REGISTRY

from vaultgraph.errors import Unavailable
from vaultgraph.repository.database import IdleSessions
from vaultgraph.wiring import connect

SLOW = "UNWIND range(1, 200000000) AS x WITH x WHERE x < 0 RETURN count(x) AS n"


@pytest.fixture
async def db(settings):
    db = connect(settings)
    try:
        yield db
    finally:
        await db.close()


def _in_use() -> float:
    return REGISTRY.get_sample_value("vaultgraph_neo4j_sessions_in_use") or 0.0


def _counting(db, monkeypatch) -> list[neo4j.AsyncSession]:
    """The sessions `db` opens from now on, in order."""
    opened: list[neo4j.AsyncSession] = []
    own = db.session

    def session(mode: str = neo4j.WRITE_ACCESS) -> neo4j.AsyncSession:
        opened.append(own(mode))
        return opened[-1]

    monkeypatch.setattr(db, "session", session)
    return opened


async def test_statements_one_after_another_run_in_one_session(db, monkeypatch):
    opened = _counting(db, monkeypatch)
    for _ in range(5):
        await db.read("health/ping")
    for _ in range(3):
        await db.write_unaudited("health/ping")
    # One read session and one write session, each kept and used again.
    assert len(opened) == 2
    assert not any(session.closed() for session in opened)


async def test_a_kept_session_holds_no_connection(settings):
    # One pooled connection: a statement outside the kept session can have it only if the
    # kept session gave it back.
    db = connect(dataclasses.replace(settings, neo4j_pool_size=1, neo4j_pool_warm=1,
                                     neo4j_acquire_timeout=1.0))
    try:
        await db.read("health/ping")
        records, _, _ = await db.driver.execute_query("RETURN 1 AS one",
                                                      database_=db.database)
        assert records[0]["one"] == 1
        await db.read("health/ping")  # and the kept session gets it back in turn
    finally:
        await db.close()


async def test_a_session_whose_statement_failed_is_closed_not_kept(db, monkeypatch):
    opened = _counting(db, monkeypatch)
    with pytest.raises(ClientError):  # a parameter the statement names is missing
        await db._statement("bad", {}, neo4j.WRITE_ACCESS, query=neo4j.Query("RETURN $gone"))
    [failed] = opened
    assert failed.closed()
    await db.write_unaudited("health/ping")
    assert len(opened) == 2 and not opened[1].closed()


async def test_transactions_and_statements_share_the_kept_write_session(settings, monkeypatch):
    # One pooled connection: a kept session that still held it would starve what comes next.
    db = connect(dataclasses.replace(settings, neo4j_pool_size=1, neo4j_pool_warm=1,
                                     neo4j_acquire_timeout=1.0))
    opened = _counting(db, monkeypatch)
    try:
        for _ in range(3):
            [record] = await db.transaction(lambda tx: tx.run("health/ping"))
            assert record is not None
            await db.write_unaudited("health/ping")
        assert len(opened) == 1 and not opened[0].closed()
        records, _, _ = await db.driver.execute_query("RETURN 1 AS one",
                                                      database_=db.database)
        assert records[0]["one"] == 1
    finally:
        await db.close()


async def test_a_session_whose_transaction_failed_is_closed_not_kept(db, monkeypatch):
    opened = _counting(db, monkeypatch)

    async def work(tx):
        await tx.run("health/ping")
        raise LookupError("the work's own failure")

    with pytest.raises(LookupError):
        await db.transaction(work)
    [failed] = opened
    assert failed.closed()
    await db.transaction(lambda tx: tx.run("health/ping"))
    assert len(opened) == 2 and not opened[1].closed()


async def test_a_session_whose_statement_ran_out_of_time_is_closed_not_kept(db, monkeypatch):
    opened = _counting(db, monkeypatch)
    db.timeout = 0.3  # an unbudgeted statement's deadline
    with pytest.raises(Unavailable):
        await db._statement("slow", {}, neo4j.READ_ACCESS, query=neo4j.Query(SLOW),
                            budgeted=False)
    [cut] = opened
    assert cut.closed()
    db.timeout = 10.0
    await db.read("health/ping")
    assert len(opened) == 2 and not opened[1].closed()


def _slow_statement(db):
    return db._statement("slow", {}, neo4j.READ_ACCESS, query=neo4j.Query(SLOW), budgeted=False)


def _slow_transaction(db):
    async def slow(tx):
        return await tx._tx.run(SLOW)

    return db.transaction(slow)


@pytest.mark.parametrize(("slow", "then"), [
    (_slow_statement, lambda db: db.read("health/ping")),
    (_slow_transaction, lambda db: db.transaction(lambda tx: tx.run("health/ping"))),
], ids=["statement", "transaction"])
async def test_a_cancelled_session_is_closed_and_its_connection_freed(
        settings, monkeypatch, slow, then):
    # One pooled connection: what comes next runs only if the cancelled one let it go.
    db = connect(dataclasses.replace(settings, neo4j_pool_size=1, neo4j_pool_warm=1,
                                     neo4j_acquire_timeout=2.0))
    opened = _counting(db, monkeypatch)
    before = _in_use()
    try:
        task = asyncio.create_task(slow(db))
        await asyncio.sleep(0.5)
        assert _in_use() == before + 1  # the statement is running on the server
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        [cancelled] = opened
        assert cancelled.closed()
        assert _in_use() == before
        await then(db)
        assert len(opened) == 2 and not opened[1].closed()
    finally:
        await db.close()


async def test_a_statement_ending_after_the_close_does_not_leave_its_session_kept(
        db, monkeypatch):
    opened = _counting(db, monkeypatch)
    await db.read("health/ping")
    for idle in db._idle.values():
        await idle.retire()  # what `Database.close` does first
    await db.read("health/ping")
    assert len(opened) == 2
    assert all(session.closed() for session in opened)


async def test_closing_the_database_closes_the_sessions_it_kept(settings, monkeypatch):
    db = connect(settings)
    opened = _counting(db, monkeypatch)
    try:
        await db.read("health/ping")
        await db.write_unaudited("health/ping")
    finally:
        await db.close()
    assert len(opened) == 2
    assert all(session.closed() for session in opened)


async def test_sessions_kept_under_another_bookmark_manager_are_closed(db, monkeypatch):
    opened = _counting(db, monkeypatch)
    await db.read("health/ping")
    [first] = opened  # under the driver's manager: the edition is not known yet
    db.bookmarks = None  # as learning that the server is Community does
    await db.read("health/ping")
    assert first.closed()
    assert len(opened) == 2 and not opened[1].closed()
    await db.read("health/ping")
    assert len(opened) == 2  # the new one is kept


def _runs_with_bookmarks(caplog) -> list[str]:
    """The RUN and BEGIN messages sent with bookmarks (a transaction's go with its BEGIN)."""
    return [r.getMessage() for r in caplog.records
            if ("C: RUN" in r.getMessage() or "C: BEGIN" in r.getMessage())
            and "'bookmarks'" in r.getMessage()]


async def test_on_one_server_a_kept_session_sends_no_bookmark(db, caplog):
    await db.apply_schema()  # the server's edition is read
    if db.bookmarks is not None:
        pytest.skip("not a Community server: the process's bookmark manager is used")
    caplog.set_level(logging.DEBUG, logger="neo4j")
    for _ in range(3):
        await db.read("health/ping")
        await db.write_unaudited("health/ping")
        await db.transaction(lambda tx: tx.run("health/ping"))
    assert not _runs_with_bookmarks(caplog)
    # The check can fail: a session kept without a manager sends its own last bookmark.
    async with db.driver.session(database=db.database) as plain:
        for _ in range(2):
            await (await plain.run("RETURN 1")).consume()
    assert len(_runs_with_bookmarks(caplog)) == 1


async def test_a_transaction_sends_its_begin_with_its_first_statement(db, caplog):
    caplog.set_level(logging.DEBUG, logger="neo4j")
    await db.transaction(lambda tx: tx.run("health/ping"))
    sent = [m for m in (r.getMessage() for r in caplog.records) if " C: " in m or " S: " in m]
    begin = next(i for i, m in enumerate(sent) if "C: BEGIN" in m)
    run = next(i for i, m in enumerate(sent) if "C: RUN" in m)
    # Nothing answered between them: the BEGIN did not wait for its own reply.
    assert begin < run and not [m for m in sent[begin:run] if " S: " in m]
    assert any("C: COMMIT" in m for m in sent[run:])


async def test_no_more_than_the_limit_are_kept(db):
    idle = IdleSessions(limit=1)
    one, two = db.session(), db.session()
    assert idle.give(one) is True
    assert idle.give(two) is False
    assert idle.take() is one
    assert idle.take() is None
    await one.close()
    await two.close()
