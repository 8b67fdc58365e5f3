"""The search query language, fuzzed (hypothesis): any text either parses or is refused with a
400 on `query`, and no character of the query ever reaches the statement text — the text is
the same for every query of one shape, and every value travels as a parameter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultgraph.catalog import Catalog
from vaultgraph.errors import Invalid
from vaultgraph.repository.search import SearchStatements
from vaultgraph.search.plan import drivers, residual
from vaultgraph.search.query import And, Limits, Not, Or, Range, Term, leaves, parse, with_values
from vaultgraph.settings import PROJECT_ROOT

LIMITS = Limits(max_length=4000, max_terms=40, max_depth=12)
STATEMENTS = SearchStatements(Catalog.load(PROJECT_ROOT / "cypher"))
FIELDS = ["id", "type", "fingerprint", "data", "parent", "child", "ancestor", "descendant",
          "metadata.colour", "metadata.Key-1"]
DATES = ["2026-01-01", "2026-11-23T10:00:00Z", "2026-11-23T10:00:00.123456+02:00", "*"]
values = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)


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
    return f"{draw(st.sampled_from(FIELDS))}:{quoted(value)}", [value]


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


def compose(tree):
    seeks = drivers(tree)
    if seeks is None:
        return None
    return STATEMENTS.compose(tree, seeks, residual(tree, seeks))


def blank(tree):
    return with_values(tree, lambda term: "v")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_no_query_character_reaches_the_statement(generated):
    text, expected_values = generated
    tree = parse(text, LIMITS)
    # Every value survives the parse exactly (quotes and escapes undone) ...
    got = [leaf.value for leaf in leaves(tree) if isinstance(leaf, Term)]
    assert sorted(expected_values) == sorted(got)
    composed = compose(tree)
    if composed is None:
        return
    statement, params = composed
    # ... and travels as a parameter, while the text is the shape's own: the same text for
    # the same shape with every value replaced.
    assert statement.text == compose(blank(tree))[0].text
    assert sorted(got) == sorted(v for k, v in params.items() if k.endswith("_value"))
    for value in got:
        if len(value) >= 3 and value not in STATEMENT_CORPUS:
            assert value not in statement.text


STATEMENT_CORPUS = "\n".join(Catalog.load(PROJECT_ROOT / "cypher").text(n)
                             for n in Catalog.load(PROJECT_ROOT / "cypher").names("search"))


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_or_is_refused_on_the_query_field(text):
    try:
        tree = parse(text, LIMITS)
    except Invalid as exc:
        assert list(exc.errors) == ["query"]
        return
    composed = compose(tree)
    if composed is not None:
        assert composed[0].text == compose(blank(tree))[0].text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('id:type()"[]{}*\\ ANDORTNX-_/.')), max_size=60))
def test_syntax_soup_parses_or_is_refused_on_the_query_field(text):
    try:
        parse(text, LIMITS)
    except Invalid as exc:
        assert list(exc.errors) == ["query"]


def test_precedence_and_grouping():
    a, b, c = (Term("id", x) for x in "abc")
    assert parse("id:a OR id:b AND id:c", LIMITS) == Or((a, And((b, c))))
    assert parse("(id:a OR id:b) id:c", LIMITS) == And((Or((a, b)), c))
    assert parse("NOT id:a id:b", LIMITS) == And((Not(a), b))
    assert parse("NOT NOT id:a", LIMITS) == a
    assert isinstance(parse("created_at:[* TO 2026-01-01}", LIMITS), Range)


@pytest.mark.parametrize("query", ["id:" + "x" * 4000, "(" * 3000 + "id:a" + ")" * 3000,
                                   "NOT " * 900 + "id:a"])
def test_huge_or_deep_queries_are_refused_cleanly(query):
    with pytest.raises(Invalid):
        parse(query, Limits())
