"""vaultgraph.client against the real service (tokens, children, links, parents, graph,
errors), and its retry policy against small real HTTP servers that answer 429/503."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import neo4j
import pytest
from aiohttp import web

from vaultgraph.client import (
    NO_RETRIES,
    ApiError,
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    RateLimited,
    RetryPolicy,
    TransportError,
    Unauthorized,
    UnprocessableContent,
    UnsupportedMediaType,
    _core,
)
from vaultgraph.testing.service import free_port

CARD = {"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030}


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def vg(service, service_tenant):
    with Client(service.url, service_tenant.key) as client:
        yield client


def test_tokens_round_trip(vg):
    cust = uid("cust")
    created = vg.create_token("card", CARD, id=cust, metadata={"customer_id": cust})
    assert created["id"] == cust and created["type"] == "card"
    got = vg.get_token(cust)
    assert got["data"]["number"] == CARD["number"]          # the admin key reveals
    page = vg.list_tokens(metadata={"customer_id": cust})
    assert [t["id"] for t in page["data"]] == [cust]
    updated = vg.update_token(cust, {"metadata": {"tier": "gold"}})
    assert updated["metadata"] == {"customer_id": cust, "tier": "gold"}
    vg.delete_token(cust)
    with pytest.raises(NotFound) as err:
        vg.get_token(cust)
    assert err.value.status == 404 and err.value.problem["status"] == 404
    assert err.value.type == "https://vaultgraph.dev/problems/not-found"
    assert err.value.trace_id and err.value.trace_id in str(err.value)


def test_iter_tokens_follows_pages(vg):
    tag = uid("batch")
    ids = sorted(uid("t") for _ in range(5))
    for i in ids:
        vg.create_token("token", {"v": i}, id=i, metadata={"batch": tag})
    assert [t["id"] for t in vg.iter_tokens(metadata={"batch": tag}, size=2)] == ids


def test_graph_routes(vg):
    cust, visa, bank = uid("cust"), uid("visa"), uid("bank")
    vg.create_token("token", {"name": "Ada"}, id=cust)
    child = vg.create_child(cust, "card", CARD, id=visa)
    assert child["id"] == visa and "data" not in child
    vg.create_token("bank", {"routing_number": "021000021", "account_number": "7392048561"},
                    id=bank)
    link = vg.link(cust, bank)
    assert link is not None and (link["parent_id"], link["child_id"]) == (cust, bank)
    assert vg.link(cust, bank) is None                      # 204: already linked
    assert sorted(t["id"] for t in vg.children(cust)["data"]) == sorted([visa, bank])
    assert [t["id"] for t in vg.children(cust, types=["card"])["data"]] == [visa]
    assert [t["id"] for t in vg.parents(bank)["data"]] == [cust]
    graph = vg.graph(visa, depth=2, direction="both")
    assert {n["id"] for n in graph["nodes"]} == {cust, visa, bank}
    assert {(e["parent_id"], e["child_id"]) for e in graph["edges"]} == {(cust, visa),
                                                                         (cust, bank)}
    vg.unlink(cust, bank)
    assert [t["id"] for t in vg.children(cust)["data"]] == [visa]


def test_search_and_the_audit_trail(vg):
    cust = uid("cust")
    vg.create_token("token", "customer", id=cust)
    card = vg.create_child(cust, "card", CARD, id=uid("card"))
    vg.create_child(cust, "token", "not a card", id=uid("other"))
    found = vg.search(f'type:card AND parent:"{cust}"', size=10)
    assert [t["id"] for t in found["data"]] == [card["id"]]
    assert found["data"][0]["data"]["number"] == CARD["number"]
    vg.get_token(card["id"])
    events = vg.logs(token_id=card["id"])["data"]
    assert [(e["route"], e["outcome"]) for e in events][:2] == [
        ("GET /tokens/{id}", "success"), ("POST /tokens/search", "success")]
    assert ("POST /tokens/{parent_id}/children", "success") in [
        (e["route"], e["outcome"]) for e in events]
    assert [e["route"] for e in vg.logs(token_id=card["id"], size=1)["data"]] == [
        "GET /tokens/{id}"]


def test_tokenize_detokenize_and_idempotent_retries(vg):
    key = uid("idem")
    first = vg.tokenize({"card": {"type": "card", "data": CARD},
                         "bad": {"type": "card", "data": {"number": "4242424242424241"}}},
                        idempotency_key=key)
    assert first["card"]["type"] == "card" and first["bad"]["status"] == 400
    again = vg.tokenize({"card": {"type": "card", "data": CARD},
                         "bad": {"type": "card", "data": {"number": "4242424242424241"}}},
                        idempotency_key=key)
    assert again["card"]["id"] == first["card"]["id"]  # replayed, not created twice
    out = vg.detokenize({"pan": "{{ " + first["card"]["id"] + " }}", "n": 1})
    assert out == {"pan": CARD, "n": 1}


async def test_async_search(service, service_tenant):
    async with AsyncClient(service.url, service_tenant.key) as vg:
        cust = uid("cust")
        await vg.create_token("token", "customer", id=cust, metadata={"segment": cust})
        found = await vg.search(f'metadata.segment:"{cust}"')
        assert [t["id"] for t in found["data"]] == [cust]


def test_ids_are_path_escaped(vg):
    # Unescaped, "../tokens" would be normalised to GET /tokens and answer a list.
    with pytest.raises(NotFound):
        vg.get_token("../tokens")
    with pytest.raises(NotFound):
        vg.get_token("x?size=1")


def test_errors_are_typed_and_carry_the_problem(vg, service):
    with pytest.raises(BadRequest) as err:
        vg.graph(uid("x"), depth=99)
    assert "depth" in err.value.errors or "depth" in (err.value.detail or "")
    with pytest.raises(BadRequest) as err:
        vg.create_token("card", {"number": "not a card 4111"}, id=uid("bad"))
    assert "not a card 4111" not in json.dumps(err.value.problem)   # input never echoed
    assert "not a card 4111" not in str(err.value)
    # What was wrong is in the message a traceback shows: the detail, and how many fields
    # (their names can be input: they stay on `.errors`).
    fields = len(err.value.errors)
    assert fields and str(err.value).startswith(
        f"400 Bad Request: {err.value.detail} ({fields} field{'s' if fields > 1 else ''}: "
        "see .errors) (trace id ")
    with pytest.raises(BadRequest) as err:
        vg.create_token("card", CARD, id=uid("k"), metadata={"alice@example.com": 1})
    assert "alice@example.com" in err.value.errors or any(
        "alice@example.com" in name for name in err.value.errors)
    assert "alice@example.com" not in str(err.value)
    with Client(service.url, "vg_not-a-key", retry=NO_RETRIES) as stranger:
        with pytest.raises(Unauthorized) as err:
            stranger.list_tokens()
    assert err.value.trace_id


def test_trace_id_sent_is_the_one_reported(vg):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"   # a W3C trace id: the service keeps it
    with pytest.raises(NotFound) as err:
        vg._send("GET", f"/tokens/{uid('missing')}", trace_id=trace)
    assert err.value.trace_id == trace
    with pytest.raises(NotFound) as err:   # free text is replaced by a trace id of its own
        vg._send("GET", f"/tokens/{uid('missing')}", trace_id="client-trace-1")
    assert err.value.trace_id != "client-trace-1" and len(err.value.trace_id) == 32


async def test_async_client_round_trip(service, service_tenant):
    async with AsyncClient(service.url, service_tenant.key) as vg:
        cust, visa = uid("cust"), uid("visa")
        await vg.create_token("token", {"name": "Ada"}, id=cust)
        await vg.create_child(cust, "card", CARD, id=visa)
        assert (await vg.get_token(visa))["data"]["number"] == CARD["number"]
        assert [t["id"] for t in (await vg.parents(visa))["data"]] == [cust]
        graph = await vg.graph(cust)
        assert {n["id"] for n in graph["nodes"]} == {cust, visa}
        assert [t["id"] async for t in vg.iter_tokens(ids=[cust, visa])] == sorted([cust, visa])
        await vg.unlink(cust, visa)
        await vg.delete_token(visa)
        with pytest.raises(NotFound):
            await vg.get_token(visa)


# -- retries: real servers that refuse first ----------------------------------------------

async def test_async_retries_honour_retry_after_and_keep_the_idempotency_key(aiohttp_server):
    seen: list[tuple[str, str | None]] = []
    answers = [(503, "2"), (429, "1"), (201, None)]

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("Idempotency-Key")))
        status, retry_after = answers[len(seen) - 1]
        if status != 201:
            return web.json_response({"title": "busy", "status": status}, status=status,
                                     headers={"Retry-After": retry_after,
                                              "SVC-TRACE-ID": "t-1"},
                                     content_type="application/problem+json")
        return web.json_response({"id": "x", "type": "token"}, status=201)

    app = web.Application()
    app.router.add_post("/tokens", handler)
    server = await aiohttp_server(app)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with AsyncClient(str(server.make_url("")), "k", sleep=sleep) as vg:
        assert (await vg.create_token("token", {"v": 1}))["id"] == "x"
    assert slept == [2.0, 1.0]
    keys = {key for _, key in seen}
    assert len(seen) == 3 and len(keys) == 1 and None not in keys

    seen.clear()
    answers[:] = [(429, "3")] * 2
    async with AsyncClient(str(server.make_url("")), "k", sleep=sleep,
                           retry=RetryPolicy(attempts=2)) as vg:
        with pytest.raises(RateLimited) as err:
            await vg.create_token("token", {"v": 1}, idempotency_key="mine")
    assert err.value.retry_after == 3.0 and err.value.trace_id == "t-1"
    assert [key for _, key in seen] == ["mine", "mine"]


class _Flaky(BaseHTTPRequestHandler):
    answers: list[int] = []
    seen: list[str] = []

    def do_GET(self):
        self.seen.append(self.path)
        status = self.answers.pop(0)
        body = json.dumps({"title": "t", "status": status} if status >= 400 else
                          {"id": "x", "type": "token"}).encode()
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")  # in the past: 0
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PATCH = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_sync_retries_and_what_is_not_retried(flaky_server):
    slept: list[float] = []
    _Flaky.seen.clear()
    _Flaky.answers[:] = [503, 200]
    with Client(flaky_server, "k", sleep=slept.append) as vg:
        assert vg.get_token("x")["id"] == "x"
        assert slept == [0.0]                       # an HTTP-date Retry-After in the past
        _Flaky.answers[:] = [502]                   # a PATCH is not retried on 502
        with pytest.raises(Exception) as err:
            vg.update_token("x", {"metadata": {"a": "b"}})
        assert err.value.status == 502
        _Flaky.answers[:] = [415]
        with pytest.raises(UnsupportedMediaType):
            vg.get_token("x")
    assert _Flaky.answers == []


def test_transport_errors_are_retried_then_raised():
    slept: list[float] = []
    port = free_port()                              # nothing listens there
    with Client(f"http://127.0.0.1:{port}", "k", sleep=slept.append,
                retry=RetryPolicy(attempts=3, backoff=0.01)) as vg:
        with pytest.raises(TransportError):
            vg.list_tokens()
    assert len(slept) == 2


# -- what a retry after a lost answer means: DELETE and PATCH -------------------------------

def _problem(status: int) -> httpx.Response:
    return httpx.Response(status, json={"title": "t", "status": status},
                          headers={"Content-Type": "application/problem+json"})


def _scripted(answers: list):
    """A transport answering in order: an exception class is raised (the request may or may
    not have reached the service), a status is answered as a problem (204 empty)."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        answer = answers.pop(0)
        if isinstance(answer, type):
            raise answer("lost", request=request)
        return httpx.Response(204) if answer == 204 else _problem(answer)

    return handle, seen


@pytest.mark.parametrize("first", [httpx.ReadTimeout, httpx.RemoteProtocolError, 503, 502, 504])
@pytest.mark.parametrize("call", ["delete_token", "unlink"])
def test_a_retried_delete_that_finds_nothing_is_done(first, call):
    """The first attempt may have deleted (a read timeout, or 503: a committed write whose
    answer was lost, docs/audit.md); the retry's 404 then says the token or link is gone,
    which is what was asked: no NotFound for a delete that happened."""
    handle, seen = _scripted([first, 404])
    with Client("http://vault.test", "k", sleep=lambda s: None,
                transport=httpx.MockTransport(handle)) as vg:
        args = ("p", "c") if call == "unlink" else ("x",)
        assert getattr(vg, call)(*args) is None
    assert seen == ["DELETE", "DELETE"]


@pytest.mark.parametrize("answers", [[404], [429, 404]])
def test_a_delete_that_did_nothing_still_says_not_found(answers):
    """A first 404, or one after a 429 (refused before any work), is the token's absence."""
    handle, _ = _scripted(answers)
    with Client("http://vault.test", "k", sleep=lambda s: None,
                transport=httpx.MockTransport(handle)) as vg:
        with pytest.raises(NotFound):
            vg.delete_token("x")


async def test_async_retried_delete_that_finds_nothing_is_done():
    handle, seen = _scripted([httpx.ReadTimeout, 503, 404])

    async def nap(seconds: float) -> None:
        pass

    async with AsyncClient("http://vault.test", "k", sleep=nap,
                           transport=httpx.MockTransport(handle)) as vg:
        assert await vg.delete_token("x") is None
    handle2, _ = _scripted([404])
    async with AsyncClient("http://vault.test", "k", sleep=nap,
                           transport=httpx.MockTransport(handle2)) as vg:
        with pytest.raises(NotFound):
            await vg.unlink("p", "c")
    assert seen == ["DELETE"] * 3


@pytest.mark.parametrize("error", [httpx.ReadTimeout, httpx.ConnectError])
def test_a_patch_is_not_retried_after_a_connection_error(error):
    """docs/python-client.md: PATCH is retried on 429 only. A merge patch carries no
    Idempotency-Key, and replaying it could undo a change made in between."""
    handle, seen = _scripted([error, 200])
    with Client("http://vault.test", "k", sleep=lambda s: None,
                transport=httpx.MockTransport(handle)) as vg:
        with pytest.raises(TransportError):
            vg.update_token("x", {"metadata": {"a": "b"}})
    assert seen == ["PATCH"]


def test_a_patch_is_not_retried_after_a_503():
    # The service answers 503 for a write Neo4j committed whose answer was lost
    # (docs/audit.md): a PATCH is not run again, as after a connection error.
    handle, seen = _scripted([503, 200])
    with Client("http://vault.test", "k", sleep=lambda s: None,
                transport=httpx.MockTransport(handle)) as vg:
        with pytest.raises(Exception) as err:
            vg.update_token("x", {"metadata": {"a": "b"}})
    assert err.value.status == 503 and seen == ["PATCH"]


async def test_async_patch_is_not_retried_after_a_connection_error():
    handle, seen = _scripted([httpx.ReadTimeout, 200])

    async def nap(seconds: float) -> None:
        pass

    async with AsyncClient("http://vault.test", "k", sleep=nap,
                           transport=httpx.MockTransport(handle)) as vg:
        with pytest.raises(TransportError):
            await vg.update_token("x", {"metadata": {"a": "b"}})
    assert seen == ["PATCH"]


# -- webhooks ----------------------------------------------------------------------------------

def test_webhook_management(vg):
    hook = vg.create_webhook("https://hooks.example.com/in", events=["token.created"],
                             containers=["/pci/"], description="orders")
    assert hook["secret"].startswith("whsec_") and hook["containers"] == ["/pci/"]
    assert "secret" not in vg.get_webhook(hook["id"])
    assert hook["id"] in [w["id"] for w in vg.list_webhooks(size=100)["data"]]
    assert vg.update_webhook(hook["id"], {"status": "disabled"})["status"] == "disabled"
    assert vg.rotate_webhook_secret(hook["id"])["secret"] != hook["secret"]
    assert vg.test_webhook(hook["id"])["event_id"]
    assert vg.webhook_deliveries(hook["id"])["data"] == []  # disabled: the test event waits
    vg.delete_webhook(hook["id"])
    with pytest.raises(NotFound):
        vg.get_webhook(hook["id"])


async def test_async_webhook_management(service, service_tenant):
    async with AsyncClient(service.url, service_tenant.key) as vg:
        hook = await vg.create_webhook("https://hooks.example.com/in", events=["*"])
        assert (await vg.get_webhook(hook["id"]))["events"] == ["*"]
        await vg.delete_webhook(hook["id"])
        with pytest.raises(NotFound):
            await vg.get_webhook(hook["id"])


# -- a retry that finds this call's own first attempt still running ----------------------------

class _Recording(httpx.HTTPTransport):
    """The real transport, noting what each attempt got: its status, or the error raised."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[int | str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = super().handle_request(request)
        except httpx.TransportError as exc:
            self.got.append(type(exc).__name__)
            raise
        self.got.append(response.status_code)
        return response


def test_a_retry_that_finds_its_first_attempt_still_running_waits_for_its_answer(
        vg, service, service_tenant, settings):
    """The first attempt times out while the service still runs it: its link waits on a lock
    this test holds on the parent token (and holds the Idempotency-Key's entry meanwhile). The
    retry, under the same key, waits for that entry; the lock is let go while it waits, the
    link is made, and the retry is told 409 "still being processed" (the first request is
    not answered yet). That is this call's own request: the client waits and tries again, and
    gets the first attempt's answer (a replay) instead of raising Conflict for a link that was
    made."""
    parent, child = uid("cust"), uid("card")
    vg.create_token("token", "customer", id=parent)
    vg.create_token("token", "card", id=child)
    transport = _Recording()
    slept: list[float] = []
    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=(
            settings.neo4j_user, settings.resolved_neo4j_password())) as driver, \
            driver.session(database=settings.neo4j_database) as session:
        held = session.begin_transaction()
        held.run("MATCH (t:Token {tenant_id: $tenant, id: $id}) SET t._lock = true",
                 tenant=service_tenant.tenant_id, id=parent).consume()
        release = threading.Timer(0.5, held.rollback)

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            if len(slept) == 1:   # the lock goes while the retry waits for the entry
                release.start()
            else:
                time.sleep(0.5)

        with Client(service.url, service_tenant.key, timeout=2.0, sleep=sleep,
                    transport=transport) as impatient:
            try:
                link = impatient.link(parent, child)
            finally:
                if release.is_alive():
                    release.join()
                if not held.closed():
                    held.rollback()
    # The retry is told 409 while the first request has not stored its answer; when it has by
    # then (a matter of timing), the retry is its replay at once. Either way no Conflict: the
    # 409's own handling is pinned by the simulated answers below.
    assert transport.got[0] == "ReadTimeout" and transport.got[-1] == 201, transport.got
    assert set(transport.got[1:-1]) <= {409}, transport.got
    assert (link["parent_id"], link["child_id"]) == (parent, child)
    assert [t["id"] for t in vg.children(parent)["data"]] == [child]


def _in_flight(retry_after: str | None = None, *, typed: bool = False) -> httpx.Response:
    """The service's in-flight 409: under a type of its own (`typed`), or under every 409's
    type with the detail saying so."""
    problem = ({"type": _core.IN_FLIGHT_TYPE, "detail": "The first request with this "
                "Idempotency-Key is still running; retry after the time in Retry-After."}
               if typed else {"type": "https://vaultgraph.dev/problems/conflict",
                              "detail": _core.IN_FLIGHT_DETAIL})
    return httpx.Response(409, json={**problem, "title": "Conflict", "status": 409},
                          headers={"Content-Type": "application/problem+json",
                                   **({"Retry-After": retry_after} if retry_after else {})})


def test_an_in_flight_409_is_waited_for_only_after_an_attempt_that_may_have_run():
    """Retry-After is honoured; a first attempt's in-flight 409 is another request's key (the
    caller's own concurrent call), and every other 409 (an answer lost, a stale replay) is
    final: both raise Conflict."""
    def scripted(answers: list):
        seen: list[str | None] = []

        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(request.headers.get("Idempotency-Key"))
            answer = answers.pop(0)
            if isinstance(answer, type):
                raise answer("lost", request=request)
            return answer

        return httpx.MockTransport(handle), seen

    slept: list[float] = []
    transport, seen = scripted([httpx.ReadTimeout, _in_flight("3", typed=True),
                                httpx.Response(201, json={"id": "x"})])
    with Client("http://vault.test", "k", sleep=slept.append, transport=transport) as vg:
        assert vg.tokenize([{"type": "token", "data": 1}], idempotency_key="k1") == {"id": "x"}
    assert slept[1:] == [3.0] and seen == ["k1"] * 3

    transport, seen = scripted([_in_flight("3", typed=True), httpx.Response(201, json={})])
    with Client("http://vault.test", "k", sleep=slept.append, transport=transport) as vg:
        with pytest.raises(Conflict):
            vg.tokenize([], idempotency_key="k2")
    assert len(seen) == 1

    lost = httpx.Response(409, json={"title": "Conflict", "status": 409,
                                     "detail": "The first request … answer was lost; …"})
    transport, seen = scripted([httpx.ReadTimeout, lost, httpx.Response(201, json={})])
    with Client("http://vault.test", "k", sleep=slept.append, transport=transport) as vg:
        with pytest.raises(Conflict):
            vg.tokenize([], idempotency_key="k3")
    assert len(seen) == 2


async def test_the_async_client_waits_for_its_own_running_request():
    answers: list = [httpx.ConnectTimeout, _in_flight(), _in_flight("1"),
                     httpx.Response(200, json=[{"id": "x"}])]

    def handle(request: httpx.Request) -> httpx.Response:
        answer = answers.pop(0)
        if isinstance(answer, type):
            raise answer("lost", request=request)
        return answer

    slept: list[float] = []

    async def nap(seconds: float) -> None:
        slept.append(seconds)

    async with AsyncClient("http://vault.test", "k", sleep=nap,
                           transport=httpx.MockTransport(handle)) as vg:
        assert await vg.tokenize([{"type": "token", "data": 1}]) == [{"id": "x"}]
    assert len(slept) == 3 and slept[2] == 1.0 and answers == []


# -- Idempotency-Key: every POST takes the caller's; a key reused is its own error -------------

def test_every_post_that_writes_takes_the_callers_idempotency_key(vg):
    """Sent twice under one key, each is done once: the second answer is the first's replay."""
    url = f"https://hooks.example.com/{uid('in')}"
    key = uid("idem")
    hook = vg.create_webhook(url, events=["token.created"], idempotency_key=key)
    again = vg.create_webhook(url, events=["token.created"], idempotency_key=key)
    assert again["id"] == hook["id"]
    assert [w["id"] for w in vg.list_webhooks(size=100)["data"] if w["url"] == url] == [
        hook["id"]]
    key = uid("idem")
    rotated = vg.rotate_webhook_secret(hook["id"], idempotency_key=key)
    replayed = vg.rotate_webhook_secret(hook["id"], idempotency_key=key)
    assert replayed == rotated  # the same secret: not rotated a second time
    key = uid("idem")
    event = vg.test_webhook(hook["id"], idempotency_key=key)["event_id"]
    assert vg.test_webhook(hook["id"], idempotency_key=key)["event_id"] == event
    vg.delete_webhook(hook["id"])

    parent, child = uid("cust"), uid("card")
    vg.create_token("token", "customer", id=parent)
    vg.create_token("token", "card", id=child)
    key = uid("idem")
    link = vg.link(parent, child, idempotency_key=key)
    assert link is not None and vg.link(parent, child, idempotency_key=key) == link
    assert vg.link(parent, child) is None          # another key: already linked


async def test_the_async_client_takes_the_callers_idempotency_key_too(service, service_tenant):
    async with AsyncClient(service.url, service_tenant.key) as vg:
        url = f"https://hooks.example.com/{uid('in')}"
        key = uid("idem")
        hook = await vg.create_webhook(url, events=["*"], idempotency_key=key)
        assert (await vg.create_webhook(url, events=["*"], idempotency_key=key))["id"] == hook[
            "id"]
        key = uid("idem")
        rotated = await vg.rotate_webhook_secret(hook["id"], idempotency_key=key)
        replayed = await vg.rotate_webhook_secret(hook["id"], idempotency_key=key)
        assert replayed == rotated
        key = uid("idem")
        event = (await vg.test_webhook(hook["id"], idempotency_key=key))["event_id"]
        assert (await vg.test_webhook(hook["id"], idempotency_key=key))["event_id"] == event
        await vg.delete_webhook(hook["id"])
        parent, child = uid("cust"), uid("card")
        await vg.create_token("token", "customer", id=parent)
        await vg.create_token("token", "card", id=child)
        key = uid("idem")
        link = await vg.link(parent, child, idempotency_key=key)
        assert link is not None and await vg.link(parent, child, idempotency_key=key) == link


def test_a_key_reused_with_another_request_raises_its_own_error(vg):
    key = uid("idem")
    vg.create_token("token", {"v": 1}, idempotency_key=key)
    with pytest.raises(UnprocessableContent) as err:
        vg.create_token("token", {"v": 2}, idempotency_key=key)
    assert isinstance(err.value, ApiError) and err.value.status == 422
    assert err.value.type == "https://vaultgraph.dev/problems/idempotency-key-reused"
