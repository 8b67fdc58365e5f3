"""The dedup decisions of vaultgraph/services/tokens.py that need no database: how a match is
answered to a caller who may or may not read it (spec §4.4), and when an update may merge into
a match. Which token matches (the oldest live one) is Cypher, tested against Neo4j in
tests/integration/tokens/test_dedup.py."""

from __future__ import annotations

import pytest

from vaultgraph.auth import permissions as perms
from vaultgraph.auth.principal import Principal
from vaultgraph.auth.rules import MASK, REDACT, REVEAL, Rule
from vaultgraph.services.tokens import Shown, Summary, TokenService
from vaultgraph.tokens.stored import StoredToken

READ, UPDATE, DELETE = perms.TOKEN_READ, perms.TOKEN_UPDATE, perms.TOKEN_DELETE


def caller(*rules: tuple[str, str, tuple[str, ...]]) -> Principal:
    return Principal(tenant_id="t", application_id="a", key_id="k", permissions=frozenset(),
                     rules=tuple(Rule(container=c, transform=t, permissions=frozenset(p))
                                 for c, t, p in rules), keys=None)


def token(token_id: str, *containers: str) -> StoredToken:
    return StoredToken(id=token_id, tenant_id="t", type="card", containers=containers)


MATCH = token("match", "/pci/")


@pytest.mark.parametrize("transform", [REVEAL, MASK, REDACT])
def test_a_match_the_caller_may_read_is_shown_under_its_transform(transform):
    answer = TokenService._dedup_answer(caller(("/pci/", transform, (READ,))), MATCH)
    assert answer == Shown(MATCH, transform, extras={"deduplicated": True})


def test_a_match_the_caller_may_not_read_is_only_summarised():
    for principal in (caller(("/general/", REVEAL, (READ,))), caller(("/pci/", REVEAL, (UPDATE,))),
                      caller()):
        assert TokenService._dedup_answer(principal, MATCH) == Summary(
            MATCH, {"deduplicated": True})


def test_the_answer_carries_the_extras_given():
    extras = {"deduplicated": True, "merged": True}
    assert TokenService._dedup_answer(caller(("/", MASK, (READ,))), MATCH, extras) == Shown(
        MATCH, MASK, extras=extras)
    assert TokenService._dedup_answer(caller(), MATCH, extras) == Summary(MATCH, extras)


def test_an_update_merges_only_with_read_and_update_on_the_match_and_delete_on_itself():
    node = token("node", "/general/")
    everything = caller(("/pci/", REDACT, (READ, UPDATE)), ("/general/", REDACT, (DELETE,)))
    assert TokenService._may_merge(everything, node, MATCH)
    for lacking in (
        caller(("/pci/", REDACT, (UPDATE,)), ("/general/", REDACT, (DELETE,))),   # no read
        caller(("/pci/", REDACT, (READ,)), ("/general/", REDACT, (DELETE,))),     # no update
        caller(("/pci/", REDACT, (READ, UPDATE))),                                # no delete
        caller(("/pci/", REDACT, (READ, UPDATE, DELETE))),         # delete on the match only
        caller(("/general/", REDACT, (READ, UPDATE, DELETE))),    # everything on itself only
    ):
        assert not TokenService._may_merge(lacking, node, MATCH), lacking.rules
