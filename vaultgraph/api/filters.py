"""The list routes' filters that take token ids or metadata, read from the query string.

A filter value outside what its declaration states (a token id of 3 to 400 characters, a
metadata key of 1 to 128 characters and a value of at most 1,024) could match no token: it is a
400 naming the parameter, as any other bad query parameter is, not an empty page. Messages state
the rule and never the value.
"""

from __future__ import annotations

from multidict import MultiMapping

from ..tokens.fields import metadata_filter_key, validate_token_id
from ..tokens.schemas import metadata_problem
from .problems import invalid

METADATA = "metadata"  # the name a bad metadata filter key is refused under


def token_ids(query: MultiMapping[str], name: str) -> list[str]:
    """Every value of the token id filter `name`, each a literal token id."""
    ids = query.getall(name, [])
    for value in ids:
        try:
            validate_token_id(value)
        except ValueError as exc:
            raise invalid(name, str(exc)) from None
    return ids


def metadata_filters(query: MultiMapping[str]) -> dict[str, str]:
    """`metadata.<key>=<value>` filters by lower-cased key. A repeated key is ignored: the first
    value counts, and keys match case-insensitively, so `metadata.a` and `metadata.A` are the
    same key. Every one given is checked, a repeat too. A bad key is named `metadata` (the key
    itself is what is wrong, and is not echoed); a bad value under a good key is named by its
    parameter."""
    metadata: dict[str, str] = {}
    for name, value in query.items():
        key = metadata_filter_key(name)
        if key is not None:
            raw_key = name.partition(".")[2]
            problem = metadata_problem(raw_key, None)
            if problem is not None:
                raise invalid(METADATA, problem)
            problem = metadata_problem(raw_key, value)
            if problem is not None:
                raise invalid(name, problem)
            metadata.setdefault(key, value)
    return metadata
