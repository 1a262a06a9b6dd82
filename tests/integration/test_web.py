"""Spec 001's web routes end to end in-process: handlers, governance, DynamoDB cache and counters.

The routes are not in the shared route table yet, so the handlers are invoked with API Gateway
v2 events directly (as the local gateway would after its authorizer). Pages come from a loopback
server; the reader may reach loopback here only through the test setting `allow_loopback`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from citegate.governance.policy.model import Policy, WebGrant
from citegate.platform.principal import Principal
from citegate.runtime.functions import invoke
from citegate.web.browser import ChromiumRenderer, find_browser
from citegate.web.cache import WebCache
from citegate.web.search import SearxngSearch
from citegate.web.service import WebConfig, WebService
from tests.unit.web.pages import State, serve

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[tuple[str, State]]:
    with serve() as running:
        yield running


@pytest.fixture(scope="module")
def renderer() -> Iterator[ChromiumRenderer]:
    path = find_browser(os.environ.get("CITEGATE_WEB_BROWSER"), auto_detect=True)
    if path is None:
        pytest.skip("no Chromium executable (apt-get install chromium, or set CITEGATE_WEB_BROWSER)")
    browser = ChromiumRenderer(path)
    yield browser
    browser.close()


@pytest.fixture
def web(stack: Any, site: tuple[str, State]) -> Iterator[WebService]:
    from citegate.container import services

    s = services()
    table_name = f"citegate-{s.settings.stage}-web_cache"
    client = s.aws.dynamodb.meta.client
    if table_name not in client.list_tables()["TableNames"]:
        client.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": "cache_key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "cache_key", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
        )
    service = WebService(
        WebConfig(allow_loopback=True, search_per_minute=10),
        counters=s.counters,
        cache=WebCache(s.aws.dynamodb.Table(table_name)),
        provider=SearxngSearch(f"{site[0]}/searxng"),
    )
    s.__dict__["web"] = service  # what Services.web (a cached_property, once added) would hold
    yield service
    s.__dict__.pop("web", None)


def agent(
    web: bool = True, tools: tuple[str, ...] = ("web_search", "web_read"), domains: Any = ()
) -> Principal:
    from citegate.container import services

    s = services()
    agent_id = "web-" + uuid.uuid4().hex[:8]
    s.policies.put(
        Policy(
            principal_key=f"agent:{agent_id}",
            tenant_id=s.settings.default_tenant,
            tools=list(tools),
            web=WebGrant(enabled=web, domains=list(domains)),
        )
    )
    return Principal(type="agent", id=agent_id, tenant_id=s.settings.default_tenant)


def call(
    function: str, path: str, body: Any, who: Principal | None, ip: str = "127.0.0.1"
) -> tuple[int, Any, Any]:
    request_id = uuid.uuid4().hex
    event = {
        "version": "2.0",
        "routeKey": f"POST {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": ip,
                "userAgent": "t",
            },
            "requestId": request_id,
            "routeKey": f"POST {path}",
            "stage": "$default",
            "authorizer": {"lambda": who.to_authorizer_context() if who else {}},
        },
        "body": body if isinstance(body, str) else json.dumps(body),
        "isBase64Encoded": False,
    }
    response = invoke(function, event)
    return response["statusCode"], json.loads(response["body"]), response.get("headers") or {}


def search(body: Any, who: Principal | None, ip: str = "127.0.0.1") -> tuple[int, Any, Any]:
    return call("web_search", "/api/v1/web/search", body, who, ip)


def read(body: Any, who: Principal | None) -> tuple[int, Any, Any]:
    return call("web_read", "/api/v1/web/read", body, who)


def test_search_route_shape(web: WebService) -> None:
    status, body, _ = search({"query": "ApeRAG 2025年最新发展", "max_results": 2}, agent())
    assert status == 200, body
    assert set(body) == {"query", "results", "search_engine", "total_results", "search_time"}
    assert body["query"] == "ApeRAG 2025年最新发展" and len(body["results"]) == 2
    assert set(body["results"][0]) == {"rank", "title", "url", "snippet", "domain", "timestamp"}


class PagesOf:
    """A search provider whose results are pages of the loopback site (and one internal address)."""

    name = "pages-of"

    def __init__(self, base: str) -> None:
        self.urls = [
            f"{base}/article",
            f"{base}/slow?s=8",
            f"{base}/missing",
            "http://169.254.169.254/latest/meta-data/",
        ]

    def search(self, query: str, *, max_results: int, engine: Any, locale: Any, timeout: float) -> Any:
        from citegate.web.search import SearchHit, SearchOutcome

        hits = [
            SearchHit(title=f"{query} {i}", url=url, snippet=f"snippet {i}")
            for i, url in enumerate(self.urls)
        ]
        return SearchOutcome(hits=hits[:max_results], total_results=len(hits))


def test_search_with_include_content_reads_each_page_within_the_timeout(
    web: WebService, site: tuple[str, State]
) -> None:
    """Spec 001 5.2: `include_content: true` gives each result its page, read by the reader of
    /api/v1/web/read (its address checks and codes), and the request's timeout bounds it all."""
    base, state = site
    web.provider = PagesOf(base)
    started = time.monotonic()
    status, body, _ = search({"query": "field notes", "include_content": True, "timeout": 2}, agent())
    took = time.monotonic() - started
    assert status == 200, body
    article, slow, missing, internal = body["results"]
    assert article["content"].startswith("# Reading the web safely") and article["word_count"] > 10
    assert "BUY CHEAP WIDGETS" not in article["content"]  # the reader's main-content extraction
    assert (slow["content"], slow["error_code"]) == (None, "TIMEOUT_ERROR")
    assert (missing["content"], missing["error_code"]) == (None, "URL_NOT_ACCESSIBLE")
    assert (internal["content"], internal["error_code"]) == (None, "URL_NOT_ACCESSIBLE")
    assert took < 4.5, f"the 2 s timeout was not kept: {took:.1f} s"
    # The page went through the reader's cache: /web/read now finds it there.
    assert read({"urls": f"{base}/article"}, agent())[1]["results"][0]["cached"] is True
    assert state.hits["/article"] == 1
    # Without include_content a result has only spec 3.2.1's fields.
    plain = search({"query": "field notes", "max_results": 1}, agent())[1]["results"][0]
    assert set(plain) == {"rank", "title", "url", "snippet", "domain", "timestamp"}


def test_read_route_shape_and_cache_in_dynamodb(web: WebService, site: tuple[str, State]) -> None:
    base, state = site
    who = agent()
    status, body, _ = read({"urls": [f"{base}/article", "bad url"], "max_concurrent": 2}, who)
    assert status == 200, body
    assert (body["total_urls"], body["successful"], body["failed"]) == (2, 1, 1)
    ok, bad = body["results"]
    assert ok["status"] == "success" and ok["content"].startswith("# Reading the web safely")
    assert {"url", "status", "title", "content", "extracted_at", "word_count", "token_count"} <= set(ok)
    assert bad == {
        "url": "bad url",
        "status": "error",
        "format": "markdown",
        "error": bad["error"],
        "error_code": "INVALID_URL_FORMAT",
    }
    again = read({"urls": f"{base}/article"}, who)[1]["results"][0]
    assert again["cached"] is True and state.hits["/article"] == 1


@pytest.mark.parametrize(
    ("url", "status", "code"),
    [
        ("javascript:alert(1)", 400, "INVALID_URL_FORMAT"),
        ("http://169.254.169.254/latest/meta-data/", 400, "URL_NOT_ACCESSIBLE"),
        ("/missing", 400, "URL_NOT_ACCESSIBLE"),
        ("/slow?s=3", 408, "TIMEOUT_ERROR"),
        ("/big", 500, "WEB_READ_FAILED"),
        ("/pdf", 500, "WEB_READ_FAILED"),
    ],
)
def test_single_url_errors_use_spec_001_codes(
    web: WebService, site: tuple[str, State], url: str, status: int, code: str
) -> None:
    target = site[0] + url if url.startswith("/") else url
    got, body, _ = read({"urls": target, "timeout": 1}, agent())
    assert (got, body["error"]) == (status, code), body
    assert set(body) == {"error", "message", "requestId", "details"}


def test_policy_and_request_errors(web: WebService, site: tuple[str, State]) -> None:
    status, body, _ = search({"query": "x"}, agent(web=False))
    assert (status, body["error"]) == (403, "FORBIDDEN")
    status, body, _ = search({"query": "x"}, agent(tools=("web_read",)))
    assert (status, body["error"], body["details"]["reason"]) == (403, "FORBIDDEN", "forbidden_tool")
    status, body, _ = search({"query": "x"}, None)
    assert (status, body["error"]) == (401, "UNAUTHORIZED")
    status, body, _ = search({"max_results": 3}, agent())
    assert (status, body["error"]) == (400, "INVALID_REQUEST")
    status, body, _ = read({"urls": []}, agent())
    assert (status, body["error"]) == (400, "INVALID_REQUEST")
    status, body, _ = read({"urls": f"{site[0]}/article", "wait_for_selector": "#app"}, agent())
    assert (status, body["error"], body["details"]["reason"]) == (
        500,
        "WEB_READ_FAILED",
        "browser_unavailable",
    )
    narrow = agent(domains=["docs.example.com"])
    status, body, _ = read({"urls": f"{site[0]}/article"}, narrow)
    assert (status, body["error"]) == (400, "URL_NOT_ACCESSIBLE") and "allow-list" in body["message"]


def test_search_not_configured(web: WebService) -> None:
    web.provider = None
    status, body, _ = search({"query": "x", "search_engine": "bing"}, agent())
    assert (status, body["error"]) == (500, "WEB_SEARCH_FAILED")
    assert body["details"] == {"reason": "not_configured", "search_engine": "bing"}


def test_ten_searches_a_minute_per_user_under_concurrency(web: WebService) -> None:
    who = agent()
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda i: search({"query": f"q{i}"}, who, ip=f"10.9.0.{i}"), range(14)))
    statuses = [o[0] for o in outcomes]
    assert statuses.count(200) == 10 and statuses.count(429) == 4
    limited = next(o for o in outcomes if o[0] == 429)
    assert limited[1]["error"] == "QUOTA_EXCEEDED" and int(limited[2]["Retry-After"]) >= 1
    assert limited[1]["details"]["retry_after"] >= 1


def test_wait_for_selector_through_the_route(
    web: WebService, site: tuple[str, State], renderer: ChromiumRenderer
) -> None:
    web.renderer = renderer
    base, _ = site
    who = agent()
    status, body, _ = read(
        {"urls": f"{base}/spa", "wait_for_selector": "#story", "css_selector": "#story"}, who
    )
    assert status == 200, body
    assert body["successful"] == 1 and body["results"][0]["content"].startswith("# Rendered after a delay")
    status, body, _ = read({"urls": f"{base}/spa", "wait_for_selector": "#never", "timeout": 1}, who)
    assert (status, body["error"]) == (408, "TIMEOUT_ERROR") and "#never" in body["message"]
    status, body, _ = read({"urls": f"{base}/spa", "wait_for_selector": "a:hover"}, who)
    assert (status, body["error"]) == (400, "INVALID_REQUEST")
