"""The address policy (SSRF guard): which URLs and addresses the vault may connect to.

A destination is written by a caller but reached from inside the vault's network, so a URL
naming a loopback, private, link-local (cloud metadata at 169.254.169.254), shared (CGNAT),
multicast, unspecified, documentation or otherwise reserved address would let a caller reach
what only the vault can. Such addresses are refused unless an operator lists their network in
`VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS`. IPv6 forms that carry an IPv4 address (IPv4-mapped
`::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address they
carry; other IPv6 addresses must be global unicast (`2000::/3`) outside the special-purpose
blocks.

Pure functions and one frozen class: nothing here opens a connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2048

_V4_REFUSED = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8",        # "this network", unspecified
    "10.0.0.0/8",       # private
    "100.64.0.0/10",    # shared address space (carrier-grade NAT)
    "127.0.0.0/8",      # loopback
    "169.254.0.0/16",   # link-local, cloud metadata services
    "172.16.0.0/12",    # private
    "192.0.0.0/24",     # IETF protocol assignments
    "192.0.2.0/24",     # documentation
    "192.88.99.0/24",   # 6to4 relay anycast (deprecated)
    "192.168.0.0/16",   # private
    "198.18.0.0/15",    # benchmarking
    "198.51.100.0/24",  # documentation
    "203.0.113.0/24",   # documentation
    "224.0.0.0/4",      # multicast
    "240.0.0.0/4",      # reserved, limited broadcast
))
_V6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_V6_REFUSED = tuple(ipaddress.IPv6Network(n) for n in (
    "2001::/23",        # IETF protocol assignments (Teredo, benchmarking, ORCHID)
    "2001:db8::/32",    # documentation
    "3fff::/20",        # documentation
))
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

REFUSED_SCHEME = "must be an https URL"
REFUSED_SCHEME_HTTP = "must be an http or https URL"
REFUSED_ADDRESS = ("must not name a loopback, private, link-local, shared, multicast or "
                   "reserved address")
NOT_A_URL = "must be an absolute URL with a host"
HAS_CREDENTIALS = "must not hold a user name or password"
HAS_FRAGMENT = "must not hold a fragment"
TOO_LONG = f"must be at most {MAX_URL_LENGTH} characters"


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64, 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address.sixtofour


def is_special(address: IPAddress) -> bool:
    """True for an address no destination may have unless an operator allows it: anything but
    a public unicast address."""
    carried = embedded_ipv4(address)
    if carried is not None:
        return is_special(carried)
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in network for network in _V4_REFUSED)
    if address.scope_id:
        return True  # a zoned address names a link
    return (address not in _V6_GLOBAL_UNICAST
            or any(address in network for network in _V6_REFUSED))


def parse_networks(text: str) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs (or bare addresses) as networks; ValueError naming the bad item."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not a network (CIDR) or an address") from None
    return tuple(networks)


def ip_literal(host: str) -> IPAddress | None:
    """The address a URL's host names when it is an IP literal, in any form a resolver would
    read as one (`[::1]`, `127.1`, `0x7f.0.0.1`, `2130706433`); None for a host name."""
    text = host.strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if "%" in text:  # a zoned IPv6 literal
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    try:
        # The C library's legacy forms: what getaddrinfo would connect to.
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class AddressPolicy:
    """Which destinations are allowed. `allow_http`: plain http is accepted (tests, a local
    network); `allowed_networks`: networks exempt from the special-address refusal."""

    allow_http: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls, settings) -> AddressPolicy:
        return cls(allow_http=settings.webhook_allow_http,
                   allowed_networks=parse_networks(settings.webhook_allowed_networks))

    def allows_address(self, address: IPAddress) -> bool:
        """May the vault connect to `address`? An IPv4-mapped IPv6 address counts as its IPv4
        address for the allowed networks too."""
        forms: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        if any(form in network for form in forms for network in self.allowed_networks
               if form.version == network.version):
            return True
        return not is_special(address)

    def allows_all(self, addresses: Iterable[IPAddress]) -> bool:
        addresses = list(addresses)
        return bool(addresses) and all(self.allows_address(a) for a in addresses)

    def check_url(self, url: str) -> str | None:
        """None when `url` may be a destination, else the message for the field that holds it
        (a 400). A host name is not resolved here: its addresses are checked on each call."""
        if not isinstance(url, str) or not url:
            return NOT_A_URL
        if len(url) > MAX_URL_LENGTH:
            return TOO_LONG
        try:
            parts = urlsplit(url)
            port = parts.port  # noqa: F841 (a port out of range raises here)
        except ValueError:
            return NOT_A_URL
        schemes = ("http", "https") if self.allow_http else ("https",)
        if parts.scheme.lower() not in schemes:
            return REFUSED_SCHEME_HTTP if self.allow_http else REFUSED_SCHEME
        if not parts.hostname or any(c.isspace() for c in url):
            return NOT_A_URL
        if parts.username is not None or parts.password is not None:
            return HAS_CREDENTIALS
        if parts.fragment or url.endswith("#"):
            return HAS_FRAGMENT
        address = ip_literal(parts.hostname)
        if address is not None and not self.allows_address(address):
            return REFUSED_ADDRESS
        return None
