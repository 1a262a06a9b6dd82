"""wait_for_selector: pages rendered by headless Chromium, whose every request goes through the fetcher.

Pages come from the loopback site under the name `public.test` (see helpers.LoopbackTransport):
the reader runs with loopback refused, exactly as in production, and the transport records every
address a connection was made to. One browser serves the whole module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.web.helpers import (
    PUBLIC_IP,
    Clock,
    LoopbackTransport,
    MemoryCounters,
    MemoryTable,
    public_resolver,
)
from tests.unit.web.pages import State

from citegate.governance.policy.model import Policy, WebGrant
from citegate.platform.errors import error_code, error_details
from citegate.platform.settings import Settings
from citegate.web import WebTimeout
from citegate.web.browser import BrowserUnavailable, ChromiumRenderer, Rendered, find_browser
from citegate.web.cache import WebCache
from citegate.web.reader import InvalidSelector
from citegate.web.schemas import WebReadRequest
from citegate.web.service import WebConfig, WebService

POLICY = Policy(principal_key="agent:a1", tenant_id="t", web=WebGrant(enabled=True))
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def renderer() -> Iterator[ChromiumRenderer]:
    path = find_browser(os.environ.get("CITEGATE_WEB_BROWSER"), auto_detect=True)
    if path is None:
        pytest.skip("no Chromium executable (apt-get install chromium, or set CITEGATE_WEB_BROWSER)")
    browser = ChromiumRenderer(path)
    yield browser
    browser.close()


class Public:
    """A WebService whose fetcher reaches the loopback site only as public.test (PUBLIC_IP)."""

    def __init__(self, site: tuple[str, State], renderer: Any, **config: Any) -> None:
        self.base, self.state = site
        self.transport = LoopbackTransport(self.base)
        self.clock = Clock()
        self.web = WebService(
            WebConfig(**config),
            counters=MemoryCounters(),  # type: ignore[arg-type]
            cache=WebCache(MemoryTable(), clock=self.clock),
            resolver=public_resolver,
            renderer=renderer,
            transport=self.transport,
        )

    def read(self, urls: str | list[str], policy: Policy = POLICY, **body: Any) -> Any:
        return self.web.read(policy, WebReadRequest(urls=urls, **body))

    def only_the_public_address_was_contacted(self) -> bool:
        return set(self.transport.connected) == {PUBLIC_IP}


@pytest.fixture
def public(site: tuple[str, State], renderer: ChromiumRenderer) -> Public:
    return Public(site, renderer)


def test_content_inserted_by_a_script_needs_wait_for_selector(public: Public) -> None:
    plain = public.read("http://public.test/spa").results[0]
    assert "Loading" in plain.content and "Rendered after a delay" not in plain.content
    rendered = public.read(
        "http://public.test/spa", wait_for_selector="#story", css_selector="#app", exclude_selector=".promo"
    ).results[0]
    assert rendered.status == "success" and rendered.title == "Late App"
    assert rendered.content.startswith("# Rendered after a delay")
    assert "A reader that does not run scripts sees only the loading message" in rendered.content
    assert "Loading" not in rendered.content and "Subscribe" not in rendered.content  # exclude_selector
    # The DOM built by scripts is sanitised like any page: no handlers, no script links.
    assert "[script link]" in rendered.content and "javascript" not in rendered.content.lower()
    assert "onclick" not in rendered.content and rendered.word_count and rendered.token_count
    assert public.state.hits["/spa-data"] == 1 and public.only_the_public_address_was_contacted()


def test_a_selector_that_never_appears_is_a_timeout(public: Public) -> None:
    started = time.monotonic()
    result = public.read(["http://public.test/spa"], wait_for_selector="#never", timeout=1.5).results[0]
    assert (result.status, result.error_code) == ("error", "TIMEOUT_ERROR")
    assert "#never" in result.error and time.monotonic() - started < 6
    with pytest.raises(WebTimeout) as one:  # one URL as a string: the response's own error, 408
        public.read("http://public.test/spa", wait_for_selector="article.never", timeout=1)
    assert (error_code(one.value, "chat"), one.value.status) == ("TIMEOUT_ERROR", 408)


def test_scripts_and_tags_cannot_reach_internal_addresses(public: Public) -> None:
    page = public.read("http://public.test/ssrf", wait_for_selector="#done").results[0]
    assert page.status == "success", page.error
    # Metadata, private, a name resolving to 10.0.0.8, loopback (the site itself, in two spellings),
    # and same-site redirects to metadata and loopback: all refused; the same-site data loads.
    for index in range(7):
        assert f"target {index} rejected" in page.content
    assert "target 7 fulfilled" in page.content
    assert public.only_the_public_address_was_contacted()
    assert set(public.state.hits) == {"/ssrf", "/redirect", "/spa-data"}  # /article never reached


def test_a_page_that_navigates_to_an_internal_address_fails_the_read(public: Public) -> None:
    started = time.monotonic()
    result = public.read(["http://public.test/navigates"], wait_for_selector="#never", timeout=10).results[0]
    assert result.error_code == "URL_NOT_ACCESSIBLE" and "metadata" in result.error
    assert time.monotonic() - started < 8  # refused at once, not after the timeout
    assert public.only_the_public_address_was_contacted()


def test_redirects_of_the_page_and_the_allow_list(public: Public) -> None:
    urls = [
        "http://public.test/redirect?to=/spa",
        "http://public.test/redirect?to=http://169.254.169.254/latest/meta-data/",
        "http://public.test/redirect?to=http://elsewhere.test/",
        "http://127.0.0.1/",
        "http://public.test/spa",
    ]
    narrow = Policy(
        principal_key="agent:a", tenant_id="t", web=WebGrant(enabled=True, domains=["public.test"])
    )
    response = public.read(urls, policy=narrow, wait_for_selector="#story", max_concurrent=3, timeout=10)
    results = {r.url: r for r in response.results}
    assert results[urls[0]].status == "success" and "Rendered after a delay" in results[urls[0]].content
    assert results[urls[4]].status == "success"
    assert [results[u].error_code for u in urls[1:4]] == ["URL_NOT_ACCESSIBLE"] * 3
    assert "allow-list" in results[urls[2]].error and "allow-list" in results[urls[3]].error
    assert public.only_the_public_address_was_contacted()


def test_the_rendered_page_has_the_size_cap(site: tuple[str, State], renderer: ChromiumRenderer) -> None:
    small = Public(site, renderer, max_page_bytes=20_000)
    fits = small.read(["http://public.test/grows?rows=20"], wait_for_selector="#grown").results[0]
    assert fits.status == "success" and "Row 19 of a page" in fits.content
    grown = small.read(["http://public.test/grows?rows=2000"], wait_for_selector="#grown").results[0]
    assert grown.error_code == "WEB_READ_FAILED" and "larger than" in grown.error


def test_rendered_pages_are_cached_apart_from_plain_reads(public: Public) -> None:
    first = public.read("http://public.test/spa", wait_for_selector="#story").results[0]
    again = public.read("http://public.test/spa", wait_for_selector="#story").results[0]
    assert (first.cached, again.cached) == (False, True) and again.content == first.content
    assert public.state.hits["/spa-data"] == 1
    plain = public.read("http://public.test/spa").results[0]
    assert plain.cached is False and "Rendered after a delay" not in plain.content
    public.clock.now += 6 * 3600 + 1  # no validators for a rendered page: after 6 hours it is gone
    assert public.read("http://public.test/spa", wait_for_selector="#story").results[0].cached is False
    assert public.state.hits["/spa-data"] == 2


def test_the_browser_has_no_network_of_its_own(site: tuple[str, State], renderer: ChromiumRenderer) -> None:
    """The second wall: a context with no route at all still reaches nothing, loopback included."""
    base, state = site
    port = base.rsplit(":", 1)[1]

    async def unrouted(browser: Any) -> list[str]:
        from playwright.async_api import Error

        context = await browser.new_context()
        page = await context.new_page()
        errors = []
        for url in (f"{base}/article", f"http://localhost:{port}/article", "http://public.test/article"):
            try:
                await page.goto(url, timeout=5000)
                errors.append("reached " + url)
            except Error as error:
                errors.append(str(error).splitlines()[0])
        await context.close()
        return errors

    errors = renderer.run(unrouted, timeout=20)
    assert all("ERR_PROXY_CONNECTION_FAILED" in e or "ERR_NAME_NOT_RESOLVED" in e for e in errors), errors
    assert state.hits == {}


def test_without_a_browser_the_code_is_clear(site: tuple[str, State]) -> None:
    none = Public(site, None)
    assert none.web.renderer is None
    with pytest.raises(BrowserUnavailable) as error:
        none.read("http://public.test/spa", wait_for_selector="#story")
    assert error_code(error.value, "chat") == "WEB_READ_FAILED" and error.value.status == 500
    assert error_details(error.value, "chat") == {"reason": "browser_unavailable"}
    assert none.state.hits == {}  # refused before anything is fetched
    broken = Public(site, ChromiumRenderer("/nonexistent/chromium"))
    try:
        result = broken.read(["http://public.test/spa"], wait_for_selector="#story").results[0]
    finally:
        broken.web.renderer.close()  # type: ignore[union-attr]
    assert result.error_code == "WEB_READ_FAILED" and "browser" in result.error


def test_which_browser_the_settings_give() -> None:
    assert find_browser("none", auto_detect=True) is None
    assert find_browser("/nonexistent/chromium", auto_detect=True) is None
    assert find_browser(None, auto_detect=False) is None
    assert find_browser(sys.executable, auto_detect=False) == sys.executable
    assert WebConfig.from_settings(Settings(runtime="aws")).browser_path is None  # a Lambda: only if set
    assert WebConfig.from_settings(Settings(CITEGATE_WEB_BROWSER="none")).browser_path is None
    config = WebConfig.from_settings(Settings(runtime="aws", CITEGATE_WEB_BROWSER=sys.executable))
    assert config.browser_path == sys.executable


def test_the_wait_selector_is_checked_before_any_browser_work(site: tuple[str, State]) -> None:
    class Untouched:
        def render(self, *args: Any, **kwargs: Any) -> Rendered:
            raise AssertionError("the browser must not be asked")

    web = Public(site, Untouched())
    with pytest.raises(InvalidSelector):
        web.read(["http://public.test/spa"], wait_for_selector="text=Loading")


def test_playwright_is_imported_only_for_wait_for_selector() -> None:
    script = """
import sys
from tests.unit.web.pages import serve
from citegate.web.schemas import WebReadRequest
from citegate.governance.policy.model import Policy, WebGrant
from citegate.web.service import WebConfig, WebService
from tests.unit.web.helpers import MemoryCounters
with serve() as (base, _):
    web = WebService(WebConfig(allow_loopback=True, browser_path=sys.executable), counters=MemoryCounters())
    assert web.renderer is not None
    policy = Policy(principal_key="agent:a", tenant_id="t", web=WebGrant(enabled=True))
    assert web.read(policy, WebReadRequest(urls=base + "/article")).successful == 1
assert not [m for m in sys.modules if m.startswith("playwright")], "playwright was imported"
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers")])}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
