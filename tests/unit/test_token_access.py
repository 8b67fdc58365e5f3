"""The token decisions of vaultgraph/auth/token_access.py, as pure functions: what an update may
change without a reveal rule, where it may move a token, when an update-dedup merges, and how a
dedup match is shown. Which token matches (the oldest live one) is Cypher, tested
against Neo4j in tests/integration/tokens/test_dedup.py; the same rules over HTTP are in
tests/integration/tokens/test_update.py."""

from __future__ import annotations

import pytest

from vaultgraph.auth import permissions as perms
from vaultgraph.auth.principal import Principal
from vaultgraph.auth.rules import MASK, REDACT, REVEAL, Rule
from vaultgraph.auth.token_access import (
    MOVE_REVEALS,
    NEEDS_REVEAL,
    VIEW_FIELDS,
    match_transform,
    may_merge,
    update_refusal,
)
from vaultgraph.services.tokens import Shown, Summary, dedup_answer
from vaultgraph.tokens.stored import StoredToken

READ, UPDATE, DELETE = perms.TOKEN_READ, perms.TOKEN_UPDATE, perms.TOKEN_DELETE


def caller(*rules: tuple[str, str, tuple[str, ...]]) -> Principal:
    return Principal(tenant_id="t", application_id="a", key_id="k", permissions=frozenset(),
                     rules=tuple(Rule(container=c, transform=t, permissions=frozenset(p))
                                 for c, t, p in rules), keys=None)


def token(token_id: str, *containers: str) -> StoredToken:
    return StoredToken(id=token_id, tenant_id="t", type="card", containers=containers)


MATCH = token("match", "/pci/")
HERE = ("/pci/",)


# --- what an update may change ----------------------------------------------------------------

@pytest.mark.parametrize("field", VIEW_FIELDS)
def test_changing_a_view_field_takes_a_reveal_rule(field):
    assert set(VIEW_FIELDS) == {"mask", "fingerprint_expression", "search_indexes"}
    for transform in (MASK, REDACT):
        assert update_refusal(caller(("/", transform, (READ, UPDATE))), HERE, HERE,
                              changed=[field]) == NEEDS_REVEAL
    assert update_refusal(caller(("/", REVEAL, (READ, UPDATE))), HERE, HERE,
                          changed=[field]) is None
    # No read rule at all: nothing is revealed to it either.
    assert update_refusal(caller(("/", MASK, (UPDATE,))), HERE, HERE,
                          changed=[field]) == NEEDS_REVEAL


def test_other_changes_need_no_reveal_rule():
    masked = caller(("/", MASK, (READ, UPDATE)))
    assert update_refusal(masked, HERE, HERE, changed=["data", "metadata", "expires_at"]) is None
    assert update_refusal(masked, HERE, HERE, changed=[]) is None


@pytest.mark.parametrize(("here", "there", "refused"), [
    (MASK, REVEAL, True), (REDACT, MASK, True), (REDACT, REVEAL, True),
    (MASK, MASK, False), (REVEAL, MASK, False), (MASK, REDACT, False), (REVEAL, REVEAL, False),
])
def test_a_move_may_not_strengthen_the_callers_read_transform(here, there, refused):
    principal = caller(("/a/", here, (READ, UPDATE)), ("/b/", there, (READ, UPDATE)))
    assert update_refusal(principal, ("/a/",), ("/b/",), changed=[]) == (
        MOVE_REVEALS if refused else None)


def test_a_move_to_where_the_caller_reads_from_where_it_read_nothing_is_refused():
    principal = caller(("/a/", MASK, (UPDATE,)), ("/b/", MASK, (READ, UPDATE)))
    assert update_refusal(principal, ("/a/",), ("/b/",), changed=[]) == MOVE_REVEALS
    assert update_refusal(principal, ("/b/",), ("/a/",), changed=[]) is None


# --- update-dedup merges ----------------------------------------------------------------------

def test_an_update_merges_only_with_read_and_update_on_the_match_and_delete_on_itself():
    node = token("node", "/general/")
    everything = caller(("/pci/", REDACT, (READ, UPDATE)), ("/general/", REDACT, (DELETE,)))
    assert may_merge(everything, node.containers, MATCH.containers)
    for lacking in (
        caller(("/pci/", REDACT, (UPDATE,)), ("/general/", REDACT, (DELETE,))),   # no read
        caller(("/pci/", REDACT, (READ,)), ("/general/", REDACT, (DELETE,))),     # no update
        caller(("/pci/", REDACT, (READ, UPDATE))),                                # no delete
        caller(("/pci/", REDACT, (READ, UPDATE, DELETE))),         # delete on the match only
        caller(("/general/", REDACT, (READ, UPDATE, DELETE))),    # everything on itself only
    ):
        assert not may_merge(lacking, node.containers, MATCH.containers), lacking.rules


# --- how a dedup match is shown ---------------------------------------------------------------

@pytest.mark.parametrize("transform", [REVEAL, MASK, REDACT])
def test_a_match_the_caller_may_read_is_shown_under_its_transform(transform):
    principal = caller(("/pci/", transform, (READ,)))
    assert match_transform(principal, MATCH.containers) == transform
    assert dedup_answer(principal, MATCH) == Shown(MATCH, transform,
                                                   extras={"deduplicated": True})


def test_a_match_the_caller_may_not_read_is_only_summarised():
    for principal in (caller(("/general/", REVEAL, (READ,))), caller(("/pci/", REVEAL, (UPDATE,))),
                      caller()):
        assert match_transform(principal, MATCH.containers) is None
        assert dedup_answer(principal, MATCH) == Summary(MATCH, {"deduplicated": True})


def test_the_answer_carries_the_extras_given():
    extras = {"deduplicated": True, "merged": True}
    assert dedup_answer(caller(("/", MASK, (READ,))), MATCH, extras) == Shown(
        MATCH, MASK, extras=extras)
    assert dedup_answer(caller(), MATCH, extras) == Summary(MATCH, extras)
