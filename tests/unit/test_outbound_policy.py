"""The outbound address policy (SSRF guard): which destinations the vault may connect to."""

from __future__ import annotations

import ipaddress

import pytest

from vaultgraph.outbound import AddressPolicy, is_special, parse_networks
from vaultgraph.outbound.policy import (
    HAS_CREDENTIALS,
    HAS_FRAGMENT,
    NOT_A_URL,
    REFUSED_ADDRESS,
    REFUSED_SCHEME,
    REFUSED_SCHEME_HTTP,
    TOO_LONG,
    ip_literal,
)
from vaultgraph.settings import ConfigError, Settings

REFUSED = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.255.255", "172.16.0.1",
    "172.31.255.255", "192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1",
    "100.127.255.255", "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "240.0.0.1",
    "255.255.255.255", "192.0.0.8", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9",
    "192.88.99.1",
    "::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%1", "febf::1", "fec0::1",
    "ff02::1", "ff0e::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
    "::ffff:7f00:1", "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::1", "2002:a00:1::", "2001:db8::1", "2001::1", "100::1", "5f00::1",
    "3fff::1", "64:ff9b:1::1",
]
ALLOWED = [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255",
    "172.32.0.0", "169.253.255.255", "11.0.0.1", "223.255.255.255",
    "2606:4700:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize("address", REFUSED)
def test_special_addresses_are_refused(address):
    parsed = ipaddress.ip_address(address)
    assert is_special(parsed)
    assert not AddressPolicy().allows_address(parsed)


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address):
    assert not is_special(ipaddress.ip_address(address))
    assert AddressPolicy().allows_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("host", [
    "127.0.0.1", "[::1]", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "0x7f000001",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "169.254.169.254", "[fe80::1%25eth0]", "0",
    "10.1", "[fd00::1]", "[::]", "100.64.1.1", "[64:ff9b::a9fe:a9fe]"])
def test_ip_literals_in_every_form_are_refused_at_creation(host):
    assert AddressPolicy().check_url(f"https://{host}/hook") == REFUSED_ADDRESS
    assert AddressPolicy().check_url(f"https://{host}:8443/hook") == REFUSED_ADDRESS


@pytest.mark.parametrize(("host", "address"), [
    ("127.1", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
    ("[::1]", "::1"), ("8.8.8.8", "8.8.8.8")])
def test_legacy_forms_read_as_the_resolver_reads_them(host, address):
    assert ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "localhost", "hooks.example", "1.example"])
def test_host_names_are_not_literals(host):
    assert ip_literal(host) is None


def test_a_host_name_passes_creation_its_addresses_are_checked_on_each_call():
    assert AddressPolicy().check_url("https://localhost/hook") is None
    assert AddressPolicy().check_url("https://example.com/a?b=c") is None


def test_public_ip_literals_pass():
    assert AddressPolicy().check_url("https://8.8.8.8/x") is None
    assert AddressPolicy().check_url("https://[2606:4700:4700::1111]:8443/x") is None


@pytest.mark.parametrize(("url", "message"), [
    ("http://example.com/", REFUSED_SCHEME), ("ftp://example.com/", REFUSED_SCHEME),
    ("file:///etc/passwd", REFUSED_SCHEME), ("gopher://example.com/", REFUSED_SCHEME),
    ("//example.com/", REFUSED_SCHEME), ("example.com", REFUSED_SCHEME), ("", NOT_A_URL),
    ("https://", NOT_A_URL), ("https:///path", NOT_A_URL), ("https://exa mple.com/", NOT_A_URL),
    ("https://example.com:99999/", NOT_A_URL), ("https://user:pw@example.com/", HAS_CREDENTIALS),
    ("https://user@example.com/", HAS_CREDENTIALS), ("https://example.com/#frag", HAS_FRAGMENT),
    ("https://example.com/" + "a" * 2048, TOO_LONG)])
def test_malformed_or_non_https_urls_are_refused(url, message):
    assert AddressPolicy().check_url(url) == message


def test_http_is_accepted_only_when_allowed():
    assert AddressPolicy().check_url("http://example.com/") == REFUSED_SCHEME
    allow = AddressPolicy(allow_http=True)
    assert allow.check_url("http://example.com/") is None
    assert allow.check_url("ftp://example.com/") == REFUSED_SCHEME_HTTP
    # http does not lift the address policy
    assert allow.check_url("http://127.0.0.1/") == REFUSED_ADDRESS


def test_allowed_networks_exempt_their_addresses_and_only_them():
    policy = AddressPolicy(allowed_networks=parse_networks("127.0.0.1/32, 10.1.0.0/16,fd00::/8"))
    for address in ("127.0.0.1", "10.1.2.3", "fd00::5", "::ffff:127.0.0.1", "::ffff:10.1.0.9"):
        assert policy.allows_address(ipaddress.ip_address(address)), address
    for address in ("127.0.0.2", "10.2.0.1", "fc00::1", "169.254.169.254", "::1"):
        assert not policy.allows_address(ipaddress.ip_address(address)), address
    assert policy.check_url("https://127.0.0.1:9000/x") is None
    assert policy.check_url("https://127.0.0.2:9000/x") == REFUSED_ADDRESS


def test_every_address_must_be_allowed():
    policy = AddressPolicy(allowed_networks=parse_networks("127.0.0.1/32"))
    ok, bad = ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")
    assert policy.allows_all([ok])
    assert not policy.allows_all([ok, bad])
    assert not policy.allows_all([])


def test_parse_networks():
    assert parse_networks("") == ()
    assert parse_networks(" 10.0.0.0/8 , ::1 ,") == (ipaddress.ip_network("10.0.0.0/8"),
                                                      ipaddress.ip_network("::1/128"))
    assert parse_networks("10.0.0.1/8") == (ipaddress.ip_network("10.0.0.0/8"),)
    with pytest.raises(ValueError, match="'nope'"):
        parse_networks("10.0.0.0/8,nope")


def test_the_settings_read_and_check_the_policy():
    s = Settings.from_env({"VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "true",
                           "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32,fd00::/8"})
    policy = AddressPolicy.from_settings(s)
    assert policy.allow_http is True
    assert policy.allowed_networks == (ipaddress.ip_network("127.0.0.1/32"),
                                       ipaddress.ip_network("fd00::/8"))
    default = AddressPolicy.from_settings(Settings())
    assert (default.allow_http, default.allowed_networks) == (False, ())
    for word, value in (("false", False), ("0", False), ("TRUE", True), ("yes", True)):
        assert Settings.from_env({"VAULTGRAPH_WEBHOOK_ALLOW_HTTP": word}).webhook_allow_http \
            is value


def test_bad_settings_are_named():
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"VAULTGRAPH_WEBHOOK_ALLOW_HTTP": "maybe"})
    assert caught.value.cause == "VAULTGRAPH_WEBHOOK_ALLOW_HTTP is not true or false"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/8,10.0.0.0/33"})
    assert caught.value.cause == ("VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS holds '10.0.0.0/33', "
                                  "not a network")
