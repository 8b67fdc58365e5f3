"""A placed chain's verification (vaultgraph/audit/chain.py): each event is signed at its own
place, so each is checked on its own, the one next to a named event too."""

from __future__ import annotations

import os

from vaultgraph.audit.chain import sign, verify_chain
from vaultgraph.crypto import KeyRing

RING = KeyRing({"k1": os.urandom(32)}, "k1")
CHAIN = "1234567890123456789"


def placed_chain(n: int) -> list[dict]:
    """`n` events signed as the writer signs a placed chain's."""
    events = []
    for seq in range(1, n + 1):
        event = {"id": f"e{seq}", "outcome": "success", "status": 200, "chain": CHAIN,
                 "seq": seq, "key_version": "k1"}
        event["mac"] = sign(RING, event)
        events.append(event)
    return events


def found(events: list[dict], **kw) -> list[str]:
    return [f.describe() for f in verify_chain(RING, CHAIN, events, placed=True, **kw)]


def test_an_intact_placed_chain_verifies_to_its_head():
    assert found(placed_chain(5), head=5) == []


def test_a_deletion_and_an_edit_of_the_event_after_it_are_both_named():
    events = placed_chain(5)
    del events[1]
    events[1] = {**events[1], "outcome": "denied"}  # seq 3, right after the deleted one
    assert found(events, head=5) == [f"deleted: chain {CHAIN} seq 2",
                                     f"edited: chain {CHAIN} seq 3 (event e3)"]


def test_a_deleted_tail_is_named_by_the_head():
    assert found(placed_chain(5)[:3], head=5) == [f"deleted: chain {CHAIN} seq 4",
                                                   f"deleted: chain {CHAIN} seq 5"]


def test_a_moved_event_is_named_reordered_and_a_copy_inserted():
    events = placed_chain(4)
    events[0]["seq"], events[3]["seq"] = 4, 1
    assert sorted(found(events, head=4)) == [f"reordered: chain {CHAIN} seq 1 (event e4)",
                                             f"reordered: chain {CHAIN} seq 4 (event e1)"]
    events = placed_chain(3)
    copy = {**events[1], "id": "forged"}
    assert found([*events, copy], head=3) == [f"inserted: chain {CHAIN} seq 2 (event forged)"]


def linked_chain(n: int) -> list[dict]:
    """`n` events signed as a writer signed before placed chains: each after the MAC before
    it, stored without `prev`."""
    events, prev = [], ""
    for event in placed_chain(n):
        event = {**event, "prev": prev}
        event["mac"] = prev = sign(RING, event)
        event.pop("prev")
        events.append(event)
    return events


def test_a_chain_s_mark_taken_off_or_put_on_is_named_and_its_events_read_as_signed():
    mark = f"edited: chain {CHAIN} (event placed mark)"
    assert [f.describe() for f in verify_chain(RING, CHAIN, placed_chain(3), head=3)] == [mark]
    assert found(linked_chain(3), head=3) == [mark]
    assert [f.describe() for f in verify_chain(RING, CHAIN, linked_chain(3), head=3)] == []
    # with an edit besides, named as in the form the events were signed in
    edited = placed_chain(3)
    edited[2]["status"] = 500
    assert [f.describe() for f in verify_chain(RING, CHAIN, edited, head=3)] == [
        mark, f"edited: chain {CHAIN} seq 3 (event e3)"]


def test_a_prev_put_on_a_placed_event_is_an_edit():
    events = placed_chain(3)
    events[1]["prev"] = events[0]["mac"]
    assert found(events, head=3) == [f"edited: chain {CHAIN} seq 2 (event e2)"]


def test_an_event_moved_to_a_number_left_empty_is_named_reordered():
    events = placed_chain(4)
    del events[2]  # seq 3 gone, and e2 moved there
    events[1]["seq"] = 3
    assert found(events, head=4) == [f"deleted: chain {CHAIN} seq 2",
                                     f"reordered: chain {CHAIN} seq 3 (event e2)"]


def test_events_below_the_checkpoint_are_still_checked():
    events = placed_chain(4)
    events[0] = {**events[0], "status": 500}
    assert found(events, head=4, checkpoint=(2, events[1]["mac"])) == [
        f"edited: chain {CHAIN} seq 1 (event e1)"]


def test_a_placed_chain_whose_every_event_was_edited_is_not_read_as_one_signed_before():
    events = placed_chain(3)
    for event in events:
        event["status"] = 500
    assert found(events, head=3) == [f"edited: chain {CHAIN} seq {n} (event e{n})"
                                     for n in (1, 2, 3)]


def test_an_event_without_the_fields_only_some_hold_signs_the_bytes_it_always_did():
    """`kind`, `settles`, `pins` and `pin_macs` are signed only where present: no MAC made
    before them changes."""
    import orjson

    from vaultgraph.audit.event import FIELDS, canonical

    [event] = placed_chain(1)
    assert canonical(event) == orjson.dumps({k: event.get(k) for k in FIELDS},
                                            option=orjson.OPT_SORT_KEYS)
    assert canonical({**event, "kind": "write"}) != canonical(event)


def block(seq: int, at: int, pins: dict[int, str]) -> dict:
    event = {"id": f"b{seq}", "at": at, "chain": CHAIN, "seq": seq, "key_version": "k1",
             "kind": "block", "settles": "W", "pins": list(pins),
             "pin_macs": list(pins.values())}
    event["mac"] = sign(RING, event)
    return event


def test_the_latest_block_pinning_a_number_says_which_mac_stands_there():
    from vaultgraph.audit.chain import pins_of

    first, second = block(1, 10, {1: "a", 2: "b"}), block(2, 20, {2: "c"})
    assert pins_of(RING, [second, first]) == {"W": {1: "a", 2: "c"}}
    forged = {**block(3, 30, {1: "x"}), "pins": [1], "pin_macs": ["y"]}  # MAC fails: pins none
    assert pins_of(RING, [first, forged]) == {"W": {1: "a", 2: "b"}}
