"""The web service: per-URL results and codes, concurrency, the cache, search providers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tests.unit.web.helpers import Clock, MemoryCounters, MemoryTable
from tests.unit.web.pages import State

from citegate.governance.policy.model import Policy, WebGrant
from citegate.platform.errors import RateLimited
from citegate.platform.principal import Principal
from citegate.web import InvalidUrlFormat, UrlNotAccessible, WebReadFailed, WebSearchFailed, WebTimeout
from citegate.web.cache import WebCache
from citegate.web.reader import InvalidSelector
from citegate.web.schemas import WebReadRequest, WebSearchRequest
from citegate.web.search import JinaSearch, SearxngSearch, make_provider
from citegate.web.service import WebConfig, WebService, spec001_code

USER = Principal(type="agent", id="a1", tenant_id="t")
POLICY = Policy(principal_key="agent:a1", tenant_id="t", web=WebGrant(enabled=True))


def service(provider: Any = None, **config: Any) -> tuple[WebService, Clock, MemoryTable]:
    clock, table = Clock(), MemoryTable()
    web = WebService(
        WebConfig(allow_loopback=True, **config),
        counters=MemoryCounters(),  # type: ignore[arg-type]
        cache=WebCache(table, clock=clock),
        provider=provider,
    )
    return web, clock, table


def read(web: WebService, urls: str | list[str], **body: Any) -> Any:
    return web.read(POLICY, WebReadRequest(urls=urls, **body))


def test_many_urls_each_with_its_status_and_code(site: tuple[str, State]) -> None:
    base, _ = site
    web, _, _ = service(max_page_bytes=1024 * 1024)
    urls = [
        f"{base}/article",
        "ftp://example.com/x",
        f"{base}/missing",
        f"{base}/slow?s=6",
        f"{base}/pdf",
        f"{base}/big",
        "http://169.254.169.254/latest/meta-data/",
    ]
    # 2 s: long enough for the quick pages on a loaded machine, well short of the slow one.
    response = read(web, urls, timeout=2, max_concurrent=7)
    by_url = {r.url: r for r in response.results}
    assert [r.url for r in response.results] == urls  # order kept
    assert by_url[urls[0]].status == "success" and by_url[urls[0]].title == "Citegate Field Notes"
    assert by_url[urls[0]].extracted_at and by_url[urls[0]].word_count and by_url[urls[0]].token_count
    codes = [by_url[u].error_code for u in urls[1:]]
    assert codes == [
        "INVALID_URL_FORMAT",
        "URL_NOT_ACCESSIBLE",
        "TIMEOUT_ERROR",
        "WEB_READ_FAILED",
        "WEB_READ_FAILED",
        "URL_NOT_ACCESSIBLE",
    ]
    assert all(by_url[u].status == "error" and by_url[u].error for u in urls[1:])
    assert (response.total_urls, response.successful, response.failed) == (7, 1, 6)


def test_one_url_as_a_string_fails_as_the_response(site: tuple[str, State]) -> None:
    base, _ = site
    web, _, _ = service()
    with pytest.raises(InvalidUrlFormat):
        read(web, "not a url")
    with pytest.raises(UrlNotAccessible):
        read(web, f"{base}/missing")
    with pytest.raises(WebTimeout):
        read(web, f"{base}/slow?s=2", timeout=0.4)
    assert read(web, f"{base}/article").successful == 1


def test_max_concurrent_is_respected(site: tuple[str, State]) -> None:
    base, state = site
    web, _, _ = service()
    response = read(web, [f"{base}/concurrent?i={i}" for i in range(6)], max_concurrent=2)
    assert response.successful == 6 and state.max_in_flight == 2
    state.max_in_flight = 0
    read(web, [f"{base}/concurrent?j={i}" for i in range(6)], max_concurrent=6)
    assert state.max_in_flight > 2


def test_selectors_through_the_service(site: tuple[str, State]) -> None:
    base, _ = site
    web, _, _ = service()
    page = read(web, f"{base}/article", css_selector="#main", exclude_selector=".lead").results[0]
    assert "Every address" in page.content and "drops navigation" not in page.content
    with pytest.raises(InvalidSelector):
        read(web, [f"{base}/article"], css_selector="a:hover")
    with pytest.raises(WebReadFailed, match="browser"):
        read(web, [f"{base}/article"], wait_for_selector="#app")


def test_cache_hit_revalidation_and_expiry(site: tuple[str, State]) -> None:
    base, state = site
    web, clock, table = service()
    url = f"{base}/etag"
    first = read(web, url).results[0]
    assert first.cached is False and "Version v1" in first.content
    assert read(web, url).results[0].cached is True and state.hits["/etag"] == 1  # fresh: no request
    clock.now += 6 * 3600 + 1  # stale: revalidated with the validators, 304 refreshes it
    again = read(web, url).results[0]
    assert again.cached is True and state.hits["/etag"] == 2
    assert state.conditional[-1]["If-None-Match"] == '"v1"'
    assert "If-Modified-Since" in state.conditional[-1]
    assert read(web, url).results[0].cached is True and state.hits["/etag"] == 2  # fresh again
    state.etag_version = "v2"
    clock.now += 6 * 3600 + 1  # changed upstream: the 200 replaces the entry
    assert "Version v2" in read(web, url).results[0].content
    clock.now += 6 * 3600 + 24 * 3600 + 5  # past expires_at: gone, fetched unconditionally
    read(web, url)
    assert state.conditional[-1] == {}
    item = next(iter(table.items.values()))
    assert item["expires_at"] > item["fresh_until"]  # kept past freshness for revalidation


def test_bypass_cache_skips_reading_but_writes(site: tuple[str, State]) -> None:
    base, state = site
    web, _, table = service()
    read(web, f"{base}/article")
    fresh = read(web, f"{base}/article", bypass_cache=True).results[0]
    assert fresh.cached is False and state.hits["/article"] == 2
    assert len(table.items) == 1


def test_pages_without_validators_expire_after_six_hours(site: tuple[str, State]) -> None:
    base, state = site
    web, clock, _ = service()
    read(web, f"{base}/article")
    clock.now += 6 * 3600 - 10
    assert read(web, f"{base}/article").results[0].cached is True
    clock.now += 20
    assert read(web, f"{base}/article").results[0].cached is False and state.hits["/article"] == 2


def test_cached_pages_still_obey_the_callers_allow_list(site: tuple[str, State]) -> None:
    base, _ = site
    web, _, _ = service()
    read(web, f"{base}/article")
    narrow = Policy(principal_key="agent:b", tenant_id="t", web=WebGrant(enabled=True, domains=["docs.test"]))
    with pytest.raises(UrlNotAccessible, match="allow-list"):
        web.read(narrow, WebReadRequest(urls=f"{base}/article"))


def test_search_with_searxng_cache_and_domain_filter(site: tuple[str, State]) -> None:
    base, state = site
    web, clock, _ = service(SearxngSearch(f"{base}/searxng"))
    found = web.search(USER, POLICY, WebSearchRequest(query="ApeRAG 2025", max_results=3, locale="zh-CN"))
    assert [r.rank for r in found.results] == [1, 2, 3]
    first = found.results[0]
    assert first.url == "https://docs.example.com/1" and first.domain == "docs.example.com"
    assert first.snippet == "snippet 1 for ApeRAG 2025" and first.timestamp == "2025-01-01T00:00:00Z"
    assert found.total_results == 1250 and found.search_engine == "google" and found.search_time >= 0
    sent = state.queries["/searxng/search"]
    assert "engines" not in sent and sent["language"] == ["zh-CN"]  # the default engine is not forced
    web.search(USER, POLICY, WebSearchRequest(query="ApeRAG 2025", max_results=3, locale="zh-CN"))
    assert state.hits["/searxng/search"] == 1  # cached for an hour
    clock.now += 3601
    web.search(USER, POLICY, WebSearchRequest(query="ApeRAG 2025", max_results=3, locale="zh-CN"))
    assert state.hits["/searxng/search"] == 2
    narrow = Policy(
        principal_key="agent:a1", tenant_id="t", web=WebGrant(enabled=True, domains=["other.test"])
    )
    only = web.search(USER, narrow, WebSearchRequest(query="q"))
    assert [r.domain for r in only.results] == ["other.test"] and only.total_results == 1


def test_search_with_a_jina_compatible_provider(site: tuple[str, State]) -> None:
    base, state = site
    web, _, _ = service(JinaSearch(f"{base}/jina", "jina-key"))
    found = web.search(USER, POLICY, WebSearchRequest(query="hello", search_engine="bing"))
    assert [r.title for r in found.results] == ["hello jina 1", "hello jina 2"]
    assert found.search_engine == "bing" and state.headers["/jina/"]["authorization"] == "Bearer jina-key"
    bad_key, _, _ = service(JinaSearch(f"{base}/jina", "wrong"))
    with pytest.raises(WebSearchFailed, match="401"):
        bad_key.search(USER, POLICY, WebSearchRequest(query="hello"))


def test_search_failures(site: tuple[str, State]) -> None:
    base, _ = site
    unconfigured, _, _ = service(None)
    with pytest.raises(WebSearchFailed) as error:
        unconfigured.search(USER, POLICY, WebSearchRequest(query="x"))
    assert (
        error.value.details["reason"] == "not_configured" and spec001_code(error.value) == "WEB_SEARCH_FAILED"
    )
    for path in ("/broken-json", "/failing"):
        web, _, _ = service(SearxngSearch(f"{base}{path}"))
        with pytest.raises(WebSearchFailed):
            web.search(USER, POLICY, WebSearchRequest(query="x"))
    down, _, _ = service(SearxngSearch("http://127.0.0.1:9"))
    with pytest.raises(WebSearchFailed):
        down.search(USER, POLICY, WebSearchRequest(query="x"))
    limited, _, _ = service(SearxngSearch(f"{base}/limited"))
    with pytest.raises(WebSearchFailed) as upstream:
        limited.search(USER, POLICY, WebSearchRequest(query="x"))
    assert upstream.value.details == {"provider": "searxng", "retry_after": 42}
    slow, _, _ = service(SearxngSearch(f"{base}/slow"))
    with pytest.raises(WebTimeout) as late:
        slow.search(USER, POLICY, WebSearchRequest(query="x", timeout=0.5))
    assert spec001_code(late.value) == "TIMEOUT_ERROR"
    assert make_provider(None, None, None) is None and make_provider("jina", None, "k") is None


def test_search_rate_limit_per_user_and_ip(site: tuple[str, State]) -> None:
    base, _ = site
    web, _, _ = service(SearxngSearch(f"{base}/searxng"), search_per_minute=10, search_ip_per_minute=12)
    outcomes: list[str] = []

    def one(i: int) -> str:
        try:
            web.search(USER, POLICY, WebSearchRequest(query=f"q{i}"), source_ip="127.0.0.9")
            return "ok"
        except RateLimited as error:
            assert spec001_code(error) == "QUOTA_EXCEEDED" and error.details["retry_after"] > 0
            return "limited"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(15)))
    assert outcomes.count("ok") == 10
    other = Principal(type="agent", id="a2", tenant_id="t")
    for i in range(2):
        web.search(other, POLICY, WebSearchRequest(query=f"r{i}"), source_ip="127.0.0.9")
    with pytest.raises(RateLimited):  # the address's own limit (12) is spent across users
        web.search(other, POLICY, WebSearchRequest(query="r3"), source_ip="127.0.0.9")
