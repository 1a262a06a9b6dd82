"""Spec 001's web search and web read, behind governance, limits and the cache.

Handlers call `web_service(services())`; tests build `WebService` directly with a config, a
cache table, counters, a provider and a resolver of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from citegate.governance.policy.model import Policy
from citegate.governance.ratelimit import Counters
from citegate.platform.errors import CitegateError, Forbidden
from citegate.platform.observability import logger
from citegate.platform.principal import Principal
from citegate.web import ContentTooLarge, WebError, WebReadFailed, WebSearchFailed, WebTimeout
from citegate.web.browser import BrowserUnavailable, ChromiumRenderer, Renderer, find_browser
from citegate.web.cache import PAGE_TTL_SECONDS, SEARCH_TTL_SECONDS, WebCache, cache_key
from citegate.web.fetch import DEFAULT_MAX_BYTES, Conditional, Fetcher
from citegate.web.reader import (
    Extracted,
    InvalidSelector,
    SelectorError,
    css_to_xpath,
    extract,
    extract_text,
)
from citegate.web.safety import Resolver, UrlGuard, domain_allowed, parse_url
from citegate.web.schemas import (
    WebReadRequest,
    WebReadResponse,
    WebReadResult,
    WebSearchRequest,
    WebSearchResponse,
    WebSearchResult,
)
from citegate.web.search import SearchProvider

if TYPE_CHECKING:
    import httpx

    from citegate.platform.settings import Settings


@dataclass(frozen=True)
class WebConfig:
    search_provider: str | None = None  # "jina" | "searxng" | None
    search_base_url: str | None = None
    search_api_key: str | None = None
    search_per_minute: int = 10  # spec 001 8.3: ten web searches per user and minute
    search_ip_per_minute: int = 30
    allow_loopback: bool = False  # tests only: lets the reader reach 127.0.0.1
    max_page_bytes: int = DEFAULT_MAX_BYTES
    search_cache_seconds: int = SEARCH_TTL_SECONDS
    page_cache_seconds: int = PAGE_TTL_SECONDS
    # API Gateway cuts an integration at 30 s, so a caller's longer `timeout` is clamped to this.
    max_timeout_seconds: float = 25.0
    # The Chromium executable for wait_for_selector; None: no browser, such reads are refused.
    browser_path: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> WebConfig:
        def get(name: str, default: Any) -> Any:
            value = getattr(settings, name, default)
            secret = getattr(value, "get_secret_value", None)
            return secret() if callable(secret) else value

        return cls(
            search_provider=get("web_search_provider", None),
            search_base_url=get("web_search_base_url", None),
            search_api_key=get("web_search_api_key", None),
            search_per_minute=int(get("web_search_rate_limit_per_minute", 10)),
            search_ip_per_minute=int(get("web_search_ip_rate_limit_per_minute", 30)),
            allow_loopback=bool(get("web_allow_loopback", False)),
            max_page_bytes=int(get("web_max_page_bytes", DEFAULT_MAX_BYTES)),
            search_cache_seconds=int(get("web_search_cache_seconds", SEARCH_TTL_SECONDS)),
            page_cache_seconds=int(get("web_page_cache_seconds", PAGE_TTL_SECONDS)),
            max_timeout_seconds=float(get("web_max_timeout_seconds", 25.0)),
            browser_path=find_browser(
                get("web_browser_path", None), auto_detect=get("runtime", "local") == "local"
            ),
        )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class WebService:
    def __init__(
        self,
        config: WebConfig,
        *,
        counters: Counters,
        cache: WebCache | None = None,
        provider: SearchProvider | None = None,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.time,
        renderer: Renderer | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = config
        self.counters = counters
        self.cache = cache
        self.provider = provider
        self.clock = clock
        self.guard = UrlGuard(allow_loopback=config.allow_loopback, resolver=resolver)
        self.fetcher = Fetcher(self.guard, max_bytes=config.max_page_bytes, transport=transport)
        # Nothing starts here: Playwright is imported and Chromium launched on the first render.
        if renderer is None and config.browser_path:
            renderer = ChromiumRenderer(config.browser_path)
        self.renderer = renderer

    # -- search ---------------------------------------------------------------------------------

    def search(
        self, principal: Principal, policy: Policy, request: WebSearchRequest, source_ip: str | None = None
    ) -> WebSearchResponse:
        started = time.perf_counter()
        # The request's timeout bounds the whole search, the pages read for include_content too.
        deadline = time.monotonic() + min(request.timeout, self.config.max_timeout_seconds)
        provider = self.provider
        if provider is None:
            raise WebSearchFailed(
                "web search is not configured on this server",
                details={"reason": "not_configured", "search_engine": request.search_engine},
            )
        # Spec 001 8.3: per user, and per address against one client spreading over many users.
        who = f"{principal.tenant_id}:{principal.type}:{principal.id}"
        limits = [(f"web_search:{who}", self.config.search_per_minute)]
        if source_ip:
            limits.append((f"web_search_ip:{source_ip}", self.config.search_ip_per_minute))
        self.counters.hit_all(limits)
        # Only an engine the caller chose is passed on: the default "google" would otherwise pin
        # a SearXNG instance to one engine it may not have enabled.
        engine = request.search_engine if "search_engine" in request.model_fields_set else None
        key = cache_key("search", provider.name, engine, request.query, request.max_results, request.locale)
        cached = self.cache.get(key) if self.cache else None
        if cached is not None and cached.fresh(self.cache.clock() if self.cache else self.clock()):
            data = cached.value
        else:
            outcome = provider.search(
                request.query,
                max_results=request.max_results,
                engine=engine,
                locale=request.locale,
                timeout=min(request.timeout, self.config.max_timeout_seconds),
            )
            data = {
                "hits": [
                    {
                        "title": h.title,
                        "url": h.url,
                        "snippet": h.snippet,
                        "domain": h.domain,
                        "timestamp": h.timestamp,
                    }
                    for h in outcome.hits
                ],
                "total_results": outcome.total_results,
            }
            if self.cache:
                self.cache.put(key, data, self.config.search_cache_seconds)
        # The policy's domain allow-list holds for what is offered to read, too.
        hits = [h for h in data["hits"] if domain_allowed(h["domain"], policy.web.domains)]
        hits = hits[: request.max_results]
        results = [WebSearchResult(rank=i, **hit) for i, hit in enumerate(hits, start=1)]
        if request.include_content:
            results = self._with_content(results, policy, request, deadline)
        total = data.get("total_results")
        return WebSearchResponse(
            query=request.query,
            results=results,
            search_engine=request.search_engine,
            total_results=int(total) if isinstance(total, int) and not policy.web.domains else len(results),
            search_time=round(time.perf_counter() - started, 3),
        )

    def _with_content(
        self, results: list[WebSearchResult], policy: Policy, request: WebSearchRequest, deadline: float
    ) -> list[WebSearchResult]:
        """Spec 001 5.2's `include_content`: each result's page, read as /api/v1/web/read reads it
        (address checks, the policy's allow-list, size cap, cache), at once, and only until the
        request's timeout; a page not read by then carries TIMEOUT_ERROR, one that failed its
        own error, and the others are not held back by either."""
        remaining = deadline - time.monotonic()
        if not results:
            return results
        if remaining <= 0:
            late = WebTimeout("the search used the request's whole timeout; the page was not read")
            return [_with_page(r, _read_error(r.url, late)) for r in results]
        read = WebReadRequest(urls=[r.url for r in results], timeout=remaining, locale=request.locale)
        pool = ThreadPoolExecutor(max_workers=min(len(results), 5), thread_name_prefix="web-search-read")
        try:
            futures = [pool.submit(self._read_safely, r.url, policy, read) for r in results]
            wait(futures, timeout=remaining)
        finally:
            # Reads still running end by their own timeout (at most `remaining`); nobody waits for them.
            pool.shutdown(wait=False, cancel_futures=True)
        late = WebTimeout(f"the page was not read within the request's timeout ({request.timeout:g}s)")
        return [
            _with_page(r, f.result() if f.done() and not f.cancelled() else _read_error(r.url, late))
            for r, f in zip(results, futures, strict=True)
        ]

    # -- read -----------------------------------------------------------------------------------

    def read(self, policy: Policy, request: WebReadRequest) -> WebReadResponse:
        started = time.perf_counter()
        if request.wait_for_selector and self.renderer is None:
            raise BrowserUnavailable()
        for selector in (request.css_selector, request.exclude_selector, request.wait_for_selector):
            if selector:
                try:
                    css_to_xpath(selector)
                except SelectorError as error:
                    raise InvalidSelector(f"invalid CSS selector {selector!r}: {error}") from error
        urls = request.url_list
        if request.single:
            results = [self._read_one(urls[0], policy, request)]
        else:
            workers = min(request.max_concurrent, len(urls))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="web-read") as pool:
                results = list(pool.map(lambda u: self._read_safely(u, policy, request), urls))
        successful = sum(1 for r in results if r.status == "success")
        return WebReadResponse(
            results=results,
            total_urls=len(results),
            successful=successful,
            failed=len(results) - successful,
            processing_time=round(time.perf_counter() - started, 3),
        )

    def _read_safely(self, url: str, policy: Policy, request: WebReadRequest) -> WebReadResult:
        try:
            return self._read_one(url, policy, request)
        except WebError as error:
            return WebReadResult(url=url, status="error", error=error.message, error_code=error.code)
        except Exception:
            logger.exception("web read failed", extra={"url": url})
            return WebReadResult(
                url=url, status="error", error="the page could not be read", error_code=WebReadFailed.code
            )

    def _read_one(self, url: str, policy: Policy, request: WebReadRequest) -> WebReadResult:
        parse_url(url)  # format errors before anything else, cached or not
        parts: tuple[str | None, ...] = (url, request.css_selector, request.exclude_selector, request.locale)
        if request.wait_for_selector:  # appended only when set, so plain reads keep their keys
            parts += (f"wait:{request.wait_for_selector}",)
        key = cache_key("page", *parts)
        entry = self.cache.get(key) if self.cache else None
        now = self.cache.clock() if self.cache else self.clock()
        if entry is not None and not request.bypass_cache and entry.fresh(now):
            # A cached page was read under some policy; this caller's allow-list still applies.
            self.guard.check(url, policy.web.domains)
            return WebReadResult(**entry.value, cached=True)
        if request.wait_for_selector:
            return self._render_one(url, key, now, policy, request)
        conditional = None
        if entry is not None and entry.revalidatable and not request.bypass_cache:
            conditional = Conditional(etag=entry.etag, last_modified=entry.last_modified)
        fetched = self.fetcher.fetch(
            url,
            timeout=min(request.timeout, self.config.max_timeout_seconds),
            allowed_domains=policy.web.domains,
            locale=request.locale,
            conditional=conditional,
        )
        if fetched.not_modified and entry is not None and self.cache is not None:
            self.cache.refresh(entry, self.config.page_cache_seconds)
            return WebReadResult(**entry.value, cached=True)
        if fetched.not_modified:  # a 304 without our asking: nothing to show
            raise WebReadFailed("the page answered 304 Not Modified to an unconditional request")
        if fetched.kind == "text":
            extracted = extract_text(fetched.text)
        else:
            extracted = extract(
                fetched.text,
                url=fetched.url,
                css_selector=request.css_selector,
                exclude_selector=request.exclude_selector,
            )
        return self._store(key, url, extracted, now, etag=fetched.etag, last_modified=fetched.last_modified)

    def _render_one(
        self, url: str, key: str, now: float, policy: Policy, request: WebReadRequest
    ) -> WebReadResult:
        """The page as the browser shows it once `wait_for_selector` appeared, then the same
        extraction as a plain read. The browser fetches through `self.fetcher` only."""
        if self.renderer is None or not request.wait_for_selector:
            raise BrowserUnavailable()
        rendered = self.renderer.render(
            url,
            fetcher=self.fetcher,
            wait_for_selector=request.wait_for_selector,
            timeout=min(request.timeout, self.config.max_timeout_seconds),
            allowed_domains=policy.web.domains,
            locale=request.locale,
        )
        if len(rendered.html.encode("utf-8", "replace")) > self.config.max_page_bytes:
            raise ContentTooLarge(f"the rendered page is larger than {self.config.max_page_bytes} bytes")
        extracted = extract(
            rendered.html,
            url=rendered.url,
            css_selector=request.css_selector,
            exclude_selector=request.exclude_selector,
        )
        # No validators: an app's HTML shell keeps its ETag while the content its scripts load
        # changes, so a rendered page is only fresh or gone (after page_cache_seconds).
        return self._store(key, url, extracted, now)

    def _store(
        self,
        key: str,
        url: str,
        extracted: Extracted,
        now: float,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> WebReadResult:
        value = {
            "url": url,
            "status": "success",
            "title": extracted.title,
            "content": extracted.content,
            "extracted_at": _iso(now),
            "word_count": extracted.word_count,
            "token_count": extracted.token_count,
        }
        if self.cache is not None:
            self.cache.put(key, value, self.config.page_cache_seconds, etag=etag, last_modified=last_modified)
        return WebReadResult(**value, cached=False)


def _read_error(url: str, error: WebError) -> WebReadResult:
    return WebReadResult(url=url, status="error", error=error.message, error_code=error.code)


def _with_page(result: WebSearchResult, page: WebReadResult) -> WebSearchResult:
    return result.model_copy(
        update={
            "content": page.content if page.status == "success" else None,
            "word_count": page.word_count,
            "token_count": page.token_count,
            "cached": page.cached,
            "error": page.error,
            "error_code": page.error_code,
        }
    )


def require_web(policy: Policy) -> None:
    if not policy.web.enabled:
        raise Forbidden(
            "web search and reading are not enabled by this caller's policy", details={"tool": "web"}
        )


# -- spec 001 error codes (section 7.2): the "chat" family in citegate.platform.errors ----------------------


def spec001_code(error: CitegateError) -> str:
    from citegate.platform.errors import error_code

    return error_code(error, "chat")


__all__ = [
    "WebConfig",
    "WebService",
    "require_web",
    "spec001_code",
]
