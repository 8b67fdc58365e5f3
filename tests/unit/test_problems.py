"""Problem bodies: whatever built their error list, it is bounded (names can be input)."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields

from vaultgraph.api.middleware import _flatten
from vaultgraph.api.problems import BadRequest
from vaultgraph.errors import MAX_FIELD_NAME, MAX_LISTED_ERRORS, add_error, field_name


def test_a_problem_lists_at_most_the_bound_with_names_cut():
    errors = {"x" * 5_000 + str(i): ["bad"] for i in range(1_000)}
    body = BadRequest("The request is invalid.", errors=errors).body()
    assert len(body["errors"]) == MAX_LISTED_ERRORS
    assert all(len(name) == MAX_FIELD_NAME and "…" in name for name in body["errors"])
    assert BadRequest(errors={"short": ["bad"]}).body()["errors"] == {"short": ["bad"]}


def test_add_error_stops_at_the_bound():
    errors: dict[str, list[str]] = {}
    added = [add_error(errors, f"f{i}", ["bad"]) for i in range(MAX_LISTED_ERRORS + 5)]
    assert added.count(True) == MAX_LISTED_ERRORS and not any(added[MAX_LISTED_ERRORS:])
    assert field_name("a" * MAX_FIELD_NAME) == "a" * MAX_FIELD_NAME


def test_unknown_fields_under_a_long_key_flatten_to_a_bounded_list():
    class Inner(Schema):
        known = fields.String()

    class Outer(Schema):
        inner = fields.Dict(keys=fields.String(), values=fields.Nested(Inner))

    payload = {"inner": {"k" * 10_000: {f"u{i}": 1 for i in range(5_000)}}}
    try:
        Outer().load(payload)
    except ValidationError as exc:
        flat = _flatten(exc.normalized_messages())
    else:
        raise AssertionError("the payload should not load")
    assert len(flat) == MAX_LISTED_ERRORS
    assert all(len(name) <= MAX_FIELD_NAME for name in flat)
