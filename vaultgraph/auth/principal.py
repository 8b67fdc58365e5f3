"""Who is calling: the application behind the API key, its tenant and its rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..crypto import TenantKeys
from .rules import Decision, Rule, allowed_on_each, decide, effective_rules, prefixes


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    application_id: str
    key_id: str
    permissions: frozenset[str]
    rules: tuple[Rule, ...]
    keys: TenantKeys = field(repr=False)
    effective: tuple[Rule, ...] = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "effective", effective_rules(self.permissions, self.rules))

    def granted_anywhere(self, permission: str) -> bool:
        return permission in self.permissions or any(
            permission in r.permissions for r in self.effective)

    def all_granted(self) -> frozenset[str]:
        out = set(self.permissions)
        for r in self.effective:
            out |= r.permissions
        return frozenset(out)

    def decide(self, containers: Iterable[str], operation: str) -> Decision:
        return decide(self.effective, containers, operation)

    def allowed_on_each(self, containers: Iterable[str], operation: str) -> bool:
        return allowed_on_each(self.effective, containers, operation)

    def prefixes(self, operation: str) -> list[str]:
        return prefixes(self.effective, operation)
