"""One declaration per endpoint: route, access, parameters, bodies and answers, stated once.

`@endpoints.get("/tokens/{id}", ...)` puts the handler in the route table, tells the
authentication middleware what the handler needs (`auth.permissions.declare`) and holds what
`api/openapi.py` turns into the OpenAPI document. The handler returns the body (or
`status, body`); the declared marshmallow schema of that status dumps it, so the wire and the
document cannot differ. A handler may only answer the success statuses it declares.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from marshmallow import Schema, fields
from multidict import MultiMapping

from ..auth import permissions
from . import problems

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"
MERGE_PATCH_JSON = "application/merge-patch+json"
ATTR = "__vaultgraph_endpoint__"

Handler = Callable[[web.Request], Awaitable[Any]]


@dataclass(frozen=True)
class Reply:
    """One success answer: `schema` dumps its JSON body; without one there is no body, or the
    file a raw handler sends (described by `file_schema`)."""

    status: int
    description: str
    schema: type[Schema] | None = None
    media_type: str = JSON
    file_schema: dict | None = None
    headers: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Body:
    """The request body: its schema (what the handler loads it with) and media type."""

    schema: type[Schema] | dict  # a dict: a JSON Schema the handler checks itself
    description: str
    media_type: str = JSON


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    operation_id: str
    summary: str
    tag: str
    access: tuple[str, ...] | str  # permissions (all of them), PUBLIC or AUTHENTICATED
    replies: tuple[Reply, ...]
    description: str = ""
    body: Body | None = None
    path_params: type[Schema] | None = None
    query: tuple[type[Schema], ...] = ()
    errors: tuple[int, ...] = ()  # problem statuses besides those every operation of its kind has
    raw: bool = False  # the handler builds its own response (files, pages, /openapi.json)
    pattern: str | None = None  # the aiohttp pattern, when a regex narrows a path variable
    # A POST that changes nothing (detokenize, search): `Idempotency-Key` is ignored and a retry
    # runs again, so no answer holding revealed data is kept to be shown after the token is
    # deleted or the caller's rule narrowed, and each retry leaves its own full audit event.
    reads_only: bool = False
    # Answer fields never kept for an `Idempotency-Key` replay: a secret the service stores
    # only as a digest (a new API key), which a kept answer, even encrypted, would store a
    # second time. A secret already stored encrypted under the tenant's key (a webhook's) is
    # kept with the rest of the answer, encrypted the same way, and replayed.
    shown_once: tuple[str, ...] = ()

    def reply(self, status: int) -> Reply | None:
        return next((r for r in self.replies if r.status == status), None)


class Endpoints:
    """A route table of declared endpoints (one per api module), like `web.RouteTableDef`."""

    def __init__(self) -> None:
        self._handlers: list[tuple[Endpoint, Handler]] = []

    def __iter__(self) -> Iterator[tuple[Endpoint, Handler]]:
        return iter(self._handlers)

    def routes(self) -> list[web.RouteDef]:
        return [web.route(e.method, e.pattern or e.path, handler)
                for e, handler in self._handlers]

    def route(self, method: str, path: str, **declaration: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            endpoint = Endpoint(method=method.upper(), path=path, **declaration)
            _check(endpoint)
            served = _serve(endpoint, handler)
            self._handlers.append((endpoint, served))
            return served

        return register

    def get(self, path: str, **declaration: Any):
        return self.route("GET", path, **declaration)

    def post(self, path: str, **declaration: Any):
        return self.route("POST", path, **declaration)

    def put(self, path: str, **declaration: Any):
        return self.route("PUT", path, **declaration)

    def patch(self, path: str, **declaration: Any):
        return self.route("PATCH", path, **declaration)

    def delete(self, path: str, **declaration: Any):
        return self.route("DELETE", path, **declaration)


def endpoint_of(handler: Callable) -> Endpoint | None:
    return getattr(handler, ATTR, None)


def _check(endpoint: Endpoint) -> None:
    if not endpoint.replies or any(not 200 <= r.status < 400 for r in endpoint.replies):
        raise ValueError(f"{endpoint.operation_id}: declare its success answers")
    if any(not 400 <= s < 600 for s in endpoint.errors):
        raise ValueError(f"{endpoint.operation_id}: errors are 4xx/5xx statuses")
    permissions.check_access(endpoint.access)


Dumper = Callable[[Any], Any]
# Whether a value is already what its field's dump would make of it (so its own dump).
AsIs = Callable[[Any], bool]
# Fields whose dump of a JSON value of their type is that value: the compiled dumper copies it.
_AS_IS = (fields.Raw, fields.String, fields.Integer, fields.Boolean)
# Distinct key orders remembered per schema (a body's shape is fixed by the code that builds
# it, so few occur); past this, a new one is checked each time it is dumped.
_SHAPES_REMEMBERED = 64


def compile_dumper(schema: type[Schema]) -> Dumper:
    """`schema().dump` for the bodies the services build, compiled once: the schema's fields,
    in its order, nested schemas followed; a value a JSON field would pass unchanged is copied
    as it is (marshmallow's per-value machinery costs ~45 µs a token). A test compares the two
    on live answers; a field type not known here is dumped by marshmallow itself.

    A body already in its dump's shape is its own dump and is returned, not copied: a dict of
    some of the schema's fields under their own names in the schema's order, each list or
    object one the dump would copy unchanged, each nested body in its own dump's shape. A
    presented token is built so (tokens/view.py); copying it again cost a page of fifty as
    much as rendering their masks."""
    return _compile(schema)[0]


def _compile(schema: type[Schema]) -> tuple[Dumper, AsIs]:
    instance = schema()
    plan = [(name, f.data_key or name, *_value_dumper(f))
            for name, f in instance.dump_fields.items()]
    position = {name: i for i, (name, key, _, _) in enumerate(plan) if key == name}
    checked = {name: as_is for name, _, convert, as_is in plan if convert is not None}
    shapes: dict[tuple[str, ...], tuple[tuple[str, AsIs], ...] | None] = {}

    def checks(shape: tuple[str, ...]) -> tuple[tuple[str, AsIs], ...] | None:
        """The values to check in a body of this key order, or None: not its dump's shape
        (a key of a str subclass too: the copy makes it a str, which orjson requires)."""
        at = [position.get(name, -1) if type(name) is str else -1 for name in shape]
        if -1 in at or at != sorted(at) or any(
                name in checked and checked[name] is None for name in shape):
            return None
        return tuple((name, checked[name]) for name in shape if name in checked)

    def as_is(obj: Any) -> bool:
        if type(obj) is not dict:
            return False
        shape = tuple(obj)
        if shape in shapes:
            values = shapes[shape]
        else:
            values = checks(shape)
            if len(shapes) < _SHAPES_REMEMBERED:
                shapes[shape] = values
        if values is None:
            return False
        for name, value_as_is in values:
            value = obj[name]
            if value is not None and not value_as_is(value):
                return False
        return True

    def dump(obj: Any) -> Any:
        if obj is None:
            return None
        if as_is(obj):
            return obj
        out = {}
        for attribute, key, convert, _ in plan:
            if attribute in obj:
                value = obj[attribute]
                out[key] = value if convert is None or value is None else convert(value)
        return out

    return dump, as_is


def _value_dumper(field: fields.Field) -> tuple[Dumper | None, AsIs | None]:
    """How the dump converts a field's value (None: copied as it is), and whether a value
    needs no converting (None: any value may)."""
    if isinstance(field, fields.Nested) and not field.many:
        return _compile(type(field.schema))
    if isinstance(field, fields.List):
        inner, inner_as_is = _value_dumper(field.inner)
        if inner is None:
            return list, _is_list
        return (lambda items: [inner(item) for item in items],
                None if inner_as_is is None else
                lambda items: type(items) is list and all(map(inner_as_is, items)))
    if isinstance(field, fields.Dict):
        inner = _value_dumper(field.value_field)[0] if field.value_field is not None else None
        if inner is None and (field.key_field is None or type(field.key_field) in _AS_IS):
            return dict, _is_dict
    elif type(field) in _AS_IS:
        return None, None
    return lambda value: field.serialize("value", {"value": value}), None


def _query_check(schemas: tuple[type[Schema], ...]) -> Callable[[MultiMapping[str]], None] | None:
    """How a route that declares query parameters checks a query string: a parameter it does
    not declare (a misspelt filter would otherwise widen the answer unseen) and one given twice
    that takes one value are 400s naming the parameter. A schema's `QUERY_PREFIXES` declare
    parameters by their start (`metadata.<key>`), each read as the route documents it. Routes
    that declare none take no parameters and read none, so nothing is checked there."""
    if not schemas:
        return None
    names: set[str] = set()
    repeatable: set[str] = set()
    prefixes: tuple[str, ...] = ()
    for schema in schemas:
        for name, declared in schema._declared_fields.items():
            key = declared.data_key or name
            names.add(key)
            if isinstance(declared, fields.List):
                repeatable.add(key)
        prefixes += getattr(schema, "QUERY_PREFIXES", ())

    def check(query: MultiMapping[str]) -> None:
        seen: set[str] = set()
        for name, _ in query.items():  # every pair: `keys()` lists a repeated name once
            if name in names:
                if name in seen and name not in repeatable:
                    raise problems.invalid(name, "must be given once")
                seen.add(name)
            elif not (prefixes and name.startswith(prefixes)):
                raise problems.invalid(name, "is not a query parameter of this route")

    return check


def _is_list(value: Any) -> bool:
    return type(value) is list


def _is_dict(value: Any) -> bool:
    return type(value) is dict


def _serve(endpoint: Endpoint, handler: Handler) -> Handler:
    # Dumpers are compiled once here: a request only dumps.
    dumpers = {r.status: compile_dumper(r.schema) if r.schema is not None else None
               for r in endpoint.replies}
    default = endpoint.replies[0].status

    check_query = _query_check(endpoint.query)

    @functools.wraps(handler)
    async def serve(request: web.Request) -> web.StreamResponse:
        if check_query is not None and request.query_string:
            check_query(request.query)
        result = await handler(request)
        if endpoint.raw:
            return result
        status, body = result if isinstance(result, tuple) else (default, result)
        if status not in dumpers:
            raise RuntimeError(f"{endpoint.operation_id} answered an undeclared {status}")
        dumper = dumpers[status]
        if dumper is None:
            return web.Response(status=status)
        return web.Response(body=orjson.dumps(dumper(body)), status=status,
                            content_type=JSON)

    setattr(serve, ATTR, endpoint)
    permissions.declare(serve, endpoint.access)
    return serve
