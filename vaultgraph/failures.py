"""The one line a failure is explained in, `cause: fix`, for the command and for each worker of
`serve --workers N` alike (docs/operations.md, "When a command fails")."""

from __future__ import annotations

import orjson

from .settings import ConfigError, Settings

UNEXPECTED_FIX = "rerun with --debug for the traceback and report it"


class Failure(Exception):
    """A runtime failure the command explains: one line, `cause: fix`."""

    def __init__(self, cause: str, fix: str, status: int = 1):
        super().__init__(f"{cause}: {fix}")
        self.cause = cause
        self.fix = fix
        self.status = status


def explain(exc: BaseException, settings: Settings | None) -> tuple[str, str, int]:
    """The one line for a failure: what went wrong and what to do, and the exit status."""
    from marshmallow import ValidationError
    from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

    from .crypto import CryptoError
    from .errors import (
        Invalid,
        KeyStoreUnavailable,
        Misconfigured,
        Unavailable,
        VaultError,
        WrongKey,
    )
    from .neo4j_local import LauncherError

    uri = settings.neo4j_uri if settings else "the configured URI"
    if isinstance(exc, Failure):
        return exc.cause, exc.fix, exc.status
    if isinstance(exc, (ConfigError, LauncherError)):
        return exc.cause, exc.fix, 1
    # The repository reports refused credentials as Misconfigured (its cause is the AuthError).
    if isinstance(exc, Misconfigured) and isinstance(exc.__cause__, AuthError):
        exc = exc.__cause__
    if isinstance(exc, WrongKey):
        return exc.cause, exc.fix, 1
    if isinstance(exc, AuthError):
        # Neo4j does not say which of the two it refused: both settings are named.
        where = settings.local_password_file() if settings else None
        user = f" {settings.neo4j_user!r}" if settings else ""
        unset = f" (unset, the local server's password file {where} is used)" if where else ""
        return (f"Neo4j at {uri} refused the user{user} with this password",
                "set VAULTGRAPH_NEO4J_USER to a user of this database and "
                f"VAULTGRAPH_NEO4J_PASSWORD to its password{unset}", 1)
    if isinstance(exc, ClientError) and exc.code == "Neo.ClientError.Database.DatabaseNotFound":
        name = settings.neo4j_database if settings else "configured"
        return (f"Neo4j at {uri} has no database {name!r}",
                "set VAULTGRAPH_NEO4J_DATABASE to an existing database (Community has 'neo4j')",
                1)
    if isinstance(exc, KeyStoreUnavailable):
        token = settings.pkcs11_token_label if settings else "configured"
        return (f"the PKCS#11 token {token!r} does not answer",
                "check the HSM (or its network) and VAULTGRAPH_PKCS11_MODULE, then retry", 1)
    if isinstance(exc, (Unavailable, ServiceUnavailable)):
        return (f"cannot reach Neo4j at {uri}",
                "start it (vaultgraph neo4j start) or set VAULTGRAPH_NEO4J_URI to a running "
                "server", 1)
    if isinstance(exc, CryptoError):
        source = settings.kek_source if settings else "the key ring"
        return (f"the key-encryption key ring in {source} cannot unwrap the stored tenant keys",
                "use the key ring the tenants were created with", 1)
    if isinstance(exc, ValidationError):
        messages = orjson.dumps(exc.normalized_messages(), option=orjson.OPT_NON_STR_KEYS)
        return f"invalid input {messages.decode()}", "see --help for the expected values", 2
    if isinstance(exc, Invalid) and exc.errors:
        return (f"{exc.detail} {orjson.dumps(exc.errors).decode()}",
                "see --help for the expected values", 2)
    if isinstance(exc, VaultError):
        return exc.detail.rstrip("."), "check the ids (vaultgraph tenants list, vaultgraph " \
            "applications list --tenant ID)", 1
    if isinstance(exc, PermissionError):
        return (f"permission denied on {exc.filename}",
                "run as the user that owns VAULTGRAPH_HOME or set VAULTGRAPH_HOME", 1)
    if isinstance(exc, OSError) and exc.errno == 98 and settings:
        return (f"port {settings.port} on {settings.host} is in use by another process",
                "stop that process or set VAULTGRAPH_PORT to a free port", 1)
    return f"unexpected {type(exc).__name__}", UNEXPECTED_FIX, 1
