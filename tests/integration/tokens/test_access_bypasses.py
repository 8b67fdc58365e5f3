"""Access control holds on every container, dedup never merges into what the caller cannot see,
fingerprints are no oracle, masks cannot stall the process, and a revocation is never undone
by a racing look-up (docs/security.md). Each test failed on the code before its fix.

The narrow application is the one the review used: one rule on `/pci/`, mask, with token:read,
token:create and token:update.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from factories import database

from vaultgraph.api.typedefs import services_key
from vaultgraph.repository.auth import AuthRepository
from vaultgraph.services.authentication import Authenticator

from ._support import (
    CALLER_WRITTEN,
    CALLER_WRITTEN_DIRECT,
    MASTERCARD,
    VISA,
    card,
    cypher,
    rule,
)

NARROW = ["token:read", "token:create", "token:update"]


@pytest.fixture
async def narrow(app_headers):
    return await app_headers(rule("/pci/", "mask", NARROW), permissions=NARROW, name="narrow")


async def count_tokens(client, tenant_id: str) -> int:
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t}) RETURN count(t) AS n",
                        t=tenant_id)
    return rows[0]["n"]


async def stored_containers(client, tenant_id: str, token_id: str) -> list[str]:
    rows = await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) "
                                "RETURN t.containers AS c", t=tenant_id, id=token_id)
    return sorted(rows[0]["c"])


# --- 1. rights on one container never stand for another -----------------------------------------

async def test_create_needs_the_permission_on_every_container(api, client, tenant, narrow):
    before = await count_tokens(client, tenant.tenant_id)
    refused = await api.create({**card(), "containers": ["/pci/x/", "/bank/high/"]},
                               headers=narrow, expect=403)
    assert refused["status"] == 403
    assert await count_tokens(client, tenant.tenant_id) == before
    created = await api.create({**card(), "containers": ["/pci/x/", "/pci/y/"]}, headers=narrow)
    assert created["containers"] == ["/pci/x/", "/pci/y/"]


async def test_a_child_needs_the_permission_on_every_container(api, client, tenant, narrow):
    parent = await api.create({**card(), "containers": ["/pci/"]})
    before = await count_tokens(client, tenant.tenant_id)
    resp = await client.post(f"/tokens/{parent['id']}/children", headers=narrow,
                             json={**card(), "containers": ["/pci/a/", "/hr/"]})
    assert resp.status == 403
    assert await count_tokens(client, tenant.tenant_id) == before


async def test_update_cannot_move_a_token_out_of_a_container_it_has_no_rights_on(
        api, client, tenant, narrow):
    token = await api.create({**card(), "containers": ["/hr/", "/pci/"]})
    await api.patch(token["id"], {"containers": ["/pci/", "/general/"]}, headers=narrow,
                    expect=403)
    await api.patch(token["id"], {"containers": ["/pci/"]}, headers=narrow, expect=403)
    assert await stored_containers(client, tenant.tenant_id, token["id"]) == ["/hr/", "/pci/"]


async def test_update_may_add_and_remove_containers_it_has_rights_on(api, client, tenant, narrow):
    token = await api.create({**card(), "containers": ["/hr/", "/pci/"]})
    await api.patch(token["id"], {"containers": ["/hr/", "/pci/", "/pci/eu/"]}, headers=narrow)
    assert await stored_containers(client, tenant.tenant_id, token["id"]) == [
        "/hr/", "/pci/", "/pci/eu/"]
    await api.patch(token["id"], {"containers": ["/hr/", "/pci/eu/"]}, headers=narrow)
    assert await stored_containers(client, tenant.tenant_id, token["id"]) == ["/hr/", "/pci/eu/"]


# --- 2. update-dedup merges only into what the caller may read and update ---------------------

async def test_update_dedup_never_merges_into_a_token_the_caller_cannot_read(
        api, client, tenant, narrow):
    hidden = await api.create({"type": "card", "data": {"number": VISA}, "containers": ["/hr/"],
                               "metadata": {"team": "team-red-value"}})
    mine = await api.create({"type": "card", "data": {"number": "5555555555554444"},
                             "containers": ["/pci/"], "deduplicate_token": True},
                            headers=narrow)
    child = await api.create({**card("378282246310005"), "containers": ["/pci/"]})
    await client.post(f"/tokens/{mine['id']}/children/{child['id']}", headers=narrow)
    answer = await api.patch(mine["id"], {"data": {"number": VISA}}, headers=narrow)
    # The same cut-down summary as create answers for an unreadable match; nothing of its
    # contents, and no merge.
    assert set(answer) == {"id", "type", "tenant_id", "fingerprint", "containers", "_extras"}
    assert answer["_extras"] == {"deduplicated": True, "merged": False}
    assert "team-red-value" not in str(answer) and "created_by" not in answer
    # The caller's token was updated in place, not deleted; its link stayed with it.
    kept = await api.get(mine["id"])
    assert kept["data"] == {"number": VISA}
    links = await cypher(client, "MATCH (p:Token {tenant_id: $t})-[:PARENT_OF]->(c) "
                                 "RETURN p.id AS p, c.id AS c", t=tenant.tenant_id)
    assert links == [{"p": mine["id"], "c": child["id"]}]
    assert (await api.get(hidden["id"]))["containers"] == ["/hr/"]
    deleted = await cypher(client, "MATCH (d:DeletedToken {tenant_id: $t}) RETURN d.id AS id",
                           t=tenant.tenant_id)
    assert deleted == []


async def test_update_dedup_without_token_delete_is_a_plain_update(api, app_headers):
    editor = await app_headers(rule("/", "reveal", NARROW), permissions=NARROW, name="editor")
    original = await api.create({"type": "card_number", "data": VISA})
    twin = await api.create({"type": "card_number", "data": "5555555555554444",
                             "deduplicate_token": True})
    updated = await api.patch(twin["id"], {"data": VISA}, headers=editor)
    assert updated["id"] == twin["id"] and "_extras" not in updated
    assert sorted(await api.ids()) == sorted([original["id"], twin["id"]])


# --- 4. fingerprints only under reveal -----------------------------------------------------------

async def test_fingerprint_is_shown_only_under_reveal(api, client, narrow, masking, redacting):
    created = await api.create({**card(), "containers": ["/pci/"]}, headers=narrow)
    assert "fingerprint" not in created
    token_id = created["id"]
    for headers in (narrow, masking, redacting):
        body = await api.get(token_id, headers=headers)
        assert "fingerprint" not in body
    listed = await api.list({"id": token_id}, headers=masking)
    assert all("fingerprint" not in t for t in listed["data"])
    revealed = await api.get(token_id)
    assert isinstance(revealed["fingerprint"], str) and revealed["fingerprint"]


# --- 3. masks render off the event loop, within a budget per request ---------------------------

# Within every bound but slow: 999 replaces over a 32 kB string take the whole 0.25 s budget.
HEAVY_MASK = ('{% assign s = "" | pad_left: 4000, "a" %}'
              "{% assign s = s | append: s | append: s | append: s | append: s | append: s "
              "| append: s | append: s %}"
              '{% for i in (1..999) %}{% assign t = s | replace: "a", "bb" %}{% endfor %}'
              "{{ t | size }}")


async def test_heavy_masks_cannot_stall_other_requests(api, client, tenant, masking,
                                                      monkeypatch):
    """A page of tokens whose masks each take their whole render budget: the masks render on
    the renderer's threads, never on the event loop's (before the fix, the loop was blocked for
    the page), so /health keeps answering; and the request stops rendering at its total budget,
    withholding the rest. (How long /health waits is measured in bench/, never asserted.)"""
    renderer = client.server.app[services_key].tokens.renderer
    render_threads: list[threading.Thread] = []
    run = renderer.run

    async def recording_run(work):
        def traced():
            render_threads.append(threading.current_thread())
            return work()
        return await run(traced)

    monkeypatch.setattr(renderer, "run", recording_run)
    ids = [(await api.create({**card(), "metadata": {"batch": "heavy"}}))["id"]
           for _ in range(12)]
    principal = await client.server.app[services_key].authenticator.authenticate(
        api.headers["SVC-API-KEY"])
    for token_id in ids:
        # Stored as a token written before masks were bounded at write would be.
        ct = principal.keys.encrypt_json(HEAVY_MASK, token_id=token_id, field="mask")
        await cypher(client, "MATCH (t:Token {tenant_id: $t, id: $id}) SET t.mask_ct = $ct",
                     t=tenant.tenant_id, id=token_id, ct=ct)

    listing = asyncio.create_task(client.get("/tokens", params={"metadata.batch": "heavy"},
                                             headers=masking))
    while not listing.done():
        resp = await client.get("/health")
        assert resp.status == 200
    page = await (await listing).json()
    assert len(page["data"]) == 12
    loop_thread = threading.current_thread()
    assert render_threads and loop_thread not in render_threads, render_threads
    assert all(t.name.startswith("vaultgraph-render") for t in render_threads)
    withheld = [t for t in page["data"] if "data" not in t]
    assert len(withheld) >= 6  # the budget (0.5 s) covers at most two 0.25 s renders


# --- 3b. a write's expressions render off the event loop, and stop at their budget ------------

# Calls no filter in its loops: before every variable read and loop iteration checked the
# render's budget, this rendered for seconds on the event loop (a 4 kB one for minutes) while
# every other request of every tenant waited. Its data is 60,000 characters, split into as many.
NO_FILTER_LOOP = ('{% assign s = data | split: "" %}'
                  + '{% for i in (1..999) %}{% if s contains "x" %}{% endif %}{% endfor %}' * 4
                  + "x")


@pytest.mark.parametrize("field, value", [
    ("fingerprint_expression", NO_FILTER_LOOP),
    ("search_indexes", [NO_FILTER_LOOP]),
    ("mask", NO_FILTER_LOOP),
    ("id", "t-" + NO_FILTER_LOOP),
])
async def test_an_expression_that_calls_no_filter_still_stops_at_its_budget(api, field, value):
    problem = await api.create({"type": "token", "data": "a" * 60_000, field: value},
                               expect=400)
    name = "search_indexes.0" if field == "search_indexes" else field
    assert problem["errors"] == {name: ["expression exceeded a resource limit"]}, problem


@pytest.fixture
def prepared_on(client, monkeypatch) -> list[str]:
    """The names of the threads on which each write made its stored properties (rendering its
    expressions): a create's as it is prepared, an update's on its own."""
    tokens = client.server.app[services_key].tokens
    names: list[str] = []
    props = tokens._props

    def recording_props(*args):
        names.append(threading.current_thread().name)
        return props(*args)

    monkeypatch.setattr(tokens, "_props", recording_props)
    return names


@pytest.mark.parametrize("caller_written, direct",
                         list(zip(CALLER_WRITTEN, CALLER_WRITTEN_DIRECT, strict=True)))
async def test_a_create_renders_its_callers_expressions_off_the_event_loop(
        api, prepared_on, caller_written, direct):
    """A single create with an expression its caller wrote that needs Liquid is prepared on the
    renderer's threads, as a tokenize's items are; one that renders only its type's own
    expressions, or shapes rendered without Liquid, is prepared inline (the hop would cost more
    than the render)."""
    loop_thread = threading.current_thread().name
    await api.create(card())
    await api.create(card(MASTERCARD) | direct)
    assert prepared_on == [loop_thread, loop_thread]
    prepared_on.clear()
    await api.create(card() | caller_written)
    assert len(prepared_on) == 1 and prepared_on[0].startswith("vaultgraph-render"), prepared_on


async def test_an_update_renders_the_tokens_own_expressions_off_the_event_loop(
        api, prepared_on):
    """An update renders the token's expressions again over its new data: off the event loop
    when a caller wrote them, inline when they are its type's own."""
    plain = await api.create(card())
    indexed = await api.create(card(MASTERCARD) | CALLER_WRITTEN[1])
    prepared_on.clear()
    loop_thread = threading.current_thread().name
    await api.patch(plain["id"], {"metadata": {"k": "v"}})
    assert prepared_on == [loop_thread]
    prepared_on.clear()
    await api.patch(indexed["id"], {"metadata": {"k": "v"}})
    assert len(prepared_on) == 1 and prepared_on[0].startswith("vaultgraph-render"), prepared_on


# --- 5. a racing look-up never brings a revoked key back ----------------------------------------

class GatedAuthRepository(AuthRepository):
    """The real repository (real Neo4j); its answer is held until the test releases it, to
    place a revocation between the read and the cache insert."""

    def __init__(self, db):
        super().__init__(db)
        self.read_done = asyncio.Event()
        self.release = asyncio.Event()

    async def key_owner(self, digest):
        owner = await super().key_owner(digest)
        self.read_done.set()
        await self.release.wait()
        return owner


async def test_a_lookup_racing_a_revocation_does_not_cache_the_old_key(
        client, admin_headers, tenant):
    app = client.server.app
    resp = await client.post(f"/applications/{tenant.application_id}/keys",
                             headers=admin_headers)
    second = (await resp.json())
    services = app[services_key]
    gated = GatedAuthRepository(database(app))
    auth = Authenticator(gated, services.authenticator._tenant_keys, ttl=60)
    racing = asyncio.create_task(auth.authenticate(second["key"]))
    await gated.read_done.wait()
    # The revocation commits and clears the cache while the look-up is in flight.
    revoked = await client.delete(
        f"/applications/{tenant.application_id}/keys/{second['id']}", headers=admin_headers)
    assert revoked.status == 204
    auth.invalidate()
    gated.release.set()
    await racing  # answered as of its read
    gated.read_done.clear()
    # The next look-up must go to Neo4j (not a stale cache) and find the key revoked.
    from vaultgraph.errors import Unauthenticated
    with pytest.raises(Unauthenticated):
        await auth.authenticate(second["key"])
