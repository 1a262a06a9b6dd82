"""Fetching one page: pinned connections, manual redirects, a size cap enforced while streaming.

The whole fetch (every redirect, every byte) shares one deadline: a read timeout alone would let
a server that drips one byte a second hold a worker forever.
"""

from __future__ import annotations

import codecs
import re
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from citegate.web import (
    ContentTooLarge,
    UnsupportedContent,
    UrlNotAccessible,
    WebError,
    WebReadFailed,
    WebTimeout,
)
from citegate.web.safety import Target, UrlGuard

MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 5 * 1024 * 1024  # spec 001 8.3
USER_AGENT = "citegate-web-reader/1.0 (+https://github.com/citegate)"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
# The browser's own request headers that are not passed on: the fetcher sets the connection's,
# and its own identity (User-Agent) rather than headless Chromium's.
_NOT_FORWARDED = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "accept-encoding",
        "user-agent",
        "accept-language",
        "if-none-match",
        "if-modified-since",
    }
)
# Response headers the browser must not see: the body it gets is already decoded and whole.
_NOT_RETURNED = frozenset(
    {
        "content-encoding",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "trailer",
        "upgrade",
        "proxy-authenticate",
        "alt-svc",
    }
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class Conditional:
    etag: str | None = None
    last_modified: str | None = None


@dataclass
class Resource:
    """What the browser gets for one of its requests (see `Fetcher.fetch_resource`)."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    location: str | None = None  # a redirect left for the browser to follow; already checked


@dataclass
class Fetched:
    url: str  # the final URL, after redirects
    status: int
    not_modified: bool = False
    kind: str = "html"  # "html" or "text"
    text: str = ""
    etag: str | None = None
    last_modified: str | None = None


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _charset(content_type: str, body: bytes) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    found = _META_CHARSET.search(body[:4096])
    return found.group(1).decode("ascii", "ignore") if found else None


def decode(body: bytes, content_type: str) -> str:
    """Header charset, then <meta charset>, then UTF-8, then cp1252 (which decodes any byte)."""
    if body.startswith(codecs.BOM_UTF8):
        return body[len(codecs.BOM_UTF8) :].decode("utf-8", "replace")
    declared = _charset(content_type, body)
    if declared:
        try:
            return body.decode(declared, "replace")
        except LookupError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", "replace")


class Fetcher:
    def __init__(
        self,
        guard: UrlGuard,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        user_agent: str = USER_AGENT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.guard = guard
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self._transport = transport
        self._ssl: ssl.SSLContext | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        """One TLS context for every request of this fetcher: building one loads the CA bundle
        (tens of milliseconds, far more on a busy machine), which a client per request would
        otherwise pay each time. The same verification as httpx's default."""
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context(trust_env=False)
        return self._ssl

    def fetch(
        self,
        raw_url: str,
        *,
        timeout: float,
        allowed_domains: Sequence[str] = (),
        locale: str | None = None,
        conditional: Conditional | None = None,
    ) -> Fetched:
        """A page to read: redirects followed (each hop checked), HTML or text only, errors raised."""
        deadline = time.monotonic() + timeout
        headers = self._headers(locale)
        if conditional and conditional.etag:
            headers["If-None-Match"] = conditional.etag
        if conditional and conditional.last_modified:
            headers["If-Modified-Since"] = conditional.last_modified
        with self._open(raw_url, deadline, timeout, allowed_domains, headers, follow=True) as (
            target,
            response,
            _,
        ):
            return self._read(response, str(target.url), deadline, timeout)

    def fetch_resource(
        self,
        raw_url: str,
        *,
        deadline: float,
        allowed_domains: Sequence[str] = (),
        locale: str | None = None,
        headers: Mapping[str, str] | None = None,
        document: bool = False,
    ) -> Resource:
        """One request of the headless browser, under the same rules as `fetch`.

        A subresource (script, stylesheet, XHR) follows its redirects here and comes back whatever
        its type or status. The top-level document does not: the browser must see the redirect
        to know the page's address, so its redirect is returned (its target already checked) for
        the browser to request in turn; and it must be HTML or text that answered below 400.
        """
        timeout = max(deadline - time.monotonic(), 0.0)
        sent = self._headers(locale)
        for key, value in (headers or {}).items():
            if key.lower() == "accept":  # a script or stylesheet asks for its own type
                sent["Accept"] = value
            elif key.lower() not in _NOT_FORWARDED:
                sent[key] = value
        with self._open(raw_url, deadline, timeout, allowed_domains, sent, follow=not document) as (
            target,
            response,
            location,
        ):
            url = str(target.url)
            kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _NOT_RETURNED]
            if location is not None:
                return Resource(url=url, status=response.status_code, headers=kept, location=location)
            if document:
                if response.status_code >= 400:
                    raise UrlNotAccessible(
                        f"the page answered HTTP {response.status_code}",
                        details={"status": response.status_code},
                    )
                self._document_kind(response.headers.get("content-type", ""))
            body = self._body(response, url, deadline, timeout)
            return Resource(url=url, status=response.status_code, headers=kept, body=body)

    def fetch_any(self, raw_url: str, *, timeout: float, conditional: Conditional | None = None) -> Resource:
        """Any answer of the URL with its raw body, under the same rules as `fetch` (each redirect
        hop checked, the size capped): what a website source's crawl reads (robots.txt, sitemaps,
        pages), whatever its type; a 304 or an error status comes back with no body."""
        deadline = time.monotonic() + timeout
        headers = self._headers(None)
        if conditional and conditional.etag:
            headers["If-None-Match"] = conditional.etag
        if conditional and conditional.last_modified:
            headers["If-Modified-Since"] = conditional.last_modified
        with self._open(raw_url, deadline, timeout, (), headers, follow=True) as (target, response, _):
            url = str(target.url)
            body = b""
            if 200 <= response.status_code < 300:
                body = self._body(response, url, deadline, timeout)
            return Resource(
                url=url, status=response.status_code, headers=list(response.headers.multi_items()), body=body
            )

    def _headers(self, locale: str | None) -> dict[str, str]:
        headers = {
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
        }
        if locale:
            headers["Accept-Language"] = f"{locale},*;q=0.5"
        return headers

    @contextmanager
    def _open(
        self,
        raw_url: str,
        deadline: float,
        timeout: float,
        allowed_domains: Sequence[str],
        headers: dict[str, str],
        *,
        follow: bool,
    ) -> Iterator[tuple[Target, httpx.Response, str | None]]:
        """The response of the last hop, streaming; with `follow=False` a redirect ends the walk and
        its (checked) location is the third item."""
        headers = dict(headers)
        target = self.guard.check(raw_url, allowed_domains)
        # trust_env=False: a proxy from the environment would connect by name and undo the pinning.
        with httpx.Client(
            trust_env=False, follow_redirects=False, transport=self._transport, verify=self._ssl_context()
        ) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WebTimeout(f"reading {raw_url} took longer than {timeout:g}s")
                request = client.build_request(
                    "GET",
                    target.pinned_url,
                    headers={**headers, "Host": target.host_header},
                    extensions={
                        "sni_hostname": target.host,
                        "timeout": httpx.Timeout(remaining, connect=min(remaining, 10.0)).as_dict(),
                    },
                )
                try:
                    response = client.send(request, stream=True)
                except httpx.TimeoutException as error:
                    raise WebTimeout(f"reading {raw_url} took longer than {timeout:g}s") from error
                except httpx.HTTPError as error:
                    raise UrlNotAccessible(f"could not connect to {target.host}: {error}") from error
                try:
                    if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                        try:
                            location = target.url.join(response.headers["location"])
                        except (httpx.InvalidURL, ValueError) as error:
                            raise UrlNotAccessible("the page redirects to an invalid URL") from error
                        # The next hop is checked exactly like the first one (scheme, domain, address).
                        next_target = self.guard.check(location, allowed_domains)
                        if follow:
                            target = next_target
                            headers.pop("If-None-Match", None)
                            headers.pop("If-Modified-Since", None)
                            continue
                        yield target, response, str(next_target.url)
                        return
                    yield target, response, None
                    return
                finally:
                    response.close()
        raise UrlNotAccessible(f"more than {MAX_REDIRECTS} redirects")

    @staticmethod
    def _document_kind(content_type: str) -> str:
        media = _media_type(content_type)
        if media in _HTML_TYPES or media == "":
            return "html"
        if media in _TEXT_TYPES:
            return "text"
        raise UnsupportedContent(f"the content type {media!r} cannot be read (HTML or text only)")

    def _read(self, response: httpx.Response, url: str, deadline: float, timeout: float) -> Fetched:
        etag = response.headers.get("etag")
        last_modified = response.headers.get("last-modified")
        if response.status_code == 304:
            return Fetched(url=url, status=304, not_modified=True, etag=etag, last_modified=last_modified)
        if response.status_code >= 400:
            raise UrlNotAccessible(
                f"the page answered HTTP {response.status_code}", details={"status": response.status_code}
            )
        content_type = response.headers.get("content-type", "")
        kind = self._document_kind(content_type)
        body = self._body(response, url, deadline, timeout)
        return Fetched(
            url=url,
            status=response.status_code,
            kind=kind,
            text=decode(body, content_type),
            etag=etag,
            last_modified=last_modified,
        )

    def _body(self, response: httpx.Response, url: str, deadline: float, timeout: float) -> bytes:
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise ContentTooLarge(f"the page is larger than {self.max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            # iter_bytes decodes gzip/br, so the cap holds for what is decompressed (no zip bombs).
            for chunk in response.iter_bytes(65536):
                size += len(chunk)
                if size > self.max_bytes:
                    raise ContentTooLarge(f"the page is larger than {self.max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise WebTimeout(f"reading {url} took longer than {timeout:g}s")
                chunks.append(chunk)
        except httpx.TimeoutException as error:
            raise WebTimeout(f"reading {url} took longer than {timeout:g}s") from error
        except WebError:
            raise
        except httpx.HTTPError as error:
            raise WebReadFailed(f"the page could not be read completely: {error}") from error
        return b"".join(chunks)
