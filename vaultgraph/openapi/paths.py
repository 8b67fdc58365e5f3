"""Every operation of the service, grouped as the spec's sections are.

Each operation states what its handler declares (PUBLIC, AUTHENTICATED or permissions); a test
checks that the two agree.
"""

from __future__ import annotations

from ..auth.permissions import (
    APPLICATION_CREATE,
    APPLICATION_DELETE,
    APPLICATION_READ,
    APPLICATION_UPDATE,
    AUTHENTICATED,
    PUBLIC,
    TOKEN_CREATE,
    TOKEN_DELETE,
    TOKEN_READ,
    TOKEN_UPDATE,
)
from .shapes import (
    MERGE_PATCH_JSON,
    body,
    no_content,
    operation,
    path_item,
    problem,
    ref,
    returns,
)

TOKEN_ID = "Token id."
PARENT_ID = "Parent token id."
CHILD_ID = "Child token id."
APPLICATION_ID = "Application id."

PAGE = (ref("PageSize", "parameters"), ref("PageStart", "parameters"))
TOKEN_FILTERS = (ref("TokenIds", "parameters"), ref("TokenTypes", "parameters"))


def paths() -> dict:
    return dict([*_tokens(), *_associations(), *_applications(), *_operations()])


def _token_created() -> dict:
    return {**returns(201, "The token created.", "Token"),
            **returns(200, "`deduplicate_token` matched an existing token, returned instead "
                           "(`_extras.deduplicated`).", "DeduplicatedToken")}


def _tokens():
    tag = "Tokens"
    yield path_item(
        "/tokens",
        post=operation(
            "createToken", "Create a token", tag=tag, permissions=(TOKEN_CREATE,),
            request=body("CreateToken", "The token (spec §4.1)."),
            description="`token:create` on the token's containers (403 otherwise).",
            responses=_token_created(), errors=(409,)),
        get=operation(
            "listTokens", "List tokens", tag=tag, permissions=(TOKEN_READ,),
            description="Filters are ANDed. `metadata.<key>=<value>` (repeatable with distinct "
                        "keys) matches metadata exactly and case-insensitively; a repeated key "
                        "is ignored. Data is returned per the caller's access rules.",
            parameters=(*TOKEN_FILTERS, *PAGE),
            responses=returns(200, "A page of tokens.", "TokenPage"), errors=(400,)))
    yield path_item(
        "/tokens/{id}", {"id": TOKEN_ID},
        get=operation(
            "getToken", "Get a token", tag=tag, permissions=(TOKEN_READ,),
            responses=returns(200, "The token, with data per the caller's access rules.",
                              "Token"), errors=(404,)),
        patch=operation(
            "updateToken", "Update a token", tag=tag, permissions=(TOKEN_UPDATE,),
            description="`token:update` on the token, and on its new containers when it "
                        "moves. Changing `mask`, `fingerprint_expression` or `search_indexes`, "
                        "or moving the token into containers where the caller would read more "
                        "of it, also needs a rule that reveals the token to the caller (403): "
                        "plaintext always takes a reveal rule.\n\n"
                        "When the update makes the token equal to an existing one under "
                        "`deduplicate_token`, the two are merged and the existing token is "
                        "returned, redacted if the caller may not read it.",
            request=body("UpdateToken", "A JSON merge patch (RFC 7386).", MERGE_PATCH_JSON),
            responses=returns(200, "The updated token.", "Token"), errors=(404,)),
        delete=operation(
            "deleteToken", "Delete a token", tag=tag, permissions=(TOKEN_DELETE,),
            description="Data is removed for good; an audit reference of the token remains.",
            responses=no_content("Deleted."), errors=(404,)))


def _associations():
    tag = "Associations"
    yield path_item(
        "/tokens/{parent_id}/children/{child_id}", {"parent_id": PARENT_ID, "child_id": CHILD_ID},
        post=operation(
            "createAssociation", "Link a parent token to a child token", tag=tag,
            permissions=(TOKEN_READ,),
            description="`token:read` on both tokens: an end that is unknown, expired, outside "
                        "the caller's rules or in another tenant answers 404 like an unknown "
                        "token. Idempotent: linking again changes nothing (204). A two-way link "
                        "is two associations. A token cannot be its own child (400).",
            responses={**returns(201, "Linked.", "Association"),
                       **no_content("Already linked: nothing changed, no body.")},
            errors=(400, 404)),
        delete=operation(
            "deleteAssociation", "Unlink a child token from its parent", tag=tag,
            permissions=(TOKEN_DELETE,),
            description="`token:delete` on both tokens: an end outside the caller's rules "
                        "answers 404 like an unknown token. 404 too when there is no link from "
                        "that parent to that child; 400 when both ids are the same. The tokens "
                        "themselves stay.",
            responses=no_content("Unlinked."), errors=(400, 404)))
    yield path_item(
        "/tokens/{parent_id}/children", {"parent_id": PARENT_ID},
        post=operation(
            "createChildToken", "Create a child token", tag=tag,
            permissions=(TOKEN_CREATE, TOKEN_READ),
            description="`token:create` on the child's containers, `token:read` on the "
                        "parent (404 like an unknown token otherwise). The token and its link "
                        "are written together: both or neither. The response omits data, mask "
                        "and search_indexes.",
            request=body("CreateToken", "The child token (as Create Token)."),
            responses={
                **returns(201, "The child token created and linked.", "ChildToken"),
                **returns(200, "`deduplicate_token` matched an existing token, returned "
                               "instead (`_extras.deduplicated`); it is linked under the "
                               "parent when the caller may read it, and left unlinked "
                               "otherwise.", "DeduplicatedChildToken")},
            errors=(404, 409)),
        get=operation(
            "listChildTokens", "List child tokens", tag=tag, permissions=(TOKEN_READ,),
            parameters=(*TOKEN_FILTERS, *PAGE),
            responses=returns(200, "A page of child tokens.", "TokenPage"), errors=(400, 404)))
    yield path_item(
        "/tokens/{id}/parents", {"id": TOKEN_ID},
        get=operation(
            "listParentTokens", "List parent tokens", tag=tag, permissions=(TOKEN_READ,),
            parameters=(*TOKEN_FILTERS, *PAGE),
            responses=returns(200, "A page of parent tokens.", "TokenPage"), errors=(400, 404)))
    yield path_item(
        "/tokens/{id}/graph", {"id": TOKEN_ID},
        get=operation(
            "getTokenGraph", "Get the graph around a token", tag=tag, permissions=(TOKEN_READ,),
            description="The token, the tokens linked to it within `depth` links that the "
                        "caller may read (following `direction`), and the links among them. "
                        "A bad `depth` or `direction` is a 400 naming it.",
            parameters=(ref("GraphDepth", "parameters"), ref("GraphDirection", "parameters")),
            responses=returns(200, "The graph.", "TokenGraph"), errors=(400, 404)))


_NO_LOCK_OUT = ("No self lock-out: a tenant could otherwise lose its last management key; use "
                "another application's key.")


def _applications():
    tag = "Applications"
    yield path_item(
        "/applications",
        post=operation(
            "createApplication", "Create an application", tag=tag,
            permissions=(APPLICATION_CREATE,),
            request=body("ApplicationInput", "The application: permissions and access rules."),
            responses=returns(201, "Created, with its first API key (shown once).",
                              "NewApplication")),
        get=operation(
            "listApplications", "List applications", tag=tag, permissions=(APPLICATION_READ,),
            parameters=PAGE,
            responses=returns(200, "A page of the tenant's applications.", "ApplicationPage"),
            errors=(400,)))
    yield path_item(
        "/applications/self",
        get=operation(
            "getOwnApplication", "Get the calling application", tag=tag,
            permissions=AUTHENTICATED,
            description="Any working API key may ask; `key_id` is the id of the key the "
                        "request was made with (the one not to revoke with itself).",
            responses=returns(200, "The application the API key belongs to, and the key's id.",
                              "OwnApplication")))
    yield path_item(
        "/applications/{id}", {"id": APPLICATION_ID},
        get=operation(
            "getApplication", "Get an application", tag=tag, permissions=(APPLICATION_READ,),
            responses=returns(200, "The application.", "Application"), errors=(404,)),
        put=operation(
            "replaceApplication", "Replace an application's name, permissions and rules",
            tag=tag, permissions=(APPLICATION_UPDATE,),
            description="403 when the new definition grants more than the caller holds, or the "
                        f"application holds access the caller lacks. {_NO_LOCK_OUT} An "
                        "application cannot remove its own `application:*` permissions (400).",
            request=body("ApplicationInput", "The new definition."),
            responses=returns(200, "The application.", "Application"), errors=(404,)),
        delete=operation(
            "deleteApplication", "Delete an application and revoke its keys", tag=tag,
            permissions=(APPLICATION_DELETE,),
            description="403 when the application holds access the caller lacks. "
                        f"{_NO_LOCK_OUT} An application cannot delete itself (400).",
            responses=no_content("Deleted."), errors=(400, 404)))
    yield path_item(
        "/applications/{id}/keys", {"id": APPLICATION_ID},
        post=operation(
            "createApiKey", "Issue an API key", tag=tag, permissions=(APPLICATION_UPDATE,),
            description="403 when the application holds access the caller lacks.",
            responses=returns(201, "The key, shown this once.", "IssuedApiKey"),
            errors=(404,)),
        get=operation(
            "listApiKeys", "List an application's working API keys", tag=tag,
            permissions=(APPLICATION_READ,),
            responses=returns(200, "Key ids and dates; never the keys.", "ApiKeyList"),
            errors=(404,)))
    yield path_item(
        "/applications/{id}/keys/{key_id}", {"id": APPLICATION_ID, "key_id": "API key id."},
        delete=operation(
            "revokeApiKey", "Revoke an API key", tag=tag, permissions=(APPLICATION_UPDATE,),
            description="403 when the application holds access the caller lacks. "
                        f"{_NO_LOCK_OUT} An application cannot revoke the key it is calling "
                        "with (400): rotate by issuing a key, switching, then revoking the old "
                        "one with the new.",
            responses=no_content("Revoked: the key stops working at once."), errors=(400, 404)))


def _file(description: str, media_type: str, kind: str = "string") -> dict:
    return {"200": {"description": description,
                    "content": {media_type: {"schema": {"type": kind}}}}}


_NOT_MODIFIED = {"304": {"description": "Not modified (`If-None-Match`)."}}


def _operations():
    yield path_item("/health", get=operation(
        "health", "Liveness", tag="Operations", permissions=PUBLIC,
        description="The process answers; no database call.",
        responses=returns(200, "Alive.", "Status")))
    yield path_item("/ready", get=operation(
        "ready", "Readiness", tag="Operations", permissions=PUBLIC,
        responses={**returns(200, "Neo4j answers.", "Status"), "503": problem(503)}))
    yield path_item("/openapi.json", get=operation(
        "openapi", "This OpenAPI document", tag="Operations", permissions=PUBLIC,
        description="Names only the routes this server has.",
        responses={**_file("OpenAPI 3.1.", "application/json", "object"), **_NOT_MODIFIED}))
    yield path_item("/docs", get=operation(
        "docs", "API reference page", tag="Operations", permissions=PUBLIC,
        responses=_file("Renders this document with Redoc.", "text/html")))
    yield path_item("/static/redoc.standalone.js", get=operation(
        "redocBundle", "Redoc bundle used by /docs", tag="Operations", permissions=PUBLIC,
        responses={**_file("The vendored Redoc standalone bundle.", "text/javascript"),
                   **_NOT_MODIFIED}))
