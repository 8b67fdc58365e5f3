"""Who is calling: the application behind the API key, its tenant and its rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..crypto import TenantKeys
from .rules import Decision, Rule, decide, effective_rules, prefixes

DECISIONS_KEPT = 256


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    application_id: str
    key_id: str
    permissions: frozenset[str]
    rules: tuple[Rule, ...]
    keys: TenantKeys = field(repr=False)
    effective: tuple[Rule, ...] = field(init=False, repr=False)
    # Decisions made, by (containers, operation): a batch's or a page's tokens share a few sets
    # of containers. Bounded: emptied when full (containers come from callers and tokens).
    _decided: dict[tuple[tuple[str, ...], str], Decision] = field(
        init=False, repr=False, compare=False, default_factory=dict)

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
        key = (tuple(containers), operation)
        decision = self._decided.get(key)
        if decision is None:
            decision = decide(self.effective, key[0], operation)
            if len(self._decided) >= DECISIONS_KEPT:
                self._decided.clear()
            self._decided[key] = decision
        return decision

    def allowed_on_each(self, containers: Iterable[str], operation: str) -> bool:
        """Whether `operation` is granted on every one of `containers`, each on its own."""
        return all(self.decide((container,), operation).allowed for container in containers)

    def prefixes(self, operation: str) -> list[str]:
        return prefixes(self.effective, operation)
