"""Every connection the vault opens to the outside: the address policy (SSRF guard) and the
one HTTP client that applies it. Webhook deliveries and the outbound proxy both go through here.

The rules
---------
- Only `https` URLs, unless `VAULTGRAPH_WEBHOOK_ALLOW_HTTP=true` (then `http` too).
- No user name or password and no fragment in a destination URL.
- A destination whose address is loopback, private (RFC 1918, `fc00::/7`), link-local
  (`169.254/16` with the cloud metadata address, `fe80::/10`), shared (CGNAT `100.64/10`),
  multicast, unspecified, documentation or reserved is refused, in any of its forms (IPv4-mapped
  and other IPv6 forms carrying an IPv4 address, `127.1`, `2130706433`) — unless it lies in
  `VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS` (comma-separated CIDRs, default none).
- When a destination is written (created or updated), an IP literal is checked at once:
  `policy.check_url(url)` returns the message for the field (answer a 400 with it).
- On every call, the host name is resolved and ALL its addresses are checked; the connection
  goes to a checked address (the resolver the connector uses is the one that checks), so a DNS
  answer that changes afterwards (rebinding) cannot move it. TLS still verifies the host name
  (SNI) and `Host` is the URL's host.
- Redirects are never followed (a 3xx is returned as the answer); no proxy or credentials from
  the environment; no cookies kept; a deadline per call; bodies bounded both ways.

Using it
--------
    from vaultgraph.outbound import AddressPolicy, OutboundClient, OutboundError

    policy = AddressPolicy.from_settings(settings)
    if (message := policy.check_url(url)) is not None:
        raise Invalid(errors={"url": [message]})          # at creation / update: a 400

    client = OutboundClient(policy)                       # one per process; pools per host
    try:
        answer = await client.request("POST", url, headers={...}, body=b"...",
                                      time_limit=10, max_answer_bytes=1024, truncate=True)
        answer.status, answer.content_type, answer.body, answer.truncated
    except OutboundError as exc:                          # nothing answered
        exc.reason   # "refused" | "unreachable" | "timeout" | "request_too_large"
                     # | "answer_too_large" (a fixed word, safe to log and store)
    await client.close()                                  # at shut-down

`OutboundError`'s subclasses: `DestinationRefused` (the policy refused the URL or an address
its host resolves to; nothing was sent), `RequestTooLarge` (nothing was sent),
`DestinationTimeout` (a kind of `DestinationUnreachable`), `DestinationUnreachable`,
`AnswerTooLarge` (only when `truncate=False`). Their messages are fixed text: no URL, header or
body ever appears in one.
"""

from .client import (
    Answer,
    AnswerTooLarge,
    DestinationRefused,
    DestinationTimeout,
    DestinationUnreachable,
    GuardedResolver,
    OutboundClient,
    OutboundError,
    RequestTooLarge,
)
from .policy import AddressPolicy, is_special, parse_networks

__all__ = [
    "AddressPolicy",
    "Answer",
    "AnswerTooLarge",
    "DestinationRefused",
    "DestinationTimeout",
    "DestinationUnreachable",
    "GuardedResolver",
    "OutboundClient",
    "OutboundError",
    "RequestTooLarge",
    "is_special",
    "parse_networks",
]
