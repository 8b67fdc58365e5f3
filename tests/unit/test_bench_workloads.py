"""The benchmark's workloads: the graph searches walk tokens whose links no other workload
changes, so a search measures the same graph however long the run before it."""

from __future__ import annotations

import random
import sys

import pytest

from vaultgraph.settings import PROJECT_ROOT

# bench/ is a top-level package of the checkout, not part of the installed distribution.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from bench.dataset import PER_CUSTOMER
from bench.workloads import WORKLOADS, Context

CUSTOMERS = 7


def _context(customers: int = CUSTOMERS) -> Context:
    ids = [f"t{i:04d}" for i in range(customers * PER_CUSTOMER)]
    return Context(tenant=None, ids=ids, catalog=None, driver=None)


def _items(name: str, ctx: Context) -> list:
    workload = next(w for w in WORKLOADS if w.name == name)
    return workload.items(ctx, random.Random(name))


def _linked_ids(ctx: Context) -> tuple[set[str], set[str]]:
    """The tokens the link-adding workloads touch, and the ones the graph searches name."""
    linked = {child for _, child in _items("associate", ctx)}
    linked |= {parent for parent, _ in _items("associate", ctx)}
    linked |= {parent for parent, _ in _items("create_child", ctx)}
    searched = {q.split(":", 1)[1] for name in ("search_ancestor", "search_descendant")
                for q in _items(name, ctx)}
    return linked, searched


def test_links_are_added_only_among_customers_the_searches_do_not_walk():
    ctx = _context()
    linked, searched = _linked_ids(ctx)
    index = {token_id: i for i, token_id in enumerate(ctx.ids)}
    linked_customers = {index[t] // PER_CUSTOMER for t in linked}
    searched_customers = {index[t] // PER_CUSTOMER for t in searched}
    assert linked_customers and searched_customers
    assert not linked_customers & searched_customers
    # every customer is either walked or linked, about half each
    assert linked_customers | searched_customers == set(range(CUSTOMERS))
    assert searched_customers == set(range(CUSTOMERS // 2))


def test_the_ancestor_search_names_roots_and_the_descendant_search_cards():
    ctx = _context()
    index = {token_id: i for i, token_id in enumerate(ctx.ids)}
    roots = {q.split(":", 1)[1] for q in _items("search_ancestor", ctx)}
    cards = {q.split(":", 1)[1] for q in _items("search_descendant", ctx)}
    assert all(index[t] % PER_CUSTOMER == 0 for t in roots)
    assert all(index[t] % PER_CUSTOMER for t in cards)


def test_one_customer_is_both_walked_and_linked():
    ctx = _context(customers=1)
    linked, searched = _linked_ids(ctx)
    # too few customers to split: the links go anywhere (20,000 draws reach every token), and
    # the searches name the customer's root and its cards
    assert linked == set(ctx.ids)
    assert searched == set(ctx.ids)


@pytest.mark.parametrize(("customers", "extra", "walked"), [(2, 0, 1), (3, 0, 1), (7, 25, 3)])
def test_the_split_falls_on_a_customers_edge(customers, extra, walked):
    ctx = _context(customers)
    ctx.ids += [f"x{i:04d}" for i in range(extra)]  # a last customer not yet full
    linked, searched = _linked_ids(ctx)
    index = {token_id: i for i, token_id in enumerate(ctx.ids)}
    assert {index[t] // PER_CUSTOMER for t in searched} == set(range(walked))
    assert min(index[t] for t in linked) >= walked * PER_CUSTOMER
    if extra:
        assert any(t.startswith("x") for t in linked)
