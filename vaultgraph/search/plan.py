"""Which terms of a query drive it: the index seeks whose union holds every match.

A term on `id`, `type`, `fingerprint`, `metadata.<key>`, `data`, a date or a graph field is a
seek in an index; `container` and anything under `NOT` is only a check on tokens found by
seeks. An `AND` is driven by its most selective child that can drive, an `OR` by the union of
all its children (each must be able to drive). A query that no seek can answer is refused:
it would read every token of the tenant.
"""

from __future__ import annotations

from .query import And, Leaf, Node, Not, Or, Range, Term

# Most selective first: a lookup by id finds one token, a type finds a share of the tenant.
_RANK = {"id": 0, "fingerprint": 1, "data": 2, "parent": 3, "child": 4, "metadata": 5,
         "descendant": 6, "ancestor": 7, "created_at": 8, "expires_at": 9, "type": 10}
UNINDEXED = ("The query cannot be answered from an index: it needs at least one term on id, "
             "type, fingerprint, data, metadata.<key>, created_at, expires_at, parent, child, "
             "ancestor or descendant that every match must satisfy (`container:` and `NOT` "
             "terms only narrow what those find).")


def _cost(leaves_: tuple[Leaf, ...]) -> tuple[int, int]:
    return len(leaves_), max(_RANK[leaf.field] for leaf in leaves_)


def drivers(node: Node) -> tuple[Leaf, ...] | None:
    """The seeks that find a superset of the matches, or None when no seek can."""
    if isinstance(node, (Term, Range)):
        return (node,) if node.field in _RANK else None
    if isinstance(node, Not):
        return None
    found = [drivers(child) for child in node.children]
    if isinstance(node, And):
        usable = [d for d in found if d is not None]
        return min(usable, key=_cost) if usable else None
    if any(d is None for d in found):
        return None
    out: list[Leaf] = []
    for d in found:
        out.extend(leaf for leaf in d if not _among(leaf, out))
    return tuple(out)


def _among(node: Node, seeks) -> bool:
    # By identity, not equality: which seeks a query runs depends on its shape, never on
    # whether two of its values happen to be equal.
    return any(node is seek for seek in seeks)


def residual(node: Node, seeks: tuple[Leaf, ...]) -> Node | None:
    """What remains to check on each token the seeks found (None: nothing)."""
    if len(seeks) == 1 and node is seeks[0]:
        return None
    if isinstance(node, Or) and all(_among(child, seeks) for child in node.children):
        return None  # the union of the seeks is the OR itself
    if isinstance(node, And) and len(seeks) == 1:
        rest = tuple(child for child in node.children if child is not seeks[0])
        if len(rest) == 1:
            return rest[0]
        return And(rest, node.depth) if rest != node.children else node
    return node
