"""Web search and web reading (spec 001 section 3.2): safe fetching, extraction, providers, cache.

The errors below carry spec 001's codes (section 7.2) in `code`; the same codes appear on the
per-URL results of a multi-URL read, where one bad URL must not fail the others.
"""

from __future__ import annotations

from typing import ClassVar

from citegate.platform.errors import CitegateError


class WebError(CitegateError):
    code: ClassVar[str] = "WEB_READ_FAILED"


class InvalidUrlFormat(WebError):
    kind, status, code = "invalid_url_format", 400, "INVALID_URL_FORMAT"


class UrlNotAccessible(WebError):
    """Refused (blocked address, domain not granted) or unreachable (DNS, connection, HTTP error)."""

    kind, status, code = "url_not_accessible", 400, "URL_NOT_ACCESSIBLE"


class WebTimeout(WebError):
    kind, status, code = "timeout_error", 408, "TIMEOUT_ERROR"


class WebReadFailed(WebError):
    kind, status, code = "web_read_failed", 500, "WEB_READ_FAILED"


class ContentTooLarge(WebReadFailed):
    """Past the 5 MB page limit (spec 001 8.3); spec 001 has no own code, so WEB_READ_FAILED."""

    kind = "content_too_large"


class UnsupportedContent(WebReadFailed):
    kind = "unsupported_content"


class WebSearchFailed(WebError):
    kind, status, code = "web_search_failed", 500, "WEB_SEARCH_FAILED"


__all__ = [
    "ContentTooLarge",
    "InvalidUrlFormat",
    "UnsupportedContent",
    "UrlNotAccessible",
    "WebError",
    "WebReadFailed",
    "WebSearchFailed",
    "WebTimeout",
]
