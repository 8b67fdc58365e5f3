"""How an audit event travels to audit/write_batch (repository/audit.py): a linked event
carries apart what its write already stored, so linking writes only the rest."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from vaultgraph.app import create_app
from vaultgraph.audit.chain import sign, valid
from vaultgraph.audit.context import stored_skeleton
from vaultgraph.audit.event import bounded_text
from vaultgraph.audit.ids import (
    ROUTES,
    chain_forms,
    chain_number,
    compact_ids,
    id_halves,
    id_parts,
    query_ids,
    uuid_bytes,
)
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.audit import (
    BEGINNING,
    END,
    created_parts,
    event_of,
    linked_parts,
    native,
    time_forms,
)
from vaultgraph.repository.records import at_number
from vaultgraph.services.audit_writer import new_chain_id
from vaultgraph.settings import Settings

AT = datetime(2026, 11, 24, 13, 5, 7, 123456, tzinfo=UTC)
AT_NUMBER = 1_795_525_507_123_456  # microseconds since 1970: how an event's time is stored


def event(**changes) -> dict:
    return {"id": "e1", "at": AT, "tenant_id": "t", "application_id": "a", "key_id": "k",
            "operation": "token:create", "route": "POST /tokens", "token_ids": ["x"],
            "outcome": "success", "status": 201, "transform": None, "client_ip": "10.0.0.1",
            "user_agent": "ua", "trace_id": "tr", "reason": None, "chain": "c", "seq": 3,
            **changes}


SKELETON = {"id": "e1", "at": AT, "tenant_id": "t", "application_id": "a", "key_id": "k",
            "operation": "token:create", "route": "POST /tokens", "token_ids": ["x"],
            "client_ip": "10.0.0.1", "user_agent": "ua", "trace_id": "tr", "outcome": "success"}
# As a write's statement stores it (audit/context.py write_event): the form a linked event
# keeps, its one token as the scalar and the ids with their keys.
STORED = stored_skeleton(SKELETON)
# As an earlier version's write stored it: the list of one token and a `pending` flag.
STORED_BEFORE = compact_ids({**SKELETON, "pending": True})
X_KEY = id_parts("x")[0]


def test_a_linked_event_sends_as_fields_only_what_its_write_did_not_store():
    parts = linked_parts(event(), STORED)
    assert parts["id"] == "e1" and parts["at"] == AT_NUMBER
    assert parts["held"] == {k: v for k, v in STORED.items() if k not in ("id", "at")}
    assert {"token_id", "token_key"} <= set(parts["held"])
    assert parts["fields"] == {"status": 201, "chain": "c", "seq": 3}


def test_a_write_stores_its_event_as_the_linked_event_keeps_it():
    """Whatever tokens it names, the skeleton's stored form is the linked event's less what
    only came after the write: linking sends those alone."""
    uid = str(uuid.uuid4())
    for ids in (["x"], [uid], [], ["x", "y"]):
        stored = stored_skeleton({**SKELETON, "token_ids": ids})
        assert "pending" not in stored
        assert ("token_ids" in stored) == (len(ids) > 1)
        parts = linked_parts(event(token_ids=ids), stored)
        assert parts["fields"] == {"status": 201, "chain": "c", "seq": 3}, ids
        assert event_of({**stored, "at": AT})["token_ids"] == ids


def test_an_event_an_earlier_version_s_write_stored_is_linked_into_the_scalar():
    """Such a write stored the list of one token and a `pending` flag: linking writes the
    scalar and removes the list (the flag is cleared by audit/write_batch itself)."""
    parts = linked_parts(event(), STORED_BEFORE)
    assert parts["held"] == {k: v for k, v in STORED_BEFORE.items()
                             if k not in ("id", "at", "pending", "token_ids")}
    assert parts["fields"] == {"status": 201, "chain": "c", "seq": 3, "token_id": "x",
                               "token_key": X_KEY, "token_ids": None}
    assert "pending" not in parts["fields"]  # bookkeeping, not an event field


def test_a_stored_field_that_changed_is_sent_and_one_now_empty_is_sent_as_null():
    parts = linked_parts(event(outcome="error", token_ids=["x", "y"], trace_id=None), STORED)
    assert parts["fields"]["outcome"] == "error"
    assert parts["fields"]["token_ids"] == ["x", "y"]
    assert "trace_id" in parts["fields"] and parts["fields"]["trace_id"] is None  # removes it
    assert not {"outcome", "token_ids", "trace_id"} & set(parts["held"])


def test_held_and_fields_together_are_the_whole_event_so_a_missing_one_is_created_whole():
    full = event(reason="expired")
    parts = linked_parts(full, STORED)
    assert not set(parts["held"]) & set(parts["fields"])
    whole = {**parts["held"], **parts["fields"], "id": parts["id"]}
    assert {k: v for k, v in whole.items() if v is not None} == compact_ids({
        **{k: v for k, v in full.items() if k not in ("at", "token_ids") and v is not None},
        "token_id": "x"})


def test_when_what_was_stored_is_not_known_every_field_is_sent_nulls_included():
    """A stored event may hold a value the event has since lost: only a null sent for every
    empty field clears it, whatever the write stored."""
    parts = linked_parts(event(), None)
    assert parts["held"] == {}
    assert parts["fields"] == {
        **compact_ids({**{k: v for k, v in event().items() if k not in ("id", "at")},
                       "token_id": "x"}),
        "token_ids": None, "tenant_rest": None, "application_rest": None, "token_rest": None}
    assert parts["fields"]["reason"] is None


def test_a_field_the_write_stored_that_the_event_no_longer_has_is_sent_as_null():
    final = event()
    del final["user_agent"]
    parts = linked_parts(final, STORED)
    assert "user_agent" in parts["fields"] and parts["fields"]["user_agent"] is None


def test_an_equal_value_of_another_type_is_written_again():
    """Neo4j keeps a stored value's type, and the MAC covers the event's: 1 and 1.0 (or True)
    compare equal in Python but are not the same stored value."""
    parts = linked_parts(event(status=1.0), {**STORED, "status": 1})
    assert parts["fields"]["status"] == 1.0 and "status" not in parts["held"]
    parts = linked_parts(event(status=1), {**STORED, "status": True})
    assert parts["fields"]["status"] == 1


def test_a_created_event_leaves_out_empty_fields():
    parts = created_parts(event())
    assert parts["at"] == AT_NUMBER
    assert "at" not in parts["fields"]
    assert parts["fields"] == compact_ids({**{k: v for k, v in event().items()
                                              if k not in ("at", "token_ids") and v is not None},
                                           "token_id": "x"})


def test_the_token_scalar_is_there_only_for_an_event_naming_one_token():
    assert "token_id" not in created_parts(event(token_ids=["x", "y"]))["fields"]
    assert "token_id" not in created_parts(event(token_ids=[]))["fields"]
    stored = {**STORED, "token_id": "x"}
    parts = linked_parts(event(token_ids=["x", "y"]), stored)
    assert parts["fields"]["token_id"] is None  # the stored scalar goes with the second token
    assert linked_parts(event(), stored)["held"]["token_id"] == "x"


def test_the_store_leaves_out_prev_and_a_list_of_one_token_and_the_reader_gives_them_back():
    """`prev` repeats the MAC before the event in its chain (the readers take it there); a list
    of one token is the scalar, of none no property: the event read back is the event signed."""
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    for ids in (["x"], [], ["x", "y"]):
        signed = {**event(token_ids=ids), "prev": "ab" * 32, "key_version": ring.active}
        signed["mac"] = sign(ring, signed)
        fields = created_parts(signed)["fields"]
        assert "prev" not in fields
        assert ("token_ids" in fields) == (len(ids) > 1)
        read = event_of({**fields, "at": AT})
        assert {**read, "prev": "ab" * 32} == {k: v for k, v in signed.items() if v is not None}
        assert sign(ring, {**read, "prev": "ab" * 32}) == signed["mac"]


def test_an_event_stored_before_reads_as_stored():
    """Events stored before the store left fields out hold `prev` and `token_ids` (the list of
    one token beside its scalar): read as they are."""
    old = {**event(), "at": AT, "token_id": "x", "prev": "cd" * 32, "mac": "ef" * 32}
    assert event_of(old) == {k: v for k, v in old.items() if k != "token_id"}


def test_a_chain_id_is_19_digits_stored_as_a_64_bit_integer_and_read_back_as_its_text():
    """Every chain the writer starts is stored as the integer its digits name (docs/adr/0028:
    10 bytes of the (chain, seq) index's key where the digits took 22), read back as the text
    signed; an id that names no 64-bit integer (a chain started before) keeps its text."""
    ids = {new_chain_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 19 and i.isdigit() for i in ids)
    assert all(chain_number(i) == int(i) < 2**63 for i in ids)
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    for chain in (min(ids), "9223372036854775807"):
        signed = {**event(chain=chain), "prev": "ab" * 32, "key_version": ring.active}
        signed["mac"] = sign(ring, signed)
        fields = created_parts(signed)["fields"]
        assert fields["chain"] == int(chain) and chain_forms(chain) == [chain, int(chain)]
        back = event_of({**fields, "at": created_parts(signed)["at"]})
        assert back["chain"] == chain and sign(ring, {**back, "prev": "ab" * 32}) == signed["mac"]
    for kept in ("9223372036854775808", "9999999999999999999", "0123456789012345678", "c",
                 "rehearsal-" + str(uuid.uuid4())):
        assert chain_number(kept) is None and chain_forms(kept) == [kept]
        assert created_parts(event(chain=kept))["fields"]["chain"] == kept


def test_uuid_ids_are_stored_as_two_integers_and_read_back_as_the_text_signed():
    """A tenant's, application's or token's UUID is kept as its two 8-byte halves (the indexes
    hold the first), without its text; the event read back is the event signed."""
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    tenant, application, token = (str(uuid.uuid4()) for _ in range(3))
    signed = {**event(tenant_id=tenant, application_id=application, token_ids=[token]),
              "prev": "ab" * 32, "key_version": ring.active}
    signed["mac"] = sign(ring, signed)
    fields = created_parts(signed)["fields"]
    assert not {"tenant_id", "application_id", "token_id", "token_ids"} & set(fields)
    raw = uuid.UUID(tenant).bytes
    assert fields["tenant_key"] == int.from_bytes(raw[:8], "big", signed=True)
    assert fields["tenant_rest"] == int.from_bytes(raw[8:], "big", signed=True)
    assert {type(fields[k]) for k in ("tenant_key", "tenant_rest", "application_key",
                                      "application_rest", "token_key", "token_rest")} == {int}
    read = event_of({**fields, "at": AT})
    assert {**read, "prev": "ab" * 32} == {k: v for k, v in signed.items() if v is not None}
    assert sign(ring, {**read, "prev": "ab" * 32}) == signed["mac"]
    # An event naming several tokens gets an AUDIT_REF each, holding the tenant's key and the
    # token's key and rest (a caller's id, not a UUID: its hash, no rest); one naming one
    # token or none gets none.
    several = created_parts({**signed, "token_ids": [token, "y"]})
    assert several["tenant_key"] == fields["tenant_key"]
    assert several["refs"] == [[fields["token_key"], fields["token_rest"]],
                               [id_parts("y")[0], None]]
    assert several["fields"]["token_ids"] == [token, "y"]  # not all UUIDs: the text
    assert created_parts(signed)["refs"] == []
    assert created_parts({**signed, "token_ids": []})["refs"] == []
    # Tokens whose keys agree each get theirs (their rests tell them apart); none without a
    # tenant.
    same = ["00000000-0000-4000-8000-00000000000" + str(n) for n in range(3)]
    assert created_parts({**signed, "token_ids": [*same, token]})["refs"] == [
        list(id_parts(t)[:2]) for t in [*same, token]]
    assert created_parts({**signed, "tenant_id": None, "token_ids": [token, "y"]})["refs"] == []
    linked = linked_parts({**signed, "token_ids": [token, "y"]}, None)
    assert (linked["tenant_key"], linked["refs"]) == (several["tenant_key"], several["refs"])


def test_an_event_whose_field_holds_what_no_event_is_signed_with_does_not_hold():
    """A store edited to hold a byte array no list of tokens makes (not 16 bytes a token) reads
    back as it is, and verification names the event rather than failing on it."""
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    signed = {**event(token_ids=[str(uuid.uuid4()) for _ in range(2)]), "prev": "ab" * 32,
              "key_version": ring.active}
    signed["mac"] = sign(ring, signed)
    assert valid(ring, signed)
    fields = created_parts(signed)["fields"]
    edited = event_of({**fields, "token_ids": fields["token_ids"][:31], "at": AT})
    assert isinstance(edited["token_ids"], bytes)
    assert not valid(ring, {**edited, "prev": "ab" * 32})


def test_a_list_of_uuids_is_stored_as_their_bytes_and_read_back_as_the_text_signed():
    """Several tokens, all canonical UUIDs (a page's): 16 bytes each in one byte array; read
    back as the list signed. A list holding any other id keeps its text."""
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    tokens = [str(uuid.uuid4()) for _ in range(50)]
    signed = {**event(token_ids=tokens), "prev": "ab" * 32, "key_version": ring.active}
    signed["mac"] = sign(ring, signed)
    fields = created_parts(signed)["fields"]
    assert fields["token_ids"] == b"".join(uuid.UUID(t).bytes for t in tokens)
    read = event_of({**fields, "at": AT})
    assert read["token_ids"] == tokens
    assert sign(ring, {**read, "prev": "ab" * 32}) == signed["mac"]
    assert stored_skeleton(signed)["token_ids"] == fields["token_ids"]  # the write's form too
    for odd in ("tok-1", tokens[0].upper()):
        kept = created_parts({**signed, "token_ids": [*tokens[:3], odd]})["fields"]
        assert kept["token_ids"] == [*tokens[:3], odd]
        assert event_of({**kept, "at": AT})["token_ids"] == [*tokens[:3], odd]


def test_only_a_canonical_uuid_loses_its_text():
    """An id the service did not make as a UUID (upper case, a caller's token id, `system`)
    keeps its text, with a hash of it as its key: it reads back as it was."""
    u = str(uuid.uuid4())
    for text in (u.upper(), "system", "warm-up:" + u, "a" * 36):
        key, rest, kept = id_parts(text)
        assert isinstance(key, int) and rest is None and kept == text
    assert id_parts(u)[2] is None
    assert id_parts("system") == id_parts("system") and id_parts("x") != id_parts("y")
    fields = created_parts(event(application_id="system", token_ids=[u.upper()]))["fields"]
    assert fields["application_id"] == "system" and fields["token_id"] == u.upper()
    assert "application_rest" not in fields and "token_rest" not in fields
    assert event_of({**fields, "at": AT})["token_ids"] == [u.upper()]


@pytest.mark.parametrize("odd", [
    None, "ABCDEF01-2345-6789-abcd-ef0123456789", "tok-1", "a" * 36, "x" * 36, "",
    "0123456789abcdef0123456789abcdef0123", " bcdef01-2345-6789-abcd-ef0123456789",
    "abcdef01-2345-6789-abcd-ef012345678 ", "abcdef01-2345-6789-abcd-ef01234567\u00e9",
    "abcdef0-12345-6789-abcd-ef0123456789", "abcdef01-2345-6789-abcd-ef01-3456789"])
def test_the_halves_of_many_ids_are_each_id_s_halves(odd):
    """`uuid_bytes` takes a list of canonical UUIDs (both halves of the signed range) and no
    list holding any other id (upper case, a caller's id, whitespace, a dash out of place);
    `id_halves` gives from those bytes, or from a list, what `id_parts` gives each id."""
    ids = [str(uuid.uuid4()) for _ in range(49)] + ["ffffffff-ffff-ffff-ffff-ffffffffffff",
                                                    "00000000-0000-0000-0000-000000000000"]
    assert uuid_bytes(ids) == b"".join(uuid.UUID(i).bytes for i in ids)
    assert id_halves(uuid_bytes(ids)) == id_halves(ids) == [id_parts(i)[:2] for i in ids]
    assert min(k for k, _ in id_halves(ids)) < 0 <= max(k for k, _ in id_halves(ids))
    if odd is not None:
        mixed = [*ids[:3], odd, *ids[3:6]]
        assert id_halves(mixed) == [id_parts(i)[:2] for i in mixed]
        assert id_halves([odd]) == [id_parts(odd)[:2]]
        assert uuid_bytes(mixed) is None and uuid_bytes([odd]) is None
    assert id_halves([]) == []
    # Ids that are no UUIDs but join into UUIDs keep their own.
    u, v = ids[:2]
    for joined in ([u[:35], u[35:] + v], ["", u + v], [u[:10], u[10:] + v[:20], v[20:]]):
        assert "".join(joined) == u + v
        assert id_halves(joined) == [id_parts(i)[:2] for i in joined], joined
        assert uuid_bytes(joined) is None


def test_a_query_names_an_id_by_its_text_its_key_and_its_rest():
    u = str(uuid.uuid4())
    params = query_ids(tenant_id=u, token_id="mine", application_id=None)
    assert params["tenant_id"] == u and (params["tenant_key"], params["tenant_rest"]) == \
        id_parts(u)[:2]
    assert params["token_rest"] is None and params["token_key"] == id_parts("mine")[0]
    assert params["application_key"] is None and params["application_rest"] is None


def test_a_write_s_event_whose_statement_stored_text_ids_has_the_text_removed_when_linked():
    """The expiry sweeper's statement stores its events' ids as text: linking writes their
    integers and removes the text, so the event leaves the text indexes."""
    tenant, token = str(uuid.uuid4()), str(uuid.uuid4())
    stored = {**STORED, "tenant_id": tenant, "token_ids": [token]}
    del stored["tenant_key"]
    parts = linked_parts(event(tenant_id=tenant, token_ids=[token]), stored)
    assert parts["fields"]["tenant_id"] is None and parts["fields"]["token_ids"] is None
    assert (parts["fields"]["tenant_key"], parts["fields"]["tenant_rest"]) == id_parts(tenant)[:2]
    assert (parts["fields"]["token_key"], parts["fields"]["token_rest"]) == id_parts(token)[:2]
    assert parts["refs"] == []  # one token: its scalar, no AUDIT_REF


def test_a_key_id_is_stored_as_16_bytes_and_read_back_as_the_text_signed():
    """Three property blocks where the text took four (docs/adr/0026); a key id that is no
    UUID in its canonical text is kept as it is."""
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    key = str(uuid.uuid4())
    signed = {**event(key_id=key), "prev": "ab" * 32, "key_version": ring.active}
    signed["mac"] = sign(ring, signed)
    fields = created_parts(signed)["fields"]
    assert fields["key_id"] == uuid.UUID(key).bytes
    read = event_of({**fields, "at": AT})
    assert read["key_id"] == key
    assert sign(ring, {**read, "prev": "ab" * 32}) == signed["mac"]
    for other in (key.upper(), "k", None):
        assert created_parts(event(key_id=other))["fields"].get("key_id") == other


def test_an_event_s_time_is_stored_as_microseconds_and_read_back_as_the_instant_signed():
    """docs/adr/0028: an integer of microseconds since 1970 (10 bytes of index key where a
    DateTime took 17), exact both ways, before 1970 too; bounds go in both forms, since events
    stored before hold a DateTime."""
    for at in (AT, BEGINNING, END, datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
               datetime(1970, 1, 1, tzinfo=UTC)):
        stored = at_number(at)
        assert isinstance(stored, int) and native(stored) == at
        assert native(stored).isoformat() == at.isoformat()  # what the MAC covers
    assert at_number(AT) == AT_NUMBER and at_number(None) is None
    assert time_forms(since=AT, before=END) == [
        {"since": AT_NUMBER, "before": at_number(END)}, {"since": AT, "before": END}]


def test_a_route_the_service_names_is_stored_as_its_number_and_read_back_as_its_text():
    """docs/adr/0028: one property block where the text took three. The table only grows (a
    stored number names its route for ever): every route the app audits is in it, and a route
    it does not hold (a proxy call's, named by its proxy) keeps its text."""
    assert ROUTES[:4] == ("POST /tokens/search", "POST /tokens", "GET /tokens",
                          "GET /tokens/{id}") and len(set(ROUTES)) == len(ROUTES)
    app = create_app(Settings())
    audited = {f"{r.method} {r.resource.canonical}" for r in app.router.routes()
               if r.method not in ("HEAD", "*") and r.resource is not None
               and not r.resource.canonical.startswith(("/health", "/ready", "/openapi",
                                                        "/docs", "/static"))}
    assert audited <= set(ROUTES), audited - set(ROUTES)
    ring = KeyRing.from_spec(KeyRing.generate_spec())
    for route, stored in (("GET /tokens/{id}", 4), ("POST /proxy/p1/{path}", None), (None, None)):
        signed = {**event(route=route), "prev": "ab" * 32, "key_version": ring.active}
        signed["mac"] = sign(ring, signed)
        fields = created_parts(signed)["fields"]
        assert fields.get("route") == (stored if stored is not None else route)
        back = event_of({**fields, "at": created_parts(signed)["at"]})
        assert back.get("route") == route
        assert sign(ring, {**back, "prev": "ab" * 32}) == signed["mac"]


@pytest.mark.parametrize(("value", "limit", "kept"), [
    (None, 8, None), ("", 8, ""), ("wrk/4.2", 8, "wrk/4.2"), ("Mozilla/5.0 (X11)", 7, "Mozilla"),
    ("ua\x00/1\n", 8, "ua?/1?"), ("a\tb\u200bc", 8, "a?b?c"), ("ab\x7fcdef\x01", 4, "ab?c"),
    ("é ü 漢", 8, "é ü 漢"),
])
def test_a_user_agent_is_kept_printable_and_bounded(value, limit, kept):
    assert bounded_text(value, limit) == kept
