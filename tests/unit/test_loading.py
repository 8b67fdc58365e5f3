"""Compiled body loaders (api/loading.py) against marshmallow's own `Schema().load`: the same
result, key order included, or the same errors, on bodies built from valid and invalid values
of every field; and the plain bodies never reach marshmallow."""

from __future__ import annotations

import random

import pytest
from marshmallow import Schema, ValidationError, fields, post_load, validates

from vaultgraph.api import loading
from vaultgraph.api.loading import compile_loader
from vaultgraph.search.schemas import SearchBodySchema
from vaultgraph.tokens.schemas import CreateTokenSchema, UpdateTokenSchema

CARD = {"number": "4242424242424242", "expiration_month": 12}
DEEP: list = []
for _ in range(70):  # deeper than MAX_DATA_DEPTH
    DEEP = [DEEP]
UNKNOWN = ("unknown", "Type", "Query")
# Each field's candidates: accepted as they are, refused, or converted by marshmallow.
VALUES = {
    "id": ["tok-123", "{{ data.number | last4 }}", "ab", "a/b/c", "{{ data.number | nope }}",
           "{% if %}", None, 5, ["x"], "tok\u200bx"],
    "type": ["card", "token", "not-a-type", None, 3, ""],
    "data": [CARD, "4242424242424242", 0, [1, [2]], None, True, {"a": {"b": None}},
             DEEP],
    "mask": ["{{ data.number | card_mask }}", {"number": "{{ data.number | last4 }}"}, None,
             "{{ data.number | nope }}", "{% for %}", 7, ["{{ data }}"]],
    "containers": [["/pci/high/"], ["/a/", "/B/c/"], [], None, "/pci/", ["/a/", 5], [None],
                   ["pci"], ["/a b/"], ["/" + "x/" * 30], ("/a/",), {"/a/": 1}],
    "metadata": [{"customer": "c-1"}, {}, None, {"k": None}, {"k": 5}, {"": "v"},
                 {"k\u0007": "v"}, {"k" * 200: "v"}, {"k": "v" * 2000}, ["k"], "k=v",
                 {"a": "1", "b": [2]}],
    "search_indexes": [["{{ data.number | last4 }}"], [], None, ["{{ nope | }}"], [3],
                       ["{{ data }}" * 500], "{{ data }}", [None]],
    "fingerprint_expression": ["{{ data.number }}", None, "{{ | }}", 1, ""],
    "deduplicate_token": [True, False, None, "yes", "no", 1, 0, 1.0, "maybe", [], {}],
    "expires_at": ["2030-01-01T00:00:00Z", "tomorrow", None, 5, ""],
    "unknown": [1, None],
    "Type": ["card"],
}
# A search body's: the page size is passed on as given (api/paging.py checks it).
SEARCH_VALUES = {
    "query": ["type:card", "descendant:tok-1 AND metadata.a:b", "", "x" * 3000, None, 5,
              ["type:card"], {"q": 1}],
    "size": [10, 1, 0, -1, 10.5, 10 ** 30, "ten", "10", True, None, [10]],
    "start": ["WyIyMDI2Il0", "", "not a cursor", None, 5, ["a"]],
    "unknown": [1, None],
    "Query": ["type:card"],
}


def _outcome(load, body):
    try:
        result = load(body)
    except ValidationError as exc:
        return "refused", exc.normalized_messages()
    return "loaded", result, list(result)


def _bodies(schema, rng: random.Random, count: int):
    values = SEARCH_VALUES if schema is SearchBodySchema else VALUES
    names = [name for name in values if name in schema().fields or name in UNKNOWN]
    for _ in range(count):
        if schema is SearchBodySchema:
            body = {"query": "type:card"}
        else:
            body = {"type": "card", "data": CARD} if "type" in names else {"data": CARD}
        for name in rng.sample(names, rng.randint(0, 4)):
            body[name] = rng.choice(values[name])
        if rng.random() < 0.1:
            body.pop(rng.choice(list(body)))
        yield body


@pytest.mark.parametrize("schema", [CreateTokenSchema, UpdateTokenSchema, SearchBodySchema])
def test_a_compiled_loader_loads_as_marshmallow_does(schema):
    compiled, marshmallow = compile_loader(schema), schema().load
    assert loading._plan(schema()) is not None  # the schema is one the compiler knows
    outcomes = set()
    for body in _bodies(schema, random.Random(schema.__name__), 3000):
        expected = _outcome(marshmallow, body)
        assert _outcome(compiled, body) == expected, body
        outcomes.add(expected[0])
    assert outcomes == {"loaded", "refused"}


@pytest.mark.parametrize("value", [[], "body", 3, None])
def test_a_body_that_is_not_an_object_is_refused_as_marshmallow_refuses_it(value):
    with pytest.raises(ValidationError) as exc:
        compile_loader(CreateTokenSchema)(value)
    assert exc.value.normalized_messages() == {"_schema": ["Invalid input type."]}


def test_a_plain_body_is_loaded_without_marshmallow(monkeypatch):
    loader = compile_loader(CreateTokenSchema)

    def refuse(*_, **__):
        raise AssertionError("marshmallow's load was called")

    monkeypatch.setattr(Schema, "load", refuse)
    body = {"type": "card", "data": CARD, "metadata": {"customer": "c-1"},
            "containers": ["/PCI/high/"], "deduplicate_token": True, "id": "tok-1",
            "mask": None, "search_indexes": ["{{ data.number | last4 }}"]}
    loaded = loader(body)
    assert loaded == body
    assert list(loaded) == ["mask", "containers", "metadata", "search_indexes",
                            "deduplicate_token", "id", "type", "data"]
    assert loaded["containers"] is not body["containers"]  # a copy, as marshmallow gives
    search = {"query": "descendant:tok-1", "size": 25, "start": None}
    assert compile_loader(SearchBodySchema)(search) == search


def test_a_value_marshmallow_converts_is_loaded_by_marshmallow():
    assert compile_loader(CreateTokenSchema)(
        {"type": "card", "data": CARD, "deduplicate_token": "yes"})["deduplicate_token"] is True


def test_a_schema_with_hooks_or_unknown_fields_is_loaded_by_marshmallow():
    class WithPostLoad(Schema):
        name = fields.String()

        @post_load
        def _shout(self, data, **_):
            return {"name": data["name"].upper()}

    class WithInteger(Schema):
        count = fields.Integer()

    assert compile_loader(WithPostLoad)({"name": "a"}) == {"name": "A"}
    assert compile_loader(WithInteger)({"count": "3"}) == {"count": 3}
    assert loading._plan(WithPostLoad()) is None
    assert loading._plan(WithInteger()) is None


def test_a_validator_that_refuses_leaves_the_errors_to_marshmallow():
    def _not_no(value):
        if value == "no":
            raise ValidationError("no is no name")

    class Named(Schema):
        name = fields.String(validate=_not_no)
        tags = fields.List(fields.String(allow_none=True))

        @validates("tags")
        def _tags(self, value, **_):
            if "bad" in value:
                raise ValidationError("bad tag")

    loader = compile_loader(Named)
    assert loader({"name": "yes", "tags": ["a", None]}) == {"name": "yes", "tags": ["a", None]}
    for body, errors in [({"name": "no"}, {"name": ["no is no name"]}),
                         ({"tags": ["bad"]}, {"tags": ["bad tag"]})]:
        with pytest.raises(ValidationError) as exc:
            loader(body)
        assert exc.value.normalized_messages() == errors
