"""SSRF: which addresses the reader may reach, in every spelling, and the domain allow-list."""

from __future__ import annotations

import ipaddress

import pytest

from citegate.web import InvalidUrlFormat, UrlNotAccessible
from citegate.web.safety import UrlGuard, blocked_reason, domain_allowed, parse_ipv4_loose, parse_url


def resolver_to(*addresses: str):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("169.254.43518", "169.254.169.254"),
        ("10.1", "10.0.0.1"),
        ("example.com", None),
        ("1.2.3.4.5", None),
        ("256.1.1.1", None),
        ("08.1.1.1", None),
    ],
)
def test_every_ipv4_spelling_is_read_as_the_c_library_reads_it(spelling: str, expected: str | None) -> None:
    found = parse_ipv4_loose(spelling)
    assert (str(found) if found else None) == expected


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.5",
        "172.16.3.4",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.1.1",
        "100.64.0.1",
        "100.100.100.200",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.0.192",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "2002:7f00:1::",  # 6to4 around 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 around the metadata address
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 around 169.254.169.254
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo
    ],
)
def test_internal_addresses_are_blocked(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None


def test_nat64_is_refused_even_around_a_public_address() -> None:
    # ::/8 is reserved; NAT64 targets are not needed by a reader, so the conservative answer stands.
    assert blocked_reason(ipaddress.ip_address("64:ff9b::5db8:d822")) is not None


def test_loopback_only_with_the_test_setting() -> None:
    assert blocked_reason(ipaddress.ip_address("127.0.0.1"), allow_loopback=True) is None
    assert blocked_reason(ipaddress.ip_address("::1"), allow_loopback=True) is None
    # The test setting opens loopback, nothing else.
    assert blocked_reason(ipaddress.ip_address("169.254.169.254"), allow_loopback=True)
    assert blocked_reason(ipaddress.ip_address("10.0.0.1"), allow_loopback=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1:8080/x",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:127.0.0.1]/",
        "http://[fe80::1%25eth0]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "https://0.0.0.0/",
    ],
)
def test_literal_internal_urls_are_refused_without_resolving(url: str) -> None:
    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError("an IP literal must not be resolved")

    # httpx itself rejects some spellings (a format error); either way nothing is fetched.
    with pytest.raises((UrlNotAccessible, InvalidUrlFormat)):
        UrlGuard(resolver=no_dns).check(url)


@pytest.mark.parametrize(
    "answers",
    [
        ("10.0.0.7",),
        ("127.0.0.1",),
        ("169.254.169.254",),
        ("::1",),
        ("::ffff:10.0.0.1",),
        ("93.184.216.34", "10.0.0.7"),
    ],
)
def test_a_name_resolving_to_an_internal_address_is_refused(answers: tuple[str, ...]) -> None:
    with pytest.raises(UrlNotAccessible):
        UrlGuard(resolver=resolver_to(*answers)).check("http://innocent.example.com/page")


def test_a_public_name_is_pinned_to_the_checked_address() -> None:
    target = UrlGuard(resolver=resolver_to("93.184.216.34")).check("https://Example.COM:8443/a?b=1")
    assert str(target.address) == "93.184.216.34"
    assert target.host == "example.com" and target.host_header == "example.com:8443"
    assert str(target.pinned_url) == "https://93.184.216.34:8443/a?b=1"
    v6 = UrlGuard(resolver=resolver_to("2606:4700::1111")).check("http://example.com/")
    assert str(v6.pinned_url) == "http://[2606:4700::1111]/" and v6.host_header == "example.com"


def test_unresolvable_hosts_are_not_accessible() -> None:
    def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(UrlNotAccessible, match="could not be resolved"):
        UrlGuard(resolver=fail).check("http://no-such-host.invalid/")


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "ftp://example.com/file",
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/",
        "javascript:alert(1)",
        "data:text/html,hi",
        "example.com/no-scheme",
        "http://",
        "http://user:pass@example.com/",
        "http://exa mple.com/",
        "http://example.com/\x00",
        "http://" + "a" * 3000 + ".com/",
    ],
)
def test_malformed_urls_are_invalid_format(url: str) -> None:
    with pytest.raises(InvalidUrlFormat):
        parse_url(url)


def test_domain_allow_list() -> None:
    patterns = ["docs.example.com", "*.trusted.org"]
    assert domain_allowed("docs.example.com", patterns)
    assert domain_allowed("DOCS.example.com.", patterns)
    assert domain_allowed("a.b.trusted.org", patterns)
    assert not domain_allowed("trusted.org", patterns)
    assert not domain_allowed("eviltrusted.org", patterns)
    assert not domain_allowed("example.com", patterns)
    assert not domain_allowed("docs.example.com.evil.net", patterns)
    assert domain_allowed("anything.net", [])
    with pytest.raises(UrlNotAccessible, match="allow-list"):
        UrlGuard(resolver=resolver_to("93.184.216.34")).check("http://evil.net/", patterns)
