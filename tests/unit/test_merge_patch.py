"""RFC 7386 JSON Merge Patch (vaultgraph/tokens/merge_patch.py), which PATCH /tokens applies to
`data`, `mask` and `metadata`: the RFC's own examples (appendix A) and the edges around them."""

from __future__ import annotations

import copy

import pytest

from vaultgraph.tokens.merge_patch import merge_patch


@pytest.mark.parametrize(("target", "patch", "result"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ({"a": 1}, {}, {"a": 1}),
    ({"a": 1}, {"b": None}, {"a": 1}),  # removing what is not there is no error
    (None, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ({"a": {"x": 1}}, {"a": {"y": 0, "z": False}}, {"a": {"x": 1, "y": 0, "z": False}}),
])
def test_the_rfc_7386_examples(target, patch, result):
    assert merge_patch(target, patch) == result


def test_the_target_is_not_modified():
    target = {"a": {"b": 1}, "c": 2}
    before = copy.deepcopy(target)
    merged = merge_patch(target, {"a": {"b": None}, "c": None, "d": 3})
    assert merged == {"a": {}, "d": 3}
    assert target == before
