"""The one HTTP client the vault sends requests out with (see the package's docstring)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ..deadline import timeout_at
from .policy import AddressPolicy, ip_literal


class OutboundError(Exception):
    """A request that did not get an answer. The message is fixed text: never a URL, a header
    or a body (the caller may put any of them in a log or a problem)."""

    reason = "failed"

    def __init__(self, message: str | None = None):
        super().__init__(message or self.__doc__.strip().splitlines()[0])


class DestinationRefused(OutboundError):
    """The destination is not allowed: its scheme, or an address it names or resolves to."""

    reason = "refused"


class DestinationUnreachable(OutboundError):
    """The destination could not be reached, or broke the exchange off."""

    reason = "unreachable"


class DestinationTimeout(DestinationUnreachable):
    """The destination did not answer in time."""

    reason = "timeout"


class RequestTooLarge(OutboundError):
    """The request body is larger than allowed; nothing was sent."""

    reason = "request_too_large"


class RequestNotSendable(OutboundError):
    """The request could not be written (a header value with a line break or a NUL)."""

    reason = "not_sendable"


class AnswerTooLarge(OutboundError):
    """The destination's answer is larger than allowed."""

    reason = "answer_too_large"


@dataclass(frozen=True)
class Answer:
    """The destination's answer: status, headers, and the body read (at most the bound;
    `truncated` when more was there and `truncate=True` was asked)."""

    status: int
    headers: CIMultiDictProxy[str] = field(repr=False)
    body: bytes = field(repr=False)
    truncated: bool = False

    @property
    def content_type(self) -> str | None:
        return self.headers.get("Content-Type")


class GuardedResolver(AbstractResolver):
    """Resolves a host name and refuses it unless every address it resolves to is allowed.
    The connector connects to the addresses returned here, the very ones checked: a name whose
    DNS answer changes between a check and the connection (rebinding) cannot move it."""

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None):
        self._policy = policy
        self._inner = inner or ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        addresses = []
        for result in results:
            address = ip_literal(result["host"])
            if address is None:
                raise DestinationRefused()
            addresses.append(address)
        if not self._policy.allows_all(addresses):
            raise DestinationRefused()
        return results

    async def close(self) -> None:
        await self._inner.close()


class OutboundClient:
    """Sends one request at a time per call, over pooled connections (one pool per
    destination host, `per_host` connections at most, `total` over all), never following a
    redirect, with a deadline and bounded bodies both ways. The session opens on first use
    and closes with `close()`."""

    def __init__(self, policy: AddressPolicy, *, total: int = 200, per_host: int = 32,
                 resolver: AbstractResolver | None = None):
        self.policy = policy
        self._total = total
        self._per_host = per_host
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._lock = asyncio.Lock()

    async def _open(self) -> aiohttp.ClientSession:
        async with self._lock:
            if self._session is None or self._session.closed:
                connector = aiohttp.TCPConnector(
                    limit=self._total, limit_per_host=self._per_host,
                    resolver=GuardedResolver(self.policy, self._resolver),
                    ttl_dns_cache=10, enable_cleanup_closed=False)
                # trust_env=False: no HTTP(S)_PROXY from the environment, no .netrc
                # credentials; the cookie jar ignores every cookie (nothing is carried from
                # one destination's answer to another request).
                self._session = aiohttp.ClientSession(
                    connector=connector, trust_env=False,
                    cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True,
                    headers={"User-Agent": "vaultgraph"})
            return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> OutboundClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def request(self, method: str, url: str | URL, *,
                      headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
                      body: bytes | None = None,
                      time_limit: float = 10.0, max_request_bytes: int = 1_048_576,
                      max_answer_bytes: int = 1_048_576, truncate: bool = False) -> Answer:
        """Send `method url` with `headers` (a mapping or (name, value) pairs, repeats kept)
        and `body`; the destination's answer, whatever its
        status (3xx included: a redirect is answered, never followed).

        Raises DestinationRefused (the policy refuses the URL, or an address its host resolves
        to; nothing was sent), RequestTooLarge (nothing was sent), DestinationTimeout (no whole
        answer within `time_limit` seconds, from the start of the call to the answer's last byte),
        DestinationUnreachable (the connection failed or broke), AnswerTooLarge (the answer's
        body exceeds `max_answer_bytes` and `truncate` is False; with `truncate`, the first
        `max_answer_bytes` bytes are kept instead)."""
        target = url if isinstance(url, URL) else URL(url, encoded=True)
        if not self.policy.allows_target(target.scheme, target.host):
            raise DestinationRefused()
        if body is not None and len(body) > max_request_bytes:
            raise RequestTooLarge()
        session = await self._open()
        try:
            async with timeout_at(asyncio.get_running_loop().time() + time_limit):
                async with session.request(
                        method, target, headers=CIMultiDict(headers or {}), data=body,
                        allow_redirects=False, max_redirects=0,
                        timeout=aiohttp.ClientTimeout(total=None)) as response:
                    content, truncated = await _read_bounded(response, max_answer_bytes)
                    if truncated and not truncate:
                        raise AnswerTooLarge()
                    return Answer(response.status, response.headers, content, truncated)
        except TimeoutError:
            raise DestinationTimeout() from None
        except (aiohttp.ClientError, OSError):
            raise DestinationUnreachable() from None
        except ValueError:  # aiohttp refuses CR, LF or NUL in a header: its message may quote it
            raise RequestNotSendable() from None


async def _read_bounded(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """The body's first `limit` bytes (after decompression), and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await response.content.read(min(65_536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
