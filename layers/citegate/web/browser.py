"""`wait_for_selector`: the page rendered by a headless Chromium, with the reader's safety intact.

The browser never reaches the network by itself. Every request it makes is intercepted
(`context.route`) and answered by the same `Fetcher` as a plain read (public addresses only, the
connection pinned to the checked address, redirects checked at every hop, the size cap, the policy's
allow-list), or refused. Behind that wall is a second one: Chromium is started with a proxy that
refuses every connection (a port this process keeps bound and never listens on) and a host-resolver
rule that resolves no name, so a request that escaped interception (a preconnect, a WebRTC
candidate, a feature of a later Chromium) still reaches nothing.

Playwright is imported on the first render only, and never downloads a browser: it drives the
Chromium given by the settings (Debian's `/usr/bin/chromium` locally). One browser per process,
driven from one thread with its own event loop; each render gets a fresh context (no cookies,
storage or cache shared between reads). Playwright's `launch` gives the browser a new temporary
profile directory and removes it on close.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import html
import os
import shutil
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from citegate.platform.observability import logger
from citegate.web import UrlNotAccessible, WebError, WebReadFailed, WebTimeout
from citegate.web.fetch import MAX_REDIRECTS, Fetcher, Resource

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Playwright, Route, WebSocketRoute

T = TypeVar("T")

# Where Debian (and Ubuntu's snap-less packages) put Chromium; looked for only when the local runtime
# has no browser configured.
BROWSER_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DISABLED = frozenset({"none", "off", "false", "0"})

# Requests a reader needs to build the DOM; images, media, fonts, frames and beacons are refused
# (the text does not need them, and each would be one more fetch on the caller's behalf).
_ALLOWED_TYPES = frozenset({"document", "script", "stylesheet", "xhr", "fetch"})
# Reading must not change anything on the site, so the browser only sends GET (and HEAD).
_ALLOWED_METHODS = frozenset({"GET", "HEAD"})
MAX_REQUESTS_PER_PAGE = 100
MAX_PAGES_AT_ONCE = 4
_LAUNCH_TIMEOUT_SECONDS = 30.0


class BrowserUnavailable(WebReadFailed):
    """No browser on this server (none configured, Playwright missing, or Chromium would not start).

    Its kind stays WEB_READ_FAILED's (spec 001 has no code of its own for it); the reason says why.
    """

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("details", {"reason": "browser_unavailable"})
        super().__init__(
            message or "wait_for_selector needs a headless browser, and none is configured on this server",
            **kwargs,
        )


def find_browser(configured: str | None, *, auto_detect: bool) -> str | None:
    """The Chromium executable to drive, or None. A configured value wins ("none" turns it off);
    unset, `auto_detect` (the local runtime) looks for Debian's package."""
    if configured is not None and configured.strip():
        value = configured.strip()
        if value.lower() in DISABLED:
            return None
        found = value if os.path.isfile(value) and os.access(value, os.X_OK) else shutil.which(value)
        if not found:
            logger.warning("the configured browser is not an executable", extra={"browser": value})
        return found
    if auto_detect:
        for candidate in BROWSER_CANDIDATES:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def launch_args(dead_proxy_port: int) -> list[str]:
    return [
        # Lambda and containers have no user namespaces for Chromium's sandbox; what protects the
        # host is that the browser has no network of its own and every context is thrown away.
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-breakpad",
        "--disable-domain-reliability",
        "--no-first-run",
        "--no-default-browser-check",
        "--mute-audio",
        "--dns-prefetch-disable",
        # Defence in depth (see the module docstring). `<-loopback>` removes Chromium's implicit
        # proxy bypass for localhost, which would otherwise let 127.0.0.1 through.
        f"--proxy-server=http://127.0.0.1:{dead_proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    ]


@dataclass
class Rendered:
    url: str  # the page's address after redirects
    html: str  # the DOM, serialized once the selector appeared


class Renderer(Protocol):
    def render(
        self,
        url: str,
        *,
        fetcher: Fetcher,
        wait_for_selector: str,
        timeout: float,
        allowed_domains: Sequence[str] = (),
        locale: str | None = None,
    ) -> Rendered: ...


@dataclass
class _Page:
    """One render's bookkeeping, touched only on the browser's event loop."""

    fetcher: Fetcher
    allowed_domains: Sequence[str]
    locale: str | None
    deadline: float
    byte_budget: int
    failed: asyncio.Future[WebError]
    main_frame: Any = None  # the page's main frame, once the page exists
    requests: int = 0
    received: int = 0
    redirects: int = 0
    refused: list[str] = field(default_factory=list)

    def fail(self, error: WebError) -> None:
        if not self.failed.done():
            self.failed.set_result(error)


def _abort_code(error: WebError) -> str:
    if isinstance(error, WebTimeout):
        return "timedout"
    if isinstance(error, UrlNotAccessible):
        return "blockedbyclient"
    return "failed"


def _redirect_stub(location: str) -> bytes:
    # Chromium goes to the network for a fulfilled 3xx instead of asking the route again, so a
    # redirect of the page itself is handed over as a refresh: the browser's next request for
    # `location` (checked already) comes back through the route like any other.
    target = html.escape(location, quote=True)
    return f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'.encode()


def _fulfil_headers(resource: Resource) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in resource.headers:
        name = key.lower()
        if name in headers:
            headers[name] += ("\n" if name == "set-cookie" else ", ") + value
        else:
            headers[name] = value
    return headers


class ChromiumRenderer:
    """Renders pages in one headless Chromium, started on first use (see the module docstring)."""

    def __init__(self, executable: str, *, max_pages: int = MAX_PAGES_AT_ONCE) -> None:
        self.executable = executable
        self.max_pages = max_pages
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._fetch_pool: ThreadPoolExecutor | None = None
        self._dead_proxy: socket.socket | None = None
        # Loop-side state (created on the loop).
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._browser_lock: asyncio.Lock | None = None
        self._pages: asyncio.Semaphore | None = None

    # -- the caller's side (any thread) -----------------------------------------------------------

    def render(
        self,
        url: str,
        *,
        fetcher: Fetcher,
        wait_for_selector: str,
        timeout: float,
        allowed_domains: Sequence[str] = (),
        locale: str | None = None,
    ) -> Rendered:
        async def work(browser: Browser) -> Rendered:
            return await self._render(
                browser, url, fetcher, wait_for_selector, timeout, allowed_domains, locale
            )

        return self.run(work, timeout=timeout)

    def run(self, work: Callable[[Browser], Awaitable[T]], *, timeout: float) -> T:
        """Runs `work` with the browser on the browser's loop and waits for it from this thread."""
        loop = self._start()

        async def with_browser() -> T:
            return await work(await self._ensure_browser())

        future = asyncio.run_coroutine_threadsafe(with_browser(), loop)
        try:
            # The render keeps its own deadline; this one only guards against a wedged browser.
            return future.result(timeout=timeout + _LAUNCH_TIMEOUT_SECONDS + 5)
        except FutureTimeout as error:
            future.cancel()
            raise WebTimeout(f"the browser did not finish within {timeout:g}s") from error

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=15)
            except Exception:  # closing is best effort: the process may be on its way out
                logger.warning("the headless browser did not close cleanly")
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        # The next render starts a new loop, and these belong to the old one.
        self._browser_lock = self._pages = None
        if self._fetch_pool is not None:
            self._fetch_pool.shutdown(wait=False, cancel_futures=True)
            self._fetch_pool = None
        if self._dead_proxy is not None:
            self._dead_proxy.close()
            self._dead_proxy = None

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                # Bound, never listening: every connection to this port is refused, and no other
                # program can take the port while the browser points its proxy at it.
                self._dead_proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._dead_proxy.bind(("127.0.0.1", 0))
                self._fetch_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="web-browser-fetch")
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="web-browser", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)
            return self._loop

    # -- the browser's side (its event loop) ------------------------------------------------------

    async def _ensure_browser(self) -> Browser:
        if self._browser_lock is None:
            self._browser_lock = asyncio.Lock()
            self._pages = asyncio.Semaphore(self.max_pages)
        async with self._browser_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            try:
                from playwright.async_api import async_playwright
            except ImportError as error:
                raise BrowserUnavailable(
                    "wait_for_selector needs Playwright (the 'browser' extra), which is not installed"
                ) from error
            assert self._dead_proxy is not None
            try:
                if self._playwright is None:
                    self._playwright = await async_playwright().start()
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.executable,
                    headless=True,
                    args=launch_args(self._dead_proxy.getsockname()[1]),
                    timeout=_LAUNCH_TIMEOUT_SECONDS * 1000,
                    handle_sigint=False,
                    handle_sigterm=False,
                    handle_sighup=False,
                )
            except Exception as error:
                logger.exception(
                    "the headless browser could not be started", extra={"browser": self.executable}
                )
                raise BrowserUnavailable(
                    "the headless browser could not be started on this server"
                ) from error
            return self._browser

    async def _shutdown(self) -> None:
        if self._browser is not None:
            await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def _render(
        self,
        browser: Browser,
        url: str,
        fetcher: Fetcher,
        selector: str,
        timeout: float,
        allowed_domains: Sequence[str],
        locale: str | None,
    ) -> Rendered:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        deadline = time.monotonic() + timeout
        late = WebTimeout(f"the selector {selector!r} did not appear within {timeout:g}s")
        assert self._pages is not None
        try:
            await asyncio.wait_for(self._pages.acquire(), timeout)
        except TimeoutError as error:
            raise late from error
        page_state = _Page(
            fetcher=fetcher,
            allowed_domains=allowed_domains,
            locale=locale,
            deadline=deadline,
            byte_budget=4 * fetcher.max_bytes,
            failed=asyncio.get_running_loop().create_future(),
        )
        context: BrowserContext | None = None
        try:
            context = await browser.new_context(
                service_workers="block",  # a service worker's requests would bypass the route
                accept_downloads=False,
                locale=locale,
            )
            await context.route("**/*", partial(self._route, page_state))
            await context.route_web_socket("**/*", _refuse_websocket)
            page = await context.new_page()
            page_state.main_frame = page.main_frame

            def remaining_ms() -> float:
                return max(deadline - time.monotonic(), 0.01) * 1000

            try:
                await page.goto(url, wait_until="commit", timeout=remaining_ms())
            except PlaywrightError as error:
                if page_state.failed.done():
                    raise page_state.failed.result() from error
                if isinstance(error, PlaywrightTimeout):
                    raise WebTimeout(f"reading {url} took longer than {timeout:g}s") from error
                raise UrlNotAccessible("the page could not be loaded in the browser") from error
            waiting = asyncio.ensure_future(
                page.wait_for_selector(f"css={selector}", state="attached", timeout=remaining_ms())
            )
            # A refused or failed navigation of the page ends the wait at once, with its own code.
            either: set[asyncio.Future[Any]] = {waiting, page_state.failed}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if page_state.failed.done():
                waiting.cancel()
                raise page_state.failed.result()
            try:
                waiting.result()
            except PlaywrightTimeout as error:
                raise late from error
            except PlaywrightError as error:
                raise WebReadFailed("the page could not be rendered") from error
            try:
                content = await page.content()
            except PlaywrightError:  # caught mid-navigation: the next document is the page
                await page.wait_for_load_state("domcontentloaded", timeout=remaining_ms())
                content = await page.content()
            return Rendered(url=page.url, html=content)
        except PlaywrightError as error:  # the browser failed us (crashed, closed): not the page's fault
            logger.warning("rendering failed", extra={"url": url, "error": str(error)[:300]})
            raise WebReadFailed("the page could not be rendered") from error
        finally:
            if page_state.refused:
                logger.info(
                    "the browser's requests refused",
                    extra={"url": url, "refused": page_state.refused[:20], "count": len(page_state.refused)},
                )
            if context is not None:
                with contextlib.suppress(PlaywrightError):
                    await context.close()
            self._pages.release()

    async def _route(self, page: _Page, route: Route) -> None:
        """Every request of the browser: answered by the fetcher, or refused."""
        request = route.request
        url = request.url
        kind = request.resource_type
        try:
            # The page's own navigations only: a frame's or a popup's document is refused below.
            main = kind == "document" and request.is_navigation_request() and request.frame == page.main_frame
        except Exception:  # a request without a frame (a worker's): never the page itself
            main = False
        refusal: str | None = None
        if not url.startswith(("http://", "https://")):
            refusal = "scheme"
        elif request.method not in _ALLOWED_METHODS:
            refusal = "method"
        elif kind not in _ALLOWED_TYPES or (kind == "document" and not main):
            refusal = "type"
        elif page.requests >= MAX_REQUESTS_PER_PAGE or page.received >= page.byte_budget:
            refusal = "budget"
        elif main and page.redirects > MAX_REDIRECTS:
            page.fail(UrlNotAccessible(f"more than {MAX_REDIRECTS} redirects"))
            refusal = "redirects"
        if refusal is not None:
            page.refused.append(f"{refusal}: {url[:200]}")
            await _quietly(route.abort("blockedbyclient"))
            return
        page.requests += 1
        fetch = partial(
            page.fetcher.fetch_resource,
            url,
            deadline=page.deadline,
            allowed_domains=page.allowed_domains,
            locale=page.locale,
            headers=request.headers,
            document=main,
        )
        try:
            resource = await asyncio.get_running_loop().run_in_executor(self._fetch_pool, fetch)
        except WebError as error:
            page.refused.append(f"{error.code}: {url[:200]}")
            if main:
                page.fail(error)
            await _quietly(route.abort(_abort_code(error)))
            return
        except Exception:
            logger.exception("a browser request failed", extra={"url": url})
            if main:
                page.fail(WebReadFailed("the page could not be read"))
            await _quietly(route.abort("failed"))
            return
        if resource.location is not None:
            page.redirects += 1
            body = _redirect_stub(resource.location)
            await _quietly(route.fulfill(status=200, headers={"content-type": "text/html"}, body=body))
            return
        page.received += len(resource.body)
        await _quietly(
            route.fulfill(status=resource.status, headers=_fulfil_headers(resource), body=resource.body)
        )


async def _refuse_websocket(websocket: WebSocketRoute) -> None:
    # Never connected to a server: the fetcher speaks HTTP only, and a socket could reach anything.
    await websocket.close(code=1008, reason="not allowed by the reader")


async def _quietly(action: Awaitable[None]) -> None:
    """Answering a route whose page has already been closed is not an error."""
    try:
        await action
    except Exception as error:
        logger.debug("a browser request was answered after its page closed", extra={"error": str(error)})


__all__ = [
    "BROWSER_CANDIDATES",
    "BrowserUnavailable",
    "ChromiumRenderer",
    "Rendered",
    "Renderer",
    "find_browser",
    "launch_args",
]
