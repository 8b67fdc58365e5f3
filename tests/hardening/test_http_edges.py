"""Issue #18.4 (slow clients), #18.5 (a client hanging up is not our error), #18.10 (the
parser's own errors), against the real server's connection handler."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest
from factories import without_ids

from .conftest import in_progress, raw_exchange, read_response, wait_ready

CARD_NUMBER = b"4242424242424242"


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def assert_problem(raw: bytes, status: int) -> dict:
    got, headers, body = parse(raw)
    assert got == status, raw[:300]
    assert headers["content-type"] == "application/problem+json"
    problem = orjson.loads(body)
    assert problem["status"] == status
    assert problem["trace_id"] == headers["svc-trace-id"]
    assert headers["server"] == "vaultgraph"  # not aiohttp's name and version
    assert CARD_NUMBER not in raw
    return problem


@pytest.mark.parametrize(("request_bytes", "status"), [
    # A chunk size that is not hex, made of a card number.
    (b"POST /tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n" + CARD_NUMBER + b"zz\r\nabc\r\n0\r\n\r\n", 400),
    # A request line far over the limit, carrying the number in its path.
    (b"GET /tokens/" + CARD_NUMBER * 1200 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    # A header over the limit.
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Card: " + CARD_NUMBER * 1200 + b"\r\n\r\n", 400),
    # Not HTTP at all.
    (b"\x16\x03\x01" + CARD_NUMBER + b"\r\n\r\n", 400),
])
async def test_malformed_http_is_a_problem_that_echoes_nothing(serve, request_bytes, status):
    served = await serve()
    # Started in full before the exchange: a drain right after the start cancels start-up work
    # while the driver opens its first connections, and the socket such a cancelled open left
    # was collected (a ResourceWarning) during a later test, now and then.
    await wait_ready(served)
    problem = assert_problem(await raw_exchange(served.port, request_bytes), status)
    assert problem["detail"] == "The request is not valid HTTP."


# With an Idempotency-Key the body is first read by that middleware: the same answers.
IDEMPOTENT = pytest.mark.parametrize("extra", [b"", b"Idempotency-Key: edge-1\r\n"])


@IDEMPOTENT
async def test_a_bad_chunk_inside_an_authenticated_create_echoes_nothing(serve, tenant, extra):
    served = await serve()
    await wait_ready(served)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(
        b"POST /tokens HTTP/1.1\r\nHost: x\r\n" + extra + b"SVC-API-KEY: " + tenant.key.encode() +
        b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"10\r\n{\"type\": \"card\",\r\n4242-4242-4242-4242\r\n\r\n")  # not a chunk size
    await writer.drain()
    try:
        raw = await read_response(reader)
    finally:
        writer.close()
    assert "4242" not in without_ids(raw)
    assert assert_problem(raw, 400)["detail"] in (
        "The request body is not valid HTTP.", "The request is not valid HTTP.")


async def test_a_request_head_sent_too_slowly_is_cut_off(serve):
    served = await serve(header_read_timeout=0.5)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: 1")  # never finished
    await writer.drain()
    try:
        raw = await asyncio.wait_for(reader.read(), 10)  # the server closes: read() ends
    finally:
        writer.close()
    problem = assert_problem(raw, 408)
    assert problem["detail"] == "The request head was not received in time."


@IDEMPOTENT
async def test_a_body_sent_too_slowly_is_cut_off(serve, tenant, extra):
    served = await serve(body_read_timeout=0.5)
    await wait_ready(served)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"POST /tokens HTTP/1.1\r\nHost: x\r\n" + extra + b"SVC-API-KEY: " +
                 tenant.key.encode() +
                 b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                 b'{"type": "c')  # 11 of the 1,000 bytes promised
    await writer.drain()
    try:
        raw = await asyncio.wait_for(read_response(reader), 30)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # and the server closes it
    finally:
        writer.close()
    problem = assert_problem(raw, 408)
    assert parse(raw)[1]["connection"] == "close"
    assert problem["detail"] == "The request body was not received in time."


async def test_a_client_hanging_up_mid_body_is_not_an_unhandled_error(serve, tenant, caplog):
    served = await serve()
    await wait_ready(served)
    _reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    with caplog.at_level(logging.INFO):
        writer.write(b"POST /tokens HTTP/1.1\r\nHost: x\r\nSVC-API-KEY: " + tenant.key.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                     b'{"type": "c')
        await writer.drain()
        await in_progress(1)  # the handler is reading the body
        writer.transport.abort()
        for _ in range(100):
            if any(r.msg == "request" for r in caplog.records):
                break
            await asyncio.sleep(0.05)
    assert any(r.msg == "client disconnected" for r in caplog.records)
    assert [(r.name, r.msg) for r in caplog.records if r.levelno >= logging.WARNING] == []


async def _send_mislabelled_body(port: int, line: bytes, key: bytes, extra: bytes = b"",
                                 encoding: bytes = b"gzip") -> bytes:
    """A body that says it is `encoding` and is not (a card number, not compressed): the
    answer, then whatever else the server sends until it closes the connection."""
    body = b'{"type": "card", "data": {"number": "' + CARD_NUMBER + b'"}}'
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(line + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"SVC-API-KEY: " + key +
                 b"\r\nContent-Type: application/json\r\nContent-Encoding: " + encoding +
                 b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()
    try:
        raw = await read_response(reader)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # and the server closes it
    finally:
        writer.close()
    return raw


def _no_error_logged(caplog) -> None:
    """Nothing at error level, no stack trace at any level (aiohttp's "Unhandled exception"
    once read what the handler left of the body)."""
    assert [(r.name, r.msg) for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [(r.name, r.msg) for r in caplog.records if r.exc_info] == []


@IDEMPOTENT
@pytest.mark.parametrize("route", [b"POST /tokens", b"POST /tokens/search"])
async def test_a_body_not_in_its_content_encoding_is_a_400(serve, tenant, caplog, extra, route):
    served = await serve()
    await wait_ready(served)
    with caplog.at_level(logging.INFO):
        raw = await _send_mislabelled_body(served.port, route, tenant.key.encode(), extra)
    problem = assert_problem(raw, 400)
    assert problem["detail"] == "The request body is not valid HTTP."
    assert parse(raw)[1]["connection"] == "close"
    _no_error_logged(caplog)


@pytest.mark.parametrize(("line", "status"), [
    # Refused before its body is read: a bad key, and the proxy, which takes no encoded body.
    (b"POST /tokens", 401),
    (b"POST /proxy/00000000-0000-0000-0000-000000000000/x", 415)])
async def test_a_body_not_in_its_content_encoding_left_unread_logs_no_error(
        serve, tenant, caplog, line, status):
    served = await serve()
    await wait_ready(served)
    key = b"bogus" if status == 401 else tenant.key.encode()
    with caplog.at_level(logging.INFO):
        raw = await _send_mislabelled_body(served.port, line, key)
    assert_problem(raw, status)
    _no_error_logged(caplog)
    assert any(r.msg == "malformed request body" for r in caplog.records)


@pytest.mark.parametrize("names", [(b"SVC-API-KEY", b"SVC-API-KEY"),
                                   (b"svc-api-key", b"Svc-Api-Key")])
async def test_a_key_sent_twice_is_refused_whichever_is_good(serve, tenant, names):
    # As a client or a proxy in front may send it, in any case: the one 401 of a bad key.
    served = await serve()
    await wait_ready(served)
    good, bogus = tenant.key.encode(), b"vg_" + b"A" * 43
    for first, second in ((good, bogus), (bogus, good), (good, good)):
        raw = await raw_exchange(served.port, (
            b"GET /applications/self HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
            names[0] + b": " + first + b"\r\n" + names[1] + b": " + second + b"\r\n\r\n"))
        problem = assert_problem(raw, 401)
        assert problem["detail"] == "A valid API key is required in the SVC-API-KEY header."
        assert good not in raw
