"""The access rules (vaultgraph/auth/rules.py, principal.py) and what an application may grant
(auth/grants.py), as pure functions: every rule of docs/security.md with a case on each side.
The integration tests (tests/integration/test_auth.py, tokens/test_access*) drive the same rules
over HTTP; these are the ones `make mutation` runs against each mutant."""

from __future__ import annotations

import pytest

from vaultgraph.auth import permissions as perms
from vaultgraph.auth.grants import excess
from vaultgraph.auth.principal import Principal
from vaultgraph.auth.rules import (
    DENY,
    MASK,
    REDACT,
    REVEAL,
    Decision,
    Rule,
    decide,
    effective_rules,
    prefixes,
)

READ, CREATE, UPDATE, DELETE = (perms.TOKEN_READ, perms.TOKEN_CREATE, perms.TOKEN_UPDATE,
                                perms.TOKEN_DELETE)


def rule(container: str, transform: str, *permissions: str, priority: int = 0,
         description: str = "") -> Rule:
    return Rule(container=container, transform=transform, permissions=frozenset(permissions),
                priority=priority, description=description)


def principal(permissions=(), rules=()) -> Principal:
    return Principal(tenant_id="t", application_id="a", key_id="k",
                     permissions=frozenset(permissions), rules=tuple(rules), keys=None)


# --- Rule <-> dict ---------------------------------------------------------------------------

def test_a_rule_round_trips_through_its_dict():
    r = rule("/pci/", REVEAL, UPDATE, READ, priority=3, description="cards")
    assert r.to_dict() == {"description": "cards", "priority": 3, "container": "/pci/",
                           "transform": REVEAL, "permissions": [READ, UPDATE]}
    assert Rule.from_dict(r.to_dict()) == r


def test_a_rule_from_a_dict_defaults_priority_and_description():
    r = Rule.from_dict({"container": "/", "transform": MASK, "permissions": [READ],
                        "priority": "7"})
    assert r == rule("/", MASK, READ, priority=7)
    bare = Rule.from_dict({"container": "/", "transform": MASK, "permissions": []})
    assert (bare.priority, bare.description, bare.permissions) == (0, "", frozenset())


# --- effective_rules ---------------------------------------------------------------------------

def test_rules_are_sorted_by_priority_keeping_the_order_of_equals():
    a, b, c, d = (rule("/a/", MASK, READ, priority=2), rule("/b/", MASK, READ, priority=1),
                  rule("/c/", MASK, READ, priority=2), rule("/d/", MASK, READ, priority=-1))
    assert effective_rules([READ], [a, b, c, d]) == (d, b, a, c)


def test_permissions_without_rules_are_one_mask_rule_on_the_root():
    [implied] = effective_rules([READ, perms.APPLICATION_READ, UPDATE], ())
    assert implied == rule("/", MASK, READ, UPDATE,
                           description="implied by the application's permissions")


def test_no_token_permission_and_no_rules_is_no_rule():
    assert effective_rules([perms.APPLICATION_READ, perms.LOG_READ], ()) == ()
    assert effective_rules([], []) == ()


def test_explicit_rules_ignore_the_plain_permissions():
    r = rule("/pci/", REVEAL, READ)
    assert effective_rules([READ, UPDATE, DELETE], [r]) == (r,)


# --- decide: first matching rule by priority -----------------------------------------------

def test_the_first_rule_granting_the_operation_on_a_prefix_decides():
    rules = effective_rules([], [rule("/pci/", REVEAL, READ, priority=1),
                                 rule("/", REDACT, READ, priority=2)])
    assert decide(rules, ["/pci/high/"], READ) == Decision(True, REVEAL)
    assert decide(rules, ["/general/"], READ) == Decision(True, REDACT)


def test_a_rule_without_the_operation_is_skipped():
    rules = (rule("/pci/", REVEAL, UPDATE), rule("/", MASK, READ))
    assert decide(rules, ["/pci/"], READ) == Decision(True, MASK)
    assert decide(rules, ["/pci/"], UPDATE) == Decision(True, REVEAL)
    assert decide(rules, ["/pci/"], DELETE) is DENY


def test_any_of_the_tokens_containers_may_match():
    rules = (rule("/pci/", REVEAL, READ),)
    assert decide(rules, ["/general/", "/pci/x/"], READ) == Decision(True, REVEAL)
    assert decide(rules, iter(["/general/", "/pci/"]), READ).allowed  # any iterable, read once


def test_no_rule_no_container_or_no_prefix_is_a_refusal_that_reads_as_redact():
    assert decide((), ["/"], READ) == DENY
    assert decide((rule("/", REVEAL, READ),), [], READ) == DENY
    assert decide((rule("/pci/", REVEAL, READ),), ["/pc/", "/general/pci/"], READ) == DENY
    assert DENY == Decision(False, REDACT)
    assert Decision(True).transform == REDACT


def test_a_container_prefix_is_matched_from_the_start():
    rules = (rule("/pci/", REVEAL, READ),)
    assert not decide(rules, ["/x/pci/"], READ).allowed
    assert decide(rules, ["/pci/"], READ).allowed


# --- allowed_on_each: each container on its own ----------------------------------------------

def test_a_write_needs_the_permission_on_every_container_on_its_own():
    caller = principal(rules=(rule("/pci/", REVEAL, CREATE), rule("/general/", REVEAL, READ)))
    assert caller.allowed_on_each(["/pci/", "/pci/high/"], CREATE)
    assert not caller.allowed_on_each(["/pci/", "/general/"], CREATE)
    assert not caller.allowed_on_each(["/general/"], CREATE)
    assert caller.allowed_on_each([], CREATE)  # nothing moved: nothing to refuse


# --- prefixes ------------------------------------------------------------------------------

def test_prefixes_are_the_containers_of_the_rules_granting_the_operation_in_order():
    rules = (rule("/b/", MASK, READ), rule("/a/", REVEAL, UPDATE), rule("/c/", REDACT, READ))
    assert prefixes(rules, READ) == ["/b/", "/c/"]
    assert prefixes(rules, DELETE) == []


# --- Principal ----------------------------------------------------------------------------

def test_a_principal_holds_its_effective_rules_and_delegates_to_them():
    p = principal([READ, CREATE])
    assert p.effective == effective_rules([READ, CREATE], ())
    assert p.decide(["/x/"], READ) == Decision(True, MASK)
    assert p.allowed_on_each(["/x/", "/y/"], CREATE)
    assert not p.allowed_on_each(["/x/"], DELETE)
    assert p.prefixes(READ) == ["/"]
    assert p.prefixes(DELETE) == []


def test_what_a_principal_is_granted_anywhere():
    p = principal([perms.APPLICATION_READ], [rule("/pci/", REVEAL, READ, UPDATE)])
    assert p.granted_anywhere(perms.APPLICATION_READ)
    assert p.granted_anywhere(UPDATE)
    assert not p.granted_anywhere(DELETE)
    assert p.all_granted() == frozenset({perms.APPLICATION_READ, READ, UPDATE})
    assert principal().all_granted() == frozenset()


# --- grants: no privilege escalation -------------------------------------------------------

def test_a_grantor_cannot_grant_a_permission_it_lacks():
    grantor = principal([READ, perms.APPLICATION_CREATE])
    assert excess(grantor, [READ, UPDATE, DELETE], ()) == (
        "The calling application cannot grant permissions it does not hold: "
        "token:delete, token:update.")
    assert excess(grantor, [READ], ()) is None
    assert excess(grantor, [], ()) is None


def test_permissions_without_rules_need_mask_on_the_root_from_the_grantor():
    narrow = principal([perms.APPLICATION_CREATE], [rule("/pci/", REVEAL, READ)])
    assert excess(narrow, [READ], ()) == (
        "Token permissions without rules grant token:read with mask on '/', which the "
        "calling application's own rules do not.")
    assert excess(principal([READ]), [READ], ()) is None


@pytest.mark.parametrize("own, granted, ok", [
    # the grantor's rule on a prefix, at least as revealing: grantable
    ([rule("/", REVEAL, READ)], rule("/pci/", REVEAL, READ), True),
    ([rule("/", REVEAL, READ)], rule("/pci/", REDACT, READ), True),
    ([rule("/pci/", MASK, READ)], rule("/pci/high/", MASK, READ), True),
    # more revealing than the grantor's own: refused
    ([rule("/", MASK, READ)], rule("/pci/", REVEAL, READ), False),
    ([rule("/", REDACT, READ)], rule("/pci/", MASK, READ), False),
    # a wider container than the grantor's, or another one: refused
    ([rule("/pci/", REVEAL, READ)], rule("/", REVEAL, READ), False),
    ([rule("/pci/", REVEAL, READ)], rule("/general/", REDACT, READ), False),
    # the grantor's rule for another permission does not count
    ([rule("/", REVEAL, UPDATE), rule("/x/", REVEAL, READ)], rule("/pci/", REDACT, READ), False),
    # an earlier, weaker rule of the grantor may decide first for some tokens
    ([rule("/general/", REDACT, READ, priority=0), rule("/", REVEAL, READ, priority=1)],
     rule("/pci/", REVEAL, READ), False),
    ([rule("/general/", MASK, READ, priority=0), rule("/", REVEAL, READ, priority=1)],
     rule("/pci/", MASK, READ), True),
    # a later weaker rule does not: the first rule on a prefix decides
    ([rule("/", REVEAL, READ, priority=0), rule("/general/", REDACT, READ, priority=1)],
     rule("/pci/", REVEAL, READ), True),
])
def test_a_rule_is_grantable_when_the_grantors_rules_cover_it(own, granted, ok):
    grantor = principal([], own)
    reason = excess(grantor, [], [granted])
    if ok:
        assert reason is None
    else:
        assert reason == (f"rules[0] would grant token:read with {granted.transform} on a "
                          "container where the calling application's own rules do not.")


def test_the_refusal_names_the_first_uncovered_rule_and_permission():
    grantor = principal([], [rule("/", REVEAL, READ), rule("/", MASK, UPDATE)])
    rules = [rule("/a/", REVEAL, READ), rule("/b/", MASK, READ, UPDATE),
             rule("/c/", REVEAL, UPDATE, READ)]
    assert excess(grantor, [], rules) == (
        "rules[2] would grant token:update with reveal on a container where the calling "
        "application's own rules do not.")
    assert excess(grantor, [], rules[:2]) is None


# --- permissions: what a route may declare -----------------------------------------------

@pytest.mark.parametrize("access", [perms.PUBLIC, perms.AUTHENTICATED, (READ,),
                                    (READ, UPDATE), (perms.LOG_READ,)])
def test_a_route_may_declare_public_authenticated_or_known_permissions(access):
    def handler():
        return None

    assert perms.declare(handler, access) is handler
    assert perms.declared(handler) == access


@pytest.mark.parametrize("access", [(), ("token:write",), (READ, "nope"), "token:read",
                                    [READ], None])
def test_a_route_may_not_declare_anything_else(access):
    with pytest.raises(ValueError, match="unknown access"):
        perms.check_access(access)


def test_an_undeclared_handler_declares_nothing():
    assert perms.declared(lambda: None) is None
