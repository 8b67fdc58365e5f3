"""Idempotent retries (`Idempotency-Key`, the IETF httpapi draft): the first response to a POST
is kept per (application, key) for `ttl` seconds, with a keyed hash of the request, encrypted
under the tenant's key (responses can hold revealed data). A retry with the same request gets
the kept response again; another request under the key is refused (422); a retry while the
first is still running is refused (409, `KeyInFlight`, with the seconds after which a retry
may find it done). The entries live in Neo4j under a uniqueness
constraint, so this holds across replicas.

Two things a kept answer must not outlive, each answered 409 instead of a replay:
- a write that committed but was not answered (its answer lost, the process gone): the entry
  stays, `unanswered`, and the request is not run again (a second token, a second key);
- the data it showed: a token since deleted, expired or changed, or access rules since changed
  (a narrowed rule), and the kept answer is not shown again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import uuid
from dataclasses import dataclass

import orjson

from ..audit import context as audit_context
from ..auth.principal import Principal
from ..crypto import CryptoError
from ..errors import Conflict, IntegrityFailure, Invalid, KeyInFlight, KeyReused
from ..repository.idempotency import Claim, IdempotencyRepository

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
# Visible ASCII: what a UUID, a ULID or any client's random string is made of.
KEY_SHAPE = re.compile(rf"[\x21-\x7e]{{1,{MAX_KEY_LENGTH}}}")
KEY_RULE = f"must be 1 to {MAX_KEY_LENGTH} visible ASCII characters"
IN_FLIGHT = ("A request with this Idempotency-Key is still being processed; retry after the "
             "time in Retry-After.")
REUSED = "This Idempotency-Key was used with another request."
UNANSWERED = ("The first request with this Idempotency-Key was carried out, but its answer was "
              "lost; it is not run again. Look up its result instead.")
STALE = ("The answer kept for this Idempotency-Key showed tokens that have since changed or "
         "been deleted, or access rules that have since changed; it is not shown again, and "
         "the request is not run again.")
_FIELD = "idempotent-response"


@dataclass(frozen=True, slots=True)
class Replay:
    status: int
    content_type: str | None
    body: bytes


@dataclass(frozen=True, slots=True)
class Started:
    """This request holds the key: finish it with its response."""

    key: str
    claim: str


def check_key(values: list[str]) -> str:
    if len(values) != 1 or not KEY_SHAPE.fullmatch(values[0]):
        raise Invalid(errors={HEADER: [KEY_RULE if len(values) == 1 else "must be sent once"]})
    return values[0]


class IdempotencyService:
    def __init__(self, repo: IdempotencyRepository, *, ttl: float, lease: float,
                 request_timeout: float):
        self._repo = repo
        self._ttl = ttl
        self._lease = lease
        self._request_timeout = request_timeout

    @staticmethod
    def _aad_id(principal: Principal, key: str) -> str:
        return f"{principal.application_id}/{key}"

    async def begin(self, principal: Principal, key: str, *, method: str, target: str,
                    body: bytes) -> Replay | Started:
        digest = hashlib.sha256(b"\n".join((method.encode(), target.encode(), body))).hexdigest()
        # Keyed: a plain hash of a request body would let a reader of Neo4j test guesses of
        # the token data in it.
        request_hash = principal.keys.index_value("idempotency", digest)
        claim = str(uuid.uuid4())
        held = await self._repo.claim(
            tenant_id=principal.tenant_id, application_id=principal.application_id, key=key,
            request_hash=request_hash, claim=claim, ttl=self._ttl, lease=self._lease)
        if held.claimed:
            note = audit_context.current.get()
            if note is not None:  # the request's write marks the entry (AUDIT_PREFIX)
                note.idempotency = {"application_id": principal.application_id, "key": key,
                                    "claim": claim}
            return Started(key, claim)
        if not held.same_request:
            raise KeyReused(REUSED)
        if held.state == "unanswered":
            audit_context.note_tokens(held.token_ids or [])
            raise Conflict(UNANSWERED)
        if held.state != "done" or held.response_ct is None:
            raise KeyInFlight(IN_FLIGHT, retry_after=self._retry_after(held))
        if held.rules != rules_digest(principal) or not await self._repo.unchanged(
                tenant_id=principal.tenant_id, application_id=principal.application_id,
                key=key):
            audit_context.note_tokens(held.token_ids or [])
            raise Conflict(STALE)
        try:
            kept = principal.keys.decrypt(held.response_ct, token_id=self._aad_id(principal, key),
                                          field=_FIELD)
        except CryptoError:
            log.error("kept idempotent response failed authentication")
            raise IntegrityFailure() from None
        # The replay shows what the first answer showed: its event names the same tokens.
        audit_context.note_tokens(held.token_ids or [])
        if held.transforms:
            audit_context.note_transforms(orjson.loads(held.transforms))
        return Replay(held.status, held.content_type, kept)

    def _retry_after(self, held: Claim) -> int:
        """Seconds until a retry may find the key's first request done: what is left of its
        database time (`VAULTGRAPH_REQUEST_TIMEOUT`, from its claim); past that (its process
        gone, or its commit's answer lost), until its claim's lease runs out, when a retry
        learns what it did. At least 1, at most the request timeout: a retry is cheap."""
        left = self._request_timeout - (held.age or 0.0)
        if left <= 0:
            left = held.lease_left or 0.0
        return max(1, min(math.ceil(left), math.ceil(self._request_timeout)))

    async def finish(self, principal: Principal, started: Started, *, status: int | None,
                     content_type: str | None, body: bytes | None,
                     refused: bool = False) -> None:
        """Keep the response for replays; give the key back when there is none to keep (a
        refusal raised as a client error, or an exception, a 5xx or a 429 before any write
        was sent: a retry runs again) — but a request whose write committed, or may have, is
        never run again by a retry."""
        note = audit_context.current.get()  # what the request's audit event names
        if status is None or body is None or status >= 500 or status == 429:
            if refused:  # a 4xx raised: nothing was changed that a retry could repeat
                await self._repo.release(application_id=principal.application_id,
                                         key=started.key, claim=started.claim)
            elif note is not None and note.persisted:  # committed, and not answered
                await self._repo.unanswered(application_id=principal.application_id,
                                            key=started.key, claim=started.claim,
                                            token_ids=list(note.token_ids))
            elif note is None or note.stored is None:  # no write was sent: nothing changed
                await self._repo.release(application_id=principal.application_id,
                                         key=started.key, claim=started.claim)
            # Else a write was sent and its commit's answer never came: the claim stays
            # until its lease runs out, and a retry then learns from the entry's `written`
            # mark, committed with the write or not at all, whether it did (idempotency/claim).
            return
        await self._repo.complete(
            application_id=principal.application_id, key=started.key, claim=started.claim,
            status=status, content_type=content_type,
            response_ct=principal.keys.encrypt(body, token_id=self._aad_id(principal, started.key),
                                               field=_FIELD),
            token_ids=list(note.token_ids) if note is not None else None,
            transforms=orjson.dumps(dict(note.transforms)).decode()
            if note is not None and note.transforms else None,
            rules=rules_digest(principal))


def rules_digest(principal: Principal) -> str:
    """What the caller may see, as a digest: its permissions and access rules. A kept answer is
    replayed only under the same (a rule narrowed since must not be bypassed by a replay)."""
    rules = sorted((r.container, r.transform, sorted(r.permissions), r.priority)
                   for r in principal.rules)
    return hashlib.sha256(orjson.dumps([sorted(principal.permissions), rules])).hexdigest()
