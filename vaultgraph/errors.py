"""Domain errors: what services and repositories raise. They know nothing of HTTP.

One middleware (`api/middleware.py`) maps each kind to its problem+json answer, so a service can
be reused from the CLI or a background task without aiohttp. Messages are fixed text: they
never repeat input values (token data must not reach an error body or a log line).
"""

from __future__ import annotations


class VaultError(Exception):
    """Base of every domain error; `detail` is safe to show to the caller."""

    default_detail = "The operation failed."

    def __init__(self, detail: str | None = None):
        super().__init__(detail or self.default_detail)
        self.detail = detail or self.default_detail


class NotFound(VaultError):
    """Unknown, or invisible to the caller: both answer the same (no existence oracle)."""

    default_detail = "Not found."


class Conflict(VaultError):
    default_detail = "The resource exists."


class Forbidden(VaultError):
    default_detail = "The application lacks the permission for this operation."


class Unauthenticated(VaultError):
    default_detail = "A valid API key is required."


# An answer lists at most this many fields, each name at most MAX_FIELD_NAME characters: field
# names can come from the input (a payload's keys, unknown fields), and a 1 MiB body of short
# strings under a long key would otherwise make an error list thousands of times its size.
MAX_LISTED_ERRORS = 100
MAX_FIELD_NAME = 200


def field_name(name: str) -> str:
    """`name` as an error list shows it: at most MAX_FIELD_NAME characters, its start and its
    end kept (the end names the field; the start, where it is)."""
    if len(name) <= MAX_FIELD_NAME:
        return name
    half = MAX_FIELD_NAME // 2
    return name[:half] + "…" + name[-(MAX_FIELD_NAME - half - 1):]


def add_error(errors: dict[str, list[str]], name: str, messages: list[str]) -> bool:
    """Add a field's messages unless `errors` lists MAX_LISTED_ERRORS fields already; False
    once it is full (a caller may stop looking for more)."""
    if len(errors) >= MAX_LISTED_ERRORS:
        return False
    errors[field_name(name)] = messages
    return True


class Invalid(VaultError):
    """Input that breaks a rule; `errors` names each field with its messages."""

    default_detail = "The request is invalid."

    def __init__(self, detail: str | None = None, *, errors: dict[str, list[str]] | None = None):
        super().__init__(detail)
        self.errors = errors or {}


class TooLarge(VaultError):
    default_detail = "The request is too large."


class Unavailable(VaultError):
    """The database cannot be reached now; the caller may retry after `retry_after` seconds."""

    default_detail = "The database is unavailable; try again shortly."

    def __init__(self, detail: str | None = None, *, retry_after: int = 5):
        super().__init__(detail)
        self.retry_after = retry_after


class TimedOut(Unavailable):
    """The request's database time ran out: a statement, or the wait for its audit event, did
    not finish within what is left of `VAULTGRAPH_REQUEST_TIMEOUT`."""

    def __init__(self, detail: str | None = None, *, retry_after: int = 1):
        super().__init__(detail, retry_after=retry_after)


class KeyStoreUnavailable(Unavailable):
    """The device holding the key-encryption key (a PKCS#11 token) cannot be reached now; the
    service retries it on the next request that needs it, no restart."""

    default_detail = "The key store is unavailable; try again shortly."

    def __init__(self, detail: str | None = None, *, retry_after: int = 2):
        super().__init__(detail, retry_after=retry_after)


class Misconfigured(Unavailable):
    """The service is configured wrongly (the database refuses its credentials, the
    key-encryption key does not open the stored keys): not the caller's fault, and not
    transient either; the detail for callers stays the generic one."""


class WrongKey(Misconfigured):
    """The key ring does not open the tenant keys the database holds: a tenant is wrapped under
    a key-encryption key the ring lacks, or a KEK of the ring does not open a tenant stored
    under it. `cause` and `fix` make the one line the command prints (`detail`: both)."""

    def __init__(self, cause: str, fix: str):
        super().__init__(f"{cause}: {fix}")
        self.cause = cause
        self.fix = fix


class KeyInFlight(Conflict):
    """An idempotency key whose first request is still running; the caller may retry after
    `retry_after` seconds."""

    default_detail = "The first request with this idempotency key is still running."

    def __init__(self, detail: str | None = None, *, retry_after: int = 1):
        super().__init__(detail)
        self.retry_after = retry_after


class KeyReused(VaultError):
    """An idempotency key sent again with another request."""

    default_detail = "The idempotency key was used with another request."


class RateLimited(VaultError):
    """Over a rate limit; the caller may retry after `retry_after` seconds."""

    default_detail = "Too many requests; retry after the time in Retry-After."

    def __init__(self, detail: str | None = None, *, retry_after: int = 1):
        super().__init__(detail)
        self.retry_after = retry_after


class DestinationFailed(VaultError):
    """An outbound call (the proxy) got no usable answer from its destination: unreachable,
    refused by the address policy, too slow, or answering too much. `detail` names the proxy,
    never the request or the answer."""

    default_detail = "The destination could not be reached."


class IntegrityFailure(VaultError):
    """Stored data failed an integrity check (a ciphertext altered or moved)."""

    default_detail = "The token's stored data failed an integrity check."


class UniquenessViolation(VaultError):
    """A uniqueness constraint refused a write (e.g. an id already taken)."""

    default_detail = "A uniqueness constraint refused the write."


def invalid(field: str, message: str) -> Invalid:
    """An `Invalid` naming one field."""
    return Invalid(errors={field: [message]})
