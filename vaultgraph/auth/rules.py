"""Access rules: which tokens an application may touch, and how it sees their data.

A rule is {description, priority, container, transform, permissions}. For one operation on one
token, the rules that grant the operation are tried by ascending priority; the first whose
container is a prefix of one of the token's containers decides, with its transform. An
application with plain permissions and no rules behaves as one rule on `/` with `mask`.

Rights on one container never stand for another: a write that places a token in containers
(create) or changes them (update) needs the permission on each container it adds or removes
(`Principal.allowed_on_each`), not on any one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .permissions import TOKEN_PERMISSIONS

REVEAL = "reveal"
MASK = "mask"
REDACT = "redact"
TRANSFORMS = (REDACT, MASK, REVEAL)


@dataclass(frozen=True, slots=True)
class Rule:
    container: str
    transform: str
    permissions: frozenset[str]
    priority: int = 0
    description: str = ""

    def to_dict(self) -> dict:
        return {
            "description": self.description,
            "priority": self.priority,
            "container": self.container,
            "transform": self.transform,
            "permissions": sorted(self.permissions),
        }

    @classmethod
    def from_dict(cls, raw: dict) -> Rule:
        return cls(
            container=raw["container"], transform=raw["transform"],
            permissions=frozenset(raw["permissions"]), priority=int(raw.get("priority", 0)),
            description=raw.get("description", ""),
        )


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    transform: str = REDACT


DENY = Decision(False)  # a refusal reads as redact wherever a transform is needed


def effective_rules(permissions: Iterable[str], rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """The rules in force, sorted by priority (stable, so equal priorities keep their order)."""
    if rules:
        return tuple(sorted(rules, key=lambda r: r.priority))
    token_perms = frozenset(p for p in permissions if p in TOKEN_PERMISSIONS)
    if not token_perms:
        return ()
    return (Rule(container="/", transform=MASK, permissions=token_perms,
                 description="implied by the application's permissions"),)


def decide(rules: Sequence[Rule], containers: Iterable[str], operation: str) -> Decision:
    containers = tuple(containers)
    for rule in rules:
        if operation in rule.permissions and any(c.startswith(rule.container) for c in containers):
            return Decision(True, rule.transform)
    return DENY


def prefixes(rules: Sequence[Rule], operation: str) -> list[str]:
    """Container prefixes under which `operation` is granted: Cypher filters with these."""
    return [r.container for r in rules if operation in r.permissions]
