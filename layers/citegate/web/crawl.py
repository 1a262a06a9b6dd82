"""The web reader's fetcher as a website source's PageFetcher (citegate.knowledge.sources.ports):
the same SSRF guard (public addresses only, each redirect checked; loopback only when
CITEGATE_WEB_ALLOW_LOOPBACK), the same size cap, and conditional GETs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from citegate.knowledge.sources.ports import Page
from citegate.web import WebError
from citegate.web.fetch import Conditional, Fetcher
from citegate.web.safety import UrlGuard

if TYPE_CHECKING:
    from citegate.web.service import WebConfig

PAGE_TIMEOUT_SECONDS = 20.0


class WebPageFetcher:
    def __init__(self, config: WebConfig, *, timeout: float = PAGE_TIMEOUT_SECONDS) -> None:
        self._fetcher = Fetcher(
            UrlGuard(allow_loopback=config.allow_loopback), max_bytes=config.max_page_bytes
        )
        self._timeout = timeout

    def __call__(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Page:
        try:
            answer = self._fetcher.fetch_any(
                url, timeout=self._timeout, conditional=Conditional(etag=etag, last_modified=last_modified)
            )
        except WebError as error:
            raise LookupError(error.message) from error
        headers = {k.lower(): v for k, v in answer.headers}
        return Page(
            url=answer.url,
            status=answer.status,
            body=answer.body,
            content_type=headers.get("content-type", ""),
            etag=headers.get("etag"),
            last_modified=headers.get("last-modified"),
        )
