"""Endpoint declarations: what they refuse, and the compiled dumpers against marshmallow's own."""

from __future__ import annotations

import orjson
import pytest
from aiohttp.test_utils import make_mocked_request

from vaultgraph.api.endpoints import Endpoints, Reply, compile_dumper, endpoint_of
from vaultgraph.api.problems import ProblemSchema
from vaultgraph.api.schemas import TokenGraphSchema, TokenPageSchema
from vaultgraph.applications.schemas import ApplicationBodySchema, NewApplicationSchema
from vaultgraph.auth.permissions import PUBLIC, TOKEN_READ, declared
from vaultgraph.tokens.schemas import ChildTokenSchema, TokenSchema

TOKEN = {
    "id": "tok-1", "tenant_id": "t", "type": "card",
    "data": {"number": "4242424242424242", "nested": [{"a": None}]},
    "mask": "{{ data.number }}", "fingerprint": "f", "fingerprint_expression": "e",
    "containers": ["/pci/"], "metadata": {"k": "v"}, "search_indexes": ["{{ data }}"],
    "created_by": "a", "created_at": "2026-01-01T00:00:00+00:00",
    "modified_by": None, "expires_at": "2027-01-01T00:00:00+00:00",
    "_extras": {"deduplicated": True, "not_declared": 1},
    "not_declared": "dropped",
}
CASES = [
    (TokenSchema, TOKEN),
    (TokenSchema, {"id": "tok-2", "type": "token", "data": 0}),
    (ChildTokenSchema, TOKEN),
    (TokenPageSchema, {"pagination": {"page_size": 2, "next": None}, "data": [TOKEN, TOKEN]}),
    (TokenGraphSchema, {"root": "tok-1", "depth": 1, "direction": "both", "truncated": False,
                        "nodes": [TOKEN], "edges": [{"parent_id": "a", "child_id": "b",
                                                     "x": 1}]}),
    (ApplicationBodySchema, {"id": "i", "tenant_id": "t", "name": "n", "permissions": ["p"],
                             "rules": [{"description": "", "priority": 0, "container": "/",
                                        "transform": "mask", "permissions": ["token:read"]}],
                             "created_at": "c", "created_by": None}),
    (NewApplicationSchema, {"id": "i", "name": "n", "key": "vg_x", "rules": []}),
    (ProblemSchema, {"type": "t", "title": "Bad", "status": 400, "detail": "d",
                     "errors": {"a.b": ["m"]}}),
]


# TOKEN as the view builds it: only declared fields, in the schema's order, JSON values.
SHAPED = {k: v for k, v in TOKEN.items() if k not in ("not_declared", "_extras")}
SHAPED["_extras"] = {"deduplicated": True}
NOT_SHAPED = [
    {**SHAPED, "not_declared": "dropped"},                       # a key the schema lacks
    {"type": "card", "id": "tok-1"},                              # out of the schema's order
    {**SHAPED, "containers": ("/pci/",)},                         # a list field's tuple
    {**SHAPED, "_extras": {"deduplicated": True, "not_declared": 1}},   # nested, not shaped
    {**SHAPED, "metadata": type("M", (dict,), {})(k="v")},        # a dict subclass
    {type("K", (str,), {})("id"): "tok-1", "type": "card"},       # a key of a str subclass
]


@pytest.mark.parametrize("schema, body", CASES + [(TokenSchema, b) for b in NOT_SHAPED])
def test_compiled_dumper_equals_marshmallow_dump(schema, body):
    expected = schema().dump(body)
    assert compile_dumper(schema)(body) == expected
    assert list(compile_dumper(schema)(body)) == list(expected)  # same key order


def test_a_body_in_its_dumps_shape_is_its_own_dump_and_any_other_is_copied():
    page = {"pagination": {"page_size": 2, "next": None}, "data": [SHAPED, dict(SHAPED)]}
    assert compile_dumper(TokenPageSchema)(page) is page
    assert TokenPageSchema().dump(page) == page
    dump = compile_dumper(TokenSchema)
    assert dump(SHAPED) is SHAPED
    assert all(dump(body) is not body for body in NOT_SHAPED)
    assert type(dump(NOT_SHAPED[2])["containers"]) is list
    assert type(dump(NOT_SHAPED[4])["metadata"]) is dict
    assert orjson.loads(orjson.dumps(dump(NOT_SHAPED[5]))) == {"id": "tok-1", "type": "card"}
    one_not_shaped = {**page, "data": [SHAPED, NOT_SHAPED[0]]}
    dumped = compile_dumper(TokenPageSchema)(one_not_shaped)
    assert dumped is not one_not_shaped and "not_declared" not in dumped["data"][1]


def test_a_declaration_names_known_permissions_and_its_answers():
    endpoints = Endpoints()
    with pytest.raises(ValueError, match="unknown access"):
        endpoints.get("/x", operation_id="x", summary="x", tag="T", access=("token:steal",),
                      replies=(Reply(200, "ok"),))(_handler)
    with pytest.raises(ValueError, match="success answers"):
        endpoints.get("/x", operation_id="x", summary="x", tag="T", access=PUBLIC,
                      replies=())(_handler)
    served = endpoints.get("/x", operation_id="x", summary="x", tag="T", access=(TOKEN_READ,),
                           replies=(Reply(200, "ok", TokenSchema),))(_handler)
    assert declared(served) == (TOKEN_READ,)
    assert endpoint_of(served).operation_id == "x"
    assert [route.path for route in endpoints.routes()] == ["/x"]


async def _handler(request):
    return 202, {"id": "x"}


async def test_a_handler_may_not_answer_an_undeclared_status():
    endpoints = Endpoints()
    served = endpoints.get("/x", operation_id="x", summary="x", tag="T", access=PUBLIC,
                           replies=(Reply(200, "ok", TokenSchema),))(_handler)
    with pytest.raises(RuntimeError, match="undeclared 202"):
        await served(make_mocked_request("GET", "/x"))
