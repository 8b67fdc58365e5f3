"""Builders for the shapes the description repeats: references, bodies, operations, paths."""

from __future__ import annotations

import re
from http import HTTPStatus

from ..auth.permissions import AUTHENTICATED, PUBLIC

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"
MERGE_PATCH_JSON = "application/merge-patch+json"

# Status → name of the shared problem response in components/responses.
PROBLEM_RESPONSES = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
    413: "PayloadTooLarge", 415: "UnsupportedMediaType", 503: "Unavailable",
}
# Every operation with a request body can answer these.
BODY_ERRORS = (400, 413, 415)

_TEMPLATE_VARIABLE = re.compile(r"\{([^}]+)\}")


def ref(name: str, kind: str = "schemas") -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def content(schema: dict, media_type: str = JSON) -> dict:
    return {media_type: {"schema": schema}}


def body(schema: str, description: str, media_type: str = JSON) -> dict:
    return {"required": True, "description": description,
            "content": content(ref(schema), media_type)}


def returns(status: int, description: str, schema: str | None = None) -> dict:
    """One success response; `schema` None means no body."""
    response: dict = {"description": description}
    if schema is not None:
        response["content"] = content(ref(schema))
    return {str(status): response}


def no_content(description: str) -> dict:
    return returns(204, description)


def problem(status: int, description: str | None = None) -> dict:
    """A problem+json response; with `description`, inline instead of the shared one."""
    if description is None:
        return ref(PROBLEM_RESPONSES[status], "responses")
    return {"description": description, "content": content(ref("Problem"), PROBLEM_JSON)}


def operation(operation_id: str, summary: str, *, tag: str,
              permissions: tuple[str, ...] | str, responses: dict, description: str = "",
              parameters: tuple = (), request: dict | None = None, errors: tuple = ()) -> dict:
    """One operation. `permissions` is what its handler declares: PUBLIC (no API key),
    AUTHENTICATED (a key, no particular permission: `x-permission` is empty) or the permissions
    it needs, all of them (listed in `x-permission`)."""
    op: dict = {"operationId": operation_id, "summary": summary, "tags": [tag],
                "description": "\n\n".join(filter(None, (_needs(permissions), description)))}
    if parameters:
        op["parameters"] = list(parameters)
    if request is not None:
        op["requestBody"] = request
    codes = list(errors)
    if permissions == PUBLIC:
        op["security"] = []
    elif permissions == AUTHENTICATED:
        op["x-permission"] = []
        codes += (401, 503)
    else:
        op["x-permission"] = list(permissions)
        codes += (401, 403, 503)
    if request is not None:
        codes += BODY_ERRORS
    op["responses"] = {**responses}
    for code in sorted(set(codes)):
        op["responses"].setdefault(str(code), problem(code))
    return op


def _needs(permissions: tuple[str, ...] | str) -> str:
    # Renderers do not all show `x-permission`; readers see it here too.
    if permissions == PUBLIC:
        return "**Public**: no API key."
    if permissions == AUTHENTICATED:
        return "**Permission**: none beyond a working API key."
    return "**Permission**: " + " and ".join(f"`{p}`" for p in permissions) + "."


def declaration(op: dict) -> tuple[str, ...] | str:
    """What the handler of a described operation must declare (`permissions.declared`)."""
    if op.get("security") == []:
        return PUBLIC
    return tuple(op["x-permission"]) or AUTHENTICATED


def path_item(template: str, params: dict[str, str] | None = None, **operations: dict):
    """(template, path item); every `{variable}` of the template is described by `params`."""
    params = params or {}
    variables = _TEMPLATE_VARIABLE.findall(template)
    if sorted(variables) != sorted(params):
        raise ValueError(f"{template}: path parameters {variables} described as {sorted(params)}")
    item: dict = dict(operations)
    if variables:
        item["parameters"] = [path_parameter(name, params[name]) for name in variables]
    return template, item


def path_parameter(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}}


def query(name: str, description: str, schema: dict, *, repeatable: bool = False) -> dict:
    param = {"name": name, "in": "query", "required": False, "description": description}
    if repeatable:
        param.update(schema={"type": "array", "items": schema}, style="form", explode=True)
    else:
        param["schema"] = schema
    return param


def status_phrase(status: int) -> str:
    return HTTPStatus(status).phrase
