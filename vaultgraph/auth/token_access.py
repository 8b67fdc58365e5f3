"""What a caller may do to one token beyond a permission on its containers, and how it is shown a
deduplication match. Pure functions over the caller's rules; `services/tokens.py` applies them.

- An update may not show the caller more of the data than its read rule does. Plaintext always
  takes a reveal rule: without one, a mask of `{{ data }}` would show the caller the data
  through its mask rule, and a fingerprint or search index over one digit, compared with keyed
  HMACs of guesses, would spell it out. Moving a token to containers where the caller's read
  transform is stronger would reveal it as plainly.
- An update that makes a token the duplicate of another merges into it only when the caller may
  read and update that other token and delete its own; otherwise the update is a plain one.
- A deduplication match is shown to the caller under its read transform when it may read the
  match, and otherwise only summarised: its contents stay hidden.
"""

from __future__ import annotations

from collections.abc import Iterable

from .permissions import TOKEN_DELETE, TOKEN_READ, TOKEN_UPDATE
from .principal import Principal
from .rules import REVEAL, TRANSFORMS

# The fields through which a caller could read a token's data back: changing one takes a rule
# that reveals the token to it.
VIEW_FIELDS = ("mask", "fingerprint_expression", "search_indexes")
NEEDS_REVEAL = ("Changing a token's mask, fingerprint expression or search indexes needs a rule "
                "that reveals the token to the application.")
MOVE_REVEALS = ("The application may not move a token into containers where it would read more "
                "of the token's data.")


def update_refusal(principal: Principal, containers: Iterable[str],
                   new_containers: Iterable[str], changed: Iterable[str]) -> str | None:
    """Why an update would show the caller more of a token's data than its read rule does, or
    None when it would not. `containers`: the token's now; `new_containers`: after the update;
    `changed`: the names of the fields the update changes."""
    shown = principal.decide(containers, TOKEN_READ).transform
    if shown != REVEAL and any(name in VIEW_FIELDS for name in changed):
        return NEEDS_REVEAL
    moved = principal.decide(new_containers, TOKEN_READ).transform
    if TRANSFORMS.index(moved) > TRANSFORMS.index(shown):
        return MOVE_REVEALS
    return None


def may_merge(principal: Principal, containers: Iterable[str],
              match_containers: Iterable[str]) -> bool:
    """Whether an update of a token in `containers` may merge it into its duplicate in
    `match_containers` (read and update on the match, delete on the token merged away)."""
    match_containers = tuple(match_containers)
    return (principal.decide(match_containers, TOKEN_READ).allowed
            and principal.decide(match_containers, TOKEN_UPDATE).allowed
            and principal.decide(containers, TOKEN_DELETE).allowed)


def match_transform(principal: Principal, match_containers: Iterable[str]) -> str | None:
    """The transform a deduplication match in `match_containers` is shown under, or None when
    the caller may not read it (then it gets only a summary)."""
    decision = principal.decide(match_containers, TOKEN_READ)
    return decision.transform if decision.allowed else None
