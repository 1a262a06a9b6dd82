"""Web search providers behind one protocol: a JINA-compatible API (`s.jina.ai`) and SearXNG.

Provider endpoints are configured by the operator, not by callers, so they are trusted (a SearXNG
inside the VPC is normal) and are not subject to the reader's public-address rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from citegate.web import WebSearchFailed, WebTimeout


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str
    timestamp: str | None = None

    @property
    def domain(self) -> str:
        return (urlsplit(self.url).hostname or "").lower()


@dataclass
class SearchOutcome:
    hits: list[SearchHit]
    total_results: int | None = None
    engine: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class SearchProvider(Protocol):
    name: str

    def search(
        self, query: str, *, max_results: int, engine: str | None, locale: str | None, timeout: float
    ) -> SearchOutcome: ...


def _get_json(
    url: str, *, params: dict[str, str], headers: dict[str, str], timeout: float, provider: str
) -> Any:
    try:
        with httpx.Client(trust_env=False, timeout=httpx.Timeout(timeout)) as client:
            response = client.get(url, params=params, headers=headers)
    except httpx.TimeoutException as error:
        raise WebTimeout(f"the search provider did not answer within {timeout:g}s") from error
    except httpx.HTTPError as error:
        raise WebSearchFailed(
            "the web search service is temporarily unavailable", details={"provider": provider}
        ) from error
    if response.status_code == 429:
        retry = response.headers.get("retry-after", "30")
        raise WebSearchFailed(
            "the web search service is rate limited",
            details={"provider": provider, "retry_after": int(retry) if retry.isdigit() else 30},
        )
    if response.status_code >= 400:
        raise WebSearchFailed(
            f"the web search service answered HTTP {response.status_code}",
            details={"provider": provider, "status": response.status_code},
        )
    try:
        return response.json()
    except ValueError as error:
        raise WebSearchFailed(
            "the web search service sent an unreadable answer", details={"provider": provider}
        ) from error


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


class JinaSearch:
    """`GET {base}/?q=...` with a Bearer key and `Accept: application/json` (s.jina.ai's API)."""

    name = "jina"

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key

    def search(
        self, query: str, *, max_results: int, engine: str | None, locale: str | None, timeout: float
    ) -> SearchOutcome:
        headers = {"Accept": "application/json", "X-Respond-With": "no-content"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if locale:
            headers["X-Locale"] = locale
        params = {"q": query, "num": str(max_results)}
        if locale:
            params["hl"] = locale
        if engine:
            params["provider"] = engine
        data = _get_json(
            f"{self.base_url}/", params=params, headers=headers, timeout=timeout, provider="jina"
        )
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise WebSearchFailed("the web search service sent no results list", details={"provider": "jina"})
        hits = [
            SearchHit(
                title=_text(item.get("title")),
                url=_text(item.get("url")),
                snippet=_text(item.get("description") or item.get("content"))[:1000],
                timestamp=_text(item.get("date") or item.get("publishedTime")) or None,
            )
            for item in items
            if isinstance(item, dict) and _text(item.get("url"))
        ]
        total = data.get("meta", {}).get("total") if isinstance(data.get("meta"), dict) else None
        return SearchOutcome(hits=hits, total_results=total if isinstance(total, int) else None)


class SearxngSearch:
    """`GET {base}/search?q=...&format=json` (the instance must enable the JSON format)."""

    name = "searxng"

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key

    def search(
        self, query: str, *, max_results: int, engine: str | None, locale: str | None, timeout: float
    ) -> SearchOutcome:
        params = {"q": query, "format": "json"}
        if engine:
            params["engines"] = engine
        if locale:
            params["language"] = locale
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = _get_json(
            f"{self.base_url}/search", params=params, headers=headers, timeout=timeout, provider="searxng"
        )
        items = data.get("results") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise WebSearchFailed(
                "the web search service sent no results list", details={"provider": "searxng"}
            )
        hits = [
            SearchHit(
                title=_text(item.get("title")),
                url=_text(item.get("url")),
                snippet=_text(item.get("content"))[:1000],
                timestamp=_text(item.get("publishedDate")) or None,
            )
            for item in items
            if isinstance(item, dict) and _text(item.get("url"))
        ]
        total = data.get("number_of_results")
        return SearchOutcome(hits=hits, total_results=int(total) if isinstance(total, int | float) else None)


def make_provider(kind: str | None, base_url: str | None, api_key: str | None) -> SearchProvider | None:
    """The configured provider, or None (the route then answers WEB_SEARCH_FAILED, not configured)."""
    if not kind or kind == "none" or not base_url:
        return None
    if kind == "jina":
        return JinaSearch(base_url, api_key)
    if kind == "searxng":
        return SearxngSearch(base_url, api_key)
    raise ValueError(f"unknown web search provider {kind!r}")
