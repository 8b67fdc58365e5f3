"""The search query language, fuzzed (hypothesis): any text either parses or is refused with a
400 on `query`, and no character of the query ever reaches a statement's text: every query
runs the one statement `search/page`, its values and its shape travel as one map parameter,
and the boolean program compiled from the tree computes the tree."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultgraph.errors import Invalid
from vaultgraph.search.plan import (
    AND,
    CHECK_FIELDS,
    NOT,
    OR,
    PROPERTY_CHECKS,
    SEEK_FIELDS,
    compile,
)
from vaultgraph.search.query import And, Limits, Not, Or, Range, Term, leaves, parse

LIMITS = Limits(max_length=4000, max_terms=40, max_depth=12)
FIELDS = ["id", "type", "fingerprint", "data", "parent", "child", "ancestor", "descendant",
          "metadata.colour", "metadata.Key-1"]
DATES = ["2026-01-01", "2026-11-23T10:00:00Z", "2026-11-23T10:00:00.123456+02:00", "*"]
values = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
# What `id` and the graph fields take: token ids (a value none could be is refused).
ID_FIELDS = {"id", "parent", "child", "ancestor", "descendant"}
token_ids = st.text(st.characters(categories=["L", "M", "N", "P", "S"],
                                  exclude_characters="#/\\+?[]|&=%<>{}^"),
                    min_size=3, max_size=12)


def quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def terms(draw) -> tuple[str, list[str]]:
    kind = draw(st.sampled_from(["exact", "container", "range"]))
    if kind == "range":
        field = draw(st.sampled_from(["created_at", "expires_at"]))
        low, high = draw(st.sampled_from(DATES)), draw(st.sampled_from(DATES))
        brackets = draw(st.sampled_from(["[]", "{}", "[}", "{]"]))
        return f"{field}:{brackets[0]}{low} TO {high}{brackets[1]}", []
    value = draw(values)
    if kind == "container":
        value = "/" + value
        # Container paths are compared lower-cased, as they are stored.
        return f"type:x AND container:{quoted(value)}", ["x", value.lower()]
    field = draw(st.sampled_from(FIELDS))
    if field in ID_FIELDS:
        value = draw(token_ids)
    return f"{field}:{quoted(value)}", [value]


def queries():
    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(
                lambda ab: (f"({ab[0][0]}) AND ({ab[1][0]})", ab[0][1] + ab[1][1])),
            st.tuples(children, children).map(
                lambda ab: (f"({ab[0][0]}) OR ({ab[1][0]})", ab[0][1] + ab[1][1])),
            st.tuples(children, children).map(
                lambda ab: (f"({ab[0][0]}) AND NOT ({ab[1][0]})", ab[0][1] + ab[1][1])))
    return st.recursive(terms(), extend, max_leaves=8)


def run(program: list[int], held: set[int]) -> bool:
    """The stack machine of cypher/search/page.cypher, step by step as the statement does it."""
    stack: list[bool] = []
    for op in program:
        if op >= 0:
            stack.append(op in held)
        elif op == NOT:
            stack.append(not stack.pop())
        else:
            right, left = stack.pop(), stack.pop()
            stack.append((left and right) if op == AND else (left or right))
    assert len(stack) == 1
    return stack[0]


def truth(node, held: set[int], places: dict[int, int]) -> bool:
    """The tree's own meaning, for a token for which the terms at `held` hold."""
    if isinstance(node, (Term, Range)):
        return places[id(node)] in held
    if isinstance(node, Not):
        return not truth(node.child, held, places)
    values = [truth(c, held, places) for c in node.children]
    return all(values) if isinstance(node, And) else any(values)


def signature(plan) -> tuple:
    """What Neo4j's plan cache sees of the parameter: its type; and what the statement reads
    of it: which fields it holds, and which keys each of their terms has."""
    query = plan.parameter()
    return (type(query), tuple(query), tuple(query["seeks"]), tuple(query["checks"]),
            {(f, tuple(t)) for kind in ("seeks", "checks") for f, ts in query[kind].items()
             for t in ts})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries(), st.data())
def test_the_plan_carries_the_query_as_data(generated, data):
    text, expected_values = generated
    tree = parse(text, LIMITS)
    # Every value survives the parse exactly (quotes and escapes undone) ...
    got = [leaf.value for leaf in leaves(tree) if isinstance(leaf, Term)]
    assert sorted(expected_values) == sorted(got)
    plan = compile(tree)
    if plan is None:
        return
    # ... and travels in the one map parameter, each term once, seek or check by its place.
    terms = list(leaves(tree))
    query = plan.parameter()
    assert list(query["seeks"]) == list(SEEK_FIELDS)
    assert list(query["checks"]) == list(CHECK_FIELDS)
    placed = sorted((t["i"], f) for kind in ("seeks", "checks")
                    for f, ts in query[kind].items() for t in ts)
    assert placed == [(i, leaf.field) for i, leaf in enumerate(terms)]
    assert sorted(got) == sorted(t["value"] for kind in ("seeks", "checks")
                                 for ts in query[kind].values() for t in ts if "value" in t)
    assert plan.terms == len(terms)
    # The program computes the tree, whichever terms hold.
    places = {id(leaf): i for i, leaf in enumerate(terms)}
    held = data.draw(st.sets(st.integers(0, len(terms) - 1)))
    assert run(plan.program, held) == truth(tree, held, places)
    # The seeks find every match: a token no seek finds matches nothing.
    seeking = {t["i"] for ts in query["seeks"].values() for t in ts}
    assert query["seeking"] == sorted(seeking)
    assert query["properties"] == any(query["checks"][f] for f in PROPERTY_CHECKS)
    assert not run(plan.program, held - seeking)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_every_query_has_the_same_parameter_signature(generated):
    """The bound on distinct plans: the statement's text is fixed, and no query changes what
    Neo4j keys its plan cache by (the top-level parameter types; a list's size class would)."""
    plan = compile(parse(generated[0], LIMITS))
    if plan is not None:
        kinds, fields = signature(plan)[:4], signature(plan)[4]
        assert kinds == (dict, ("seeks", "checks", "seeking", "properties", "program"), SEEK_FIELDS,
                         CHECK_FIELDS)
        assert {keys for _, keys in fields} <= {
            ("i", "value"), ("i", "low", "high", "low_inclusive", "high_inclusive")}


def test_postfix_of_a_small_tree():
    tree = parse("id:aaa OR (type:b AND NOT container:/c/ AND metadata.k:v)", LIMITS)
    assert compile(tree).program == [0, 1, 2, NOT, AND, 3, AND, OR]
    assert compile(parse("NOT container:/c/", LIMITS)) is None


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_or_is_refused_on_the_query_field(text):
    try:
        tree = parse(text, LIMITS)
    except Invalid as exc:
        assert list(exc.errors) == ["query"]
        return
    plan = compile(tree)
    if plan is not None:
        assert plan.terms == sum(1 for _ in leaves(tree))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('id:type()"[]{}*\\ ANDORTNX-_/.')), max_size=60))
def test_syntax_soup_parses_or_is_refused_on_the_query_field(text):
    try:
        parse(text, LIMITS)
    except Invalid as exc:
        assert list(exc.errors) == ["query"]


def test_precedence_and_grouping():
    a, b, c = (Term("id", x * 3) for x in "abc")  # token ids are 3 characters or more
    assert parse("id:aaa OR id:bbb AND id:ccc", LIMITS) == Or((a, And((b, c))))
    assert parse("(id:aaa OR id:bbb) id:ccc", LIMITS) == And((Or((a, b)), c))
    assert parse("NOT id:aaa id:bbb", LIMITS) == And((Not(a), b))
    assert parse("NOT NOT id:aaa", LIMITS) == a
    assert isinstance(parse("created_at:[* TO 2026-01-01}", LIMITS), Range)


@pytest.mark.parametrize("query", ["id:" + "x" * 4000, "(" * 3000 + "id:a" + ")" * 3000,
                                   "NOT " * 900 + "id:a"])
def test_huge_or_deep_queries_are_refused_cleanly(query):
    with pytest.raises(Invalid):
        parse(query, Limits())
