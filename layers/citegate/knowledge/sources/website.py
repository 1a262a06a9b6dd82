"""The website kind: the pages of a sitemap, or a same-site crawl from a start URL under a prefix.

Every request goes through the web reader's fetcher (the PageFetcher port: SSRF-safe, size
capped). robots.txt is honoured (its Disallow rules and Crawl-delay), requests are spaced by the
source's rate, at most `max_pages` pages are read. A page read before is asked for conditionally
(If-None-Match / If-Modified-Since): a 304 costs no body and no parsing. A crawl also revisits
the pages the knowledge base holds from the site, so a page reached only through a page that
answered 304 is still found; a page that answers 404 or 410 is gone (deleted by the sync), one
that fails otherwise is counted failed and kept.
"""

from __future__ import annotations

import time
import urllib.robotparser
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urldefrag, urljoin, urlparse

from citegate.knowledge.sources.kinds import Entry, Listing, SourceUnavailable
from citegate.knowledge.sources.ports import Page

if TYPE_CHECKING:
    from citegate.knowledge.sources.model import WebsiteSettings
    from citegate.knowledge.sources.ports import PageFetcher

GONE = (404, 410)
_PAGE_SUFFIXES = frozenset({"", ".html", ".htm", ".txt", ".md", ".markdown", ".pdf"})
_TYPES = {
    "text/html": "text/html",
    "application/xhtml+xml": "text/html",
    "text/plain": "text/plain",
    "text/markdown": "text/markdown",
    "text/x-markdown": "text/markdown",
    "application/pdf": "application/pdf",
}
MAX_SITEMAPS = 50


def revision_of(page: Page) -> str:
    return f"http:{page.etag or ''}|{page.last_modified or ''}" if (page.etag or page.last_modified) else ""


def _conditional(revision: str) -> tuple[str | None, str | None]:
    if not revision.startswith("http:"):
        return None, None
    etag, _, modified = revision[5:].partition("|")
    return etag or None, modified or None


def _prefix(settings: WebsiteSettings) -> str:
    if settings.prefix:
        return settings.prefix
    base = settings.start_url or settings.sitemap_url
    parsed = urlparse(base)
    if settings.start_url:
        folder = parsed.path if parsed.path.endswith("/") else parsed.path.rsplit("/", 1)[0] + "/"
    else:
        folder = "/"
    return f"{parsed.scheme}://{parsed.netloc}{folder}"


def path_in(prefix: str, url: str) -> str | None:
    """The page's path under the prefix ("a/" becomes "a/index.html"), None outside it."""
    url = urldefrag(url)[0]
    parsed, base = urlparse(url), urlparse(prefix)
    if parsed.scheme not in ("http", "https") or parsed.netloc != base.netloc or parsed.query:
        return None
    if not parsed.path.startswith(base.path):
        return None
    path = parsed.path[len(base.path) :].lstrip("/")
    if path == "" or path.endswith("/"):
        path += "index.html"
    if PurePosixPath(path).suffix.lower() not in _PAGE_SUFFIXES or ".." in path.split("/"):
        return None
    return path


def _links(page: Page) -> list[str]:
    import lxml.html

    try:
        tree = lxml.html.fromstring(page.body)
    except (ValueError, TypeError, lxml.etree.ParserError):
        return []
    return [urljoin(page.url, str(href)) for href in tree.xpath("//a/@href")]


def _sitemap_urls(fetch: PageFetcher, url: str) -> list[str]:
    """The <loc>s of a sitemap, following a sitemap index (up to MAX_SITEMAPS files)."""
    from lxml import etree

    found: list[str] = []
    queue, read = deque([url]), 0
    while queue and read < MAX_SITEMAPS:
        current = queue.popleft()
        read += 1
        try:
            page = fetch(current)
        except LookupError as error:
            raise SourceUnavailable(f"the sitemap {current} cannot be read: {error}") from error
        if page.status != 200:
            raise SourceUnavailable(f"the sitemap {current} answered HTTP {page.status}")
        try:
            root = etree.fromstring(
                page.body, parser=etree.XMLParser(resolve_entities=False, no_network=True)
            )
        except etree.XMLSyntaxError as error:
            raise SourceUnavailable(f"the sitemap {current} is not XML: {error}") from error
        locs = [str(e.text).strip() for e in root.iter() if str(e.tag).endswith("loc") and e.text]
        if str(root.tag).endswith("sitemapindex"):
            queue.extend(locs)
        else:
            found.extend(locs)
    return found


class _Robots:
    def __init__(self, fetch: PageFetcher, prefix: str) -> None:
        parsed = urlparse(prefix)
        self.parser: urllib.robotparser.RobotFileParser | None = None
        try:
            page = fetch(f"{parsed.scheme}://{parsed.netloc}/robots.txt")
        except LookupError:
            return  # no answer: nothing is disallowed
        if page.status == 200:
            self.parser = urllib.robotparser.RobotFileParser()
            self.parser.parse(page.body.decode("utf-8", "replace").splitlines())
        elif page.status in (401, 403):
            self.parser = urllib.robotparser.RobotFileParser()
            self.parser.parse(["User-agent: *", "Disallow: /"])  # robots.txt refused: stay out

    def allows(self, url: str) -> bool:
        return self.parser is None or self.parser.can_fetch(USER_AGENT_TOKEN, url)

    def delay(self) -> float:
        if self.parser is None:
            return 0.0
        return float(self.parser.crawl_delay(USER_AGENT_TOKEN) or 0)


USER_AGENT_TOKEN = "citegate-web-reader"


def website_listing(
    settings: WebsiteSettings, fetch: PageFetcher, known: dict[str, tuple[str, str]]
) -> Listing:
    """`known`: path -> (revision, page URL) of the pages the knowledge base holds from the site."""
    prefix = _prefix(settings)
    robots = _Robots(fetch, prefix)
    interval = max(1.0 / settings.requests_per_second, robots.delay())
    crawl = not settings.sitemap_url
    if crawl:
        seeds = [settings.start_url, *(url for _, url in known.values() if url)]
    else:
        seeds = _sitemap_urls(fetch, settings.sitemap_url)
    skipped: list[tuple[str, str]] = []

    def entries() -> Iterator[Entry]:
        queue: deque[str] = deque()
        queued: set[str] = set()

        def offer(url: str) -> None:
            path = path_in(prefix, url)
            if path is not None and path not in queued:
                queued.add(path)
                queue.append(urldefrag(url)[0])

        for url in seeds:
            offer(url)
        last = 0.0
        pages = 0
        while queue and pages < settings.max_pages:
            url = queue.popleft()
            path = path_in(prefix, url)
            assert path is not None
            if not robots.allows(url):
                skipped.append((path, "disallowed by robots.txt"))
                continue
            time.sleep(max(0.0, last + interval - time.monotonic()))
            last = time.monotonic()
            pages += 1
            revision = known.get(path, ("", ""))[0]
            etag, modified = _conditional(revision)
            try:
                page = fetch(url, etag=etag, last_modified=modified)
            except LookupError as error:
                yield _failing(path, url, str(error))
                continue
            if page.status in GONE:
                continue
            if page.status == 304:
                yield Entry(path, read=_fresh(fetch, url), revision=revision, url=url, not_modified=True)
                continue
            if page.status >= 300:
                yield _failing(path, url, f"HTTP {page.status}")
                continue
            if path_in(prefix, page.url) is None:
                skipped.append((path, f"redirects outside {prefix}"))
                continue
            media = page.content_type.split(";", 1)[0].strip().lower()
            if media not in _TYPES:
                skipped.append((path, f"{media or 'no content type'} is not a page"))
                continue
            if crawl and _TYPES[media] == "text/html":
                for link in _links(page):
                    offer(link)
            body = page.body
            yield Entry(
                path,
                read=partial(bytes, body),
                revision=revision_of(page),
                url=page.url,
                mime_type=_TYPES[media],
                size=len(body),
            )

    return Listing(entries(), version=settings.version, skipped=skipped)


def _failing(path: str, url: str, reason: str) -> Entry:
    def read() -> bytes:
        raise LookupError(reason)

    return Entry(path, read=read, url=url)


def _fresh(fetch: PageFetcher, url: str) -> Callable[[], bytes]:
    def read() -> bytes:
        page = fetch(url)
        if page.status != 200:
            raise LookupError(f"HTTP {page.status}")
        return page.body

    return read
