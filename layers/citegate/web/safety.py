"""Where the reader may connect: public http(s) addresses only, checked at every hop.

The host is resolved once, every address it resolves to is checked, and the connection is made to
the checked address (the URL carries the IP; Host header and TLS SNI carry the name), so a DNS
answer that changes between check and connect (rebinding) cannot reach an internal address.
Redirects are followed by the fetcher, which calls `check` again for each location.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from citegate.web import InvalidUrlFormat, UrlNotAccessible

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")

# Cloud metadata services. Most are already non-global; listed so the intent survives any
# change in what the standard library calls "global".
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.123",  # AWS time sync
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS DNS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)
# IPv6 prefixes that embed an IPv4 address in their low 32 bits (NAT64, well-known and local).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


@dataclass(frozen=True)
class Target:
    """A URL that passed the checks, and the address the connection must go to."""

    url: httpx.URL
    scheme: str
    host: str  # ASCII (IDNA) host name or IP literal, as sent in the Host header and SNI
    port: int
    address: IPAddress

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == _DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def pinned_url(self) -> httpx.URL:
        """The same URL with the checked IP as host: what httpx connects to."""
        return self.url.copy_with(host=str(self.address), port=self.port)


def parse_ipv4_loose(text: str) -> ipaddress.IPv4Address | None:
    """inet_aton's reading of a host: `127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1` are all
    127.0.0.1 to the C library, so they must be to the check as well."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or any(p == "" for p in parts):
        return None
    values: list[int] = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                value = int(part[2:] or "0", 16)
            elif len(part) > 1 and part.startswith("0"):
                value = int(part, 8)
            else:
                value = int(part, 10)
        except ValueError:
            return None
        values.append(value)
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for value in head:
        number = number * 256 + value
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def literal_address(host: str) -> IPAddress | None:
    """The IP a host names by itself (IPv6 with or without zone, any IPv4 spelling), else None."""
    bare = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    return parse_ipv4_loose(host.rstrip("."))


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries: mapped, compatible, 6to4, Teredo, NAT64."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in net for net in _NAT64) or (address in _IPV4_COMPATIBLE and int(address) > 1):
        found.append(low32)
    return found


def blocked_reason(address: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why connecting to `address` is refused, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        for inner in embedded_ipv4(address):
            reason = blocked_reason(inner, allow_loopback=allow_loopback)
            if reason:
                return f"{reason} (embedded in {address})"
        if address.ipv4_mapped is not None and allow_loopback and address.ipv4_mapped.is_loopback:
            return None
    if address.is_loopback:
        return None if allow_loopback else "a loopback address"
    for label, flag in (
        ("an unspecified address", address.is_unspecified),
        ("a multicast address", address.is_multicast),
        ("a link-local address", address.is_link_local),
        ("a private address", address.is_private),
        ("a reserved address", address.is_reserved),
    ):
        if flag:
            return label
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking, ...
        return "a non-public address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def domain_allowed(host: str, patterns: Sequence[str]) -> bool:
    """Exact host or `*.example.com` (subdomains only). An empty list allows every public host."""
    if not patterns:
        return True
    host = host.rstrip(".").lower()
    for pattern in patterns:
        pattern = pattern.strip().rstrip(".").lower()
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and host != pattern[2:]:
                return True
        elif host == pattern:
            return True
    return False


def parse_url(raw: str) -> httpx.URL:
    """Format checks only (no resolution): INVALID_URL_FORMAT for anything but a plain http(s) URL."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidUrlFormat("the URL is empty")
    text = raw.strip()
    if len(text) > MAX_URL_LENGTH:
        raise InvalidUrlFormat(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if _CONTROL_OR_SPACE.search(text):
        raise InvalidUrlFormat("the URL contains spaces or control characters")
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, UnicodeError) as error:
        raise InvalidUrlFormat(f"not a valid URL: {error}") from error
    if url.scheme not in _DEFAULT_PORTS:
        raise InvalidUrlFormat("only http and https URLs can be read")
    if not url.raw_host:
        raise InvalidUrlFormat("the URL has no host")
    if url.userinfo:
        raise InvalidUrlFormat("URLs with credentials (user:password@) are not accepted")
    return url


class UrlGuard:
    """Checks a URL and pins it to a public address; `allow_loopback` exists for tests only."""

    def __init__(self, *, allow_loopback: bool = False, resolver: Resolver | None = None) -> None:
        self.allow_loopback = allow_loopback
        self._resolve = resolver or system_resolver

    def check(self, raw: str | httpx.URL, allowed_domains: Sequence[str] = ()) -> Target:
        url = raw if isinstance(raw, httpx.URL) else parse_url(raw)
        if url.scheme not in _DEFAULT_PORTS or url.userinfo:
            raise InvalidUrlFormat("only http and https URLs without credentials can be read")
        host = url.raw_host.decode("ascii").lower()
        port = url.port or _DEFAULT_PORTS[url.scheme]
        if not domain_allowed(host, allowed_domains):
            raise UrlNotAccessible(f"the domain {host!r} is not in this policy's web allow-list")
        literal = literal_address(host)
        if literal is not None:
            candidates: list[IPAddress] = [literal]
        else:
            try:
                resolved = self._resolve(host.rstrip("."), port)
            except (OSError, UnicodeError) as error:
                raise UrlNotAccessible(f"the host {host!r} could not be resolved") from error
            candidates = []
            for text in resolved:
                address = literal_address(text)
                if address is None:
                    raise UrlNotAccessible(f"the host {host!r} resolved to an unusable address")
                candidates.append(address)
            if not candidates:
                raise UrlNotAccessible(f"the host {host!r} has no address")
        # Every address must be public: otherwise a round-robin name could pick a private one.
        for address in candidates:
            reason = blocked_reason(address, allow_loopback=self.allow_loopback)
            if reason:
                raise UrlNotAccessible(
                    f"the URL's host resolves to {reason}, which may not be fetched",
                    details={"host": host},
                )
        address = candidates[0]
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
        sni_host = host if literal is None else str(literal)
        return Target(url=url, scheme=url.scheme, host=sni_host, port=port, address=address)
