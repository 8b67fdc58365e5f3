"""No privilege escalation: what an application may hand out or manage.

An application grants only access it holds itself, and manages only applications whose access
it holds itself (docs/security.md). Pure functions over rules; the management service applies them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .principal import Principal
from .rules import TRANSFORMS, Rule, effective_rules

# redact < mask < reveal: how much of a token's data a transform shows.
RANK = {transform: rank for rank, transform in enumerate(TRANSFORMS)}


def _rule_covered(own_rules: Sequence[Rule], rule: Rule, permission: str) -> bool:
    """Would the grantor see every token `rule` opens, at least as revealed, for `permission`?

    The grantor's rules are tried in priority order and the first matching one decides. The
    first of its rules on a prefix of `rule.container` matches every token `rule` can match,
    but any earlier rule granting the permission may decide first (a token can sit in several
    containers), so the weakest transform up to that rule is what the grantor is sure to get.
    """
    weakest = len(TRANSFORMS) - 1
    for own in own_rules:
        if permission not in own.permissions:
            continue
        weakest = min(weakest, RANK[own.transform])
        if rule.container.startswith(own.container):
            return weakest >= RANK[rule.transform]
    return False


def excess(grantor: Principal, permissions: Sequence[str], rules: Sequence[Rule]) -> str | None:
    """Why `grantor` may not hand out this access, or None when it holds all of it."""
    missing = sorted(set(permissions) - grantor.all_granted())
    if missing:
        return ("The calling application cannot grant permissions it does not hold: "
                + ", ".join(missing) + ".")
    for index, rule in enumerate(rules or effective_rules(permissions, ())):
        for permission in sorted(rule.permissions):
            if _rule_covered(grantor.effective, rule, permission):
                continue
            if rules:
                return (f"rules[{index}] would grant {permission} with {rule.transform} on a "
                        "container where the calling application's own rules do not.")
            return (f"Token permissions without rules grant {permission} with mask on '/', "
                    "which the calling application's own rules do not.")
    return None
