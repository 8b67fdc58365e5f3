"""The driver's `C: RUN` debug line: built only when the driver logs at DEBUG
(repository/database.py `_quiet_run_debug_line`). Built regardless, it turned every statement's
parameters into text on every statement, to be dropped."""

from __future__ import annotations

import logging

from factories import database


class _Watched(str):
    """A parameter value that counts the times it is turned into its `repr`."""

    seen = 0

    def __repr__(self) -> str:
        type(self).seen += 1
        return super().__repr__()


async def _authenticate_with(client, value: str) -> None:
    db = database(client.server.app)
    await db.read("auth/authenticate", hash=value)


async def test_a_statement_s_parameters_are_not_made_text_while_the_driver_logs_no_debug(
        client, caplog):
    caplog.set_level(logging.WARNING, logger="neo4j")
    _Watched.seen = 0
    await _authenticate_with(client, _Watched("no-such-digest"))
    assert _Watched.seen == 0


async def test_the_debug_line_still_shows_the_parameters_when_the_driver_logs_debug(
        client, caplog):
    caplog.set_level(logging.DEBUG, logger="neo4j")
    _Watched.seen = 0
    await _authenticate_with(client, _Watched("a-digest-to-find-in-the-line"))
    assert _Watched.seen >= 1
    runs = [r.getMessage() for r in caplog.records if "C: RUN" in r.getMessage()]
    assert any("'a-digest-to-find-in-the-line'" in line for line in runs)
