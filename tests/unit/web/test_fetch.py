"""Fetching: pinned connections, redirects re-checked at every hop, size cap, timeouts, types."""

from __future__ import annotations

import time

import pytest
from tests.unit.web.helpers import PUBLIC_IP, LoopbackTransport, public_resolver
from tests.unit.web.pages import State

from citegate.web import ContentTooLarge, UnsupportedContent, UrlNotAccessible, WebTimeout
from citegate.web.fetch import Conditional, Fetcher, decode
from citegate.web.safety import UrlGuard


def loopback_fetcher(**kwargs: object) -> Fetcher:
    return Fetcher(UrlGuard(allow_loopback=True), **kwargs)  # type: ignore[arg-type]


def public_fetcher(site: str) -> tuple[Fetcher, LoopbackTransport]:
    transport = LoopbackTransport(site)
    return Fetcher(UrlGuard(resolver=public_resolver), transport=transport), transport


def test_fetches_html_with_validators(site: tuple[str, State]) -> None:
    base, _ = site
    fetched = loopback_fetcher().fetch(f"{base}/etag", timeout=5)
    assert fetched.status == 200 and fetched.kind == "html" and "Version v1" in fetched.text
    assert fetched.etag == '"v1"' and fetched.last_modified == "Wed, 01 Jan 2025 00:00:00 GMT"
    again = loopback_fetcher().fetch(f"{base}/etag", timeout=5, conditional=Conditional(etag='"v1"'))
    assert again.not_modified and again.status == 304


def test_loopback_is_refused_without_the_test_setting(site: tuple[str, State]) -> None:
    base, state = site
    with pytest.raises(UrlNotAccessible, match="loopback"):
        Fetcher(UrlGuard()).fetch(f"{base}/article", timeout=5)
    assert state.hits == {}


def test_the_connection_goes_to_the_checked_address_with_the_original_host(site: tuple[str, State]) -> None:
    base, state = site
    fetcher, transport = public_fetcher(base)
    fetched = fetcher.fetch("http://public.test/article", timeout=5, locale="zh-CN")
    assert "Reading the web safely" in fetched.text
    assert transport.connected == [PUBLIC_IP]
    assert state.headers["/article"]["host"] == "public.test"
    assert state.headers["/article"]["accept-language"].startswith("zh-CN")


def test_dns_is_asked_once_per_hop_so_rebinding_cannot_switch_the_address(site: tuple[str, State]) -> None:
    base, _ = site
    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])  # a rebinding server's second answer
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    transport = LoopbackTransport(base)
    Fetcher(UrlGuard(resolver=rebinding), transport=transport).fetch("http://public.test/article", timeout=5)
    assert calls == ["public.test"] and transport.connected == [PUBLIC_IP]


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::1]:8080/",
        "http://2130706433/",
        "http://internal.test/",  # a name that resolves to 10.0.0.8
        "http://[fd00:ec2::254]/",
    ],
)
def test_redirects_to_internal_addresses_are_refused(site: tuple[str, State], location: str) -> None:
    base, _ = site
    fetcher, transport = public_fetcher(base)
    with pytest.raises(UrlNotAccessible):
        fetcher.fetch(f"http://public.test/redirect?to={location}", timeout=5)
    assert transport.connected == [PUBLIC_IP]  # the redirect target was never contacted


def test_redirects_outside_the_allow_list_or_to_other_schemes_are_refused(site: tuple[str, State]) -> None:
    base, _ = site
    fetcher, _ = public_fetcher(base)
    with pytest.raises(UrlNotAccessible, match="allow-list"):
        fetcher.fetch(
            "http://public.test/redirect?to=http://elsewhere.test/",
            timeout=5,
            allowed_domains=["public.test"],
        )
    with pytest.raises(Exception, match="http and https"):
        fetcher.fetch("http://public.test/redirect?to=file:///etc/passwd", timeout=5)


def test_a_redirect_inside_the_site_is_followed(site: tuple[str, State]) -> None:
    base, _ = site
    fetcher, _ = public_fetcher(base)
    fetched = fetcher.fetch("http://public.test/redirect?to=/article", timeout=5)
    assert fetched.url == "http://public.test/article"


def test_at_most_five_redirects(site: tuple[str, State]) -> None:
    base, state = site
    with pytest.raises(UrlNotAccessible, match="redirects"):
        loopback_fetcher().fetch(f"{base}/loop", timeout=5)
    assert state.hits["/loop"] == 6


def test_the_size_cap_holds_while_streaming(site: tuple[str, State]) -> None:
    base, _ = site
    with pytest.raises(ContentTooLarge):
        loopback_fetcher().fetch(f"{base}/big", timeout=10)
    with pytest.raises(ContentTooLarge):
        loopback_fetcher().fetch(f"{base}/big-declared", timeout=10)
    with pytest.raises(ContentTooLarge):
        loopback_fetcher(max_bytes=200).fetch(f"{base}/article", timeout=5)


def test_slow_pages_time_out(site: tuple[str, State]) -> None:
    base, _ = site
    with pytest.raises(WebTimeout):
        loopback_fetcher().fetch(f"{base}/slow?s=2", timeout=0.5)


def test_content_types_and_http_errors(site: tuple[str, State]) -> None:
    base, _ = site
    with pytest.raises(UnsupportedContent, match="application/pdf"):
        loopback_fetcher().fetch(f"{base}/pdf", timeout=5)
    with pytest.raises(UrlNotAccessible, match="404"):
        loopback_fetcher().fetch(f"{base}/missing", timeout=5)
    assert loopback_fetcher().fetch(f"{base}/text", timeout=5).kind == "text"
    with pytest.raises(UrlNotAccessible, match="connect"):
        loopback_fetcher().fetch("http://127.0.0.1:9/", timeout=2)  # nothing listens on port 9


def test_charsets(site: tuple[str, State]) -> None:
    base, _ = site
    assert "Un café crème" in loopback_fetcher().fetch(f"{base}/latin1", timeout=5).text
    assert decode("<meta charset='gbk'>中文".encode("gbk"), "text/html") == "<meta charset='gbk'>中文"
    assert decode(b"\xef\xbb\xbfhello", "text/html") == "hello"
    assert decode("café".encode("cp1252"), "text/html") == "café"


# -- the browser's requests (Fetcher.fetch_resource) ----------------------------------------------


def soon(seconds: float = 5) -> float:
    return time.monotonic() + seconds


def test_a_subresource_follows_checked_redirects_and_keeps_its_status_and_type(
    site: tuple[str, State],
) -> None:
    base, _ = site
    fetcher, transport = public_fetcher(base)
    data = fetcher.fetch_resource("http://public.test/redirect?to=/spa-data", deadline=soon())
    assert data.status == 200 and data.location is None and data.url == "http://public.test/spa-data"
    assert b"Rendered after a delay" in data.body and ("content-type", "application/json") in data.headers
    missing = fetcher.fetch_resource("http://public.test/missing", deadline=soon())
    assert missing.status == 404 and missing.body == b"not here"  # the page's script decides
    assert not any(k.lower() == "content-length" for k, _ in missing.headers)
    with pytest.raises(UrlNotAccessible):
        fetcher.fetch_resource("http://public.test/redirect?to=http://169.254.169.254/", deadline=soon())
    assert set(transport.connected) == {PUBLIC_IP}


def test_the_page_itself_gets_its_redirect_back_already_checked(site: tuple[str, State]) -> None:
    base, state = site
    fetcher, transport = public_fetcher(base)
    hop = fetcher.fetch_resource("http://public.test/redirect?to=/article", deadline=soon(), document=True)
    assert hop.location == "http://public.test/article" and hop.body == b""
    assert "/article" not in state.hits  # the browser asks for it next, through the route again
    with pytest.raises(UrlNotAccessible):
        fetcher.fetch_resource(
            "http://public.test/redirect?to=http://[::ffff:10.0.0.1]/", deadline=soon(), document=True
        )
    with pytest.raises(UrlNotAccessible, match="404"):
        fetcher.fetch_resource("http://public.test/missing", deadline=soon(), document=True)
    with pytest.raises(UnsupportedContent):
        fetcher.fetch_resource("http://public.test/pdf", deadline=soon(), document=True)
    assert set(transport.connected) == {PUBLIC_IP}


def test_the_browsers_requests_have_the_cap_the_deadline_and_the_allow_list(site: tuple[str, State]) -> None:
    base, state = site
    fetcher, _ = public_fetcher(base)
    with pytest.raises(ContentTooLarge):
        fetcher.fetch_resource("http://public.test/big", deadline=soon(10))
    with pytest.raises(WebTimeout):
        fetcher.fetch_resource("http://public.test/slow?s=3", deadline=soon(0.5))
    with pytest.raises(UrlNotAccessible, match="allow-list"):
        fetcher.fetch_resource("http://public.test/article", deadline=soon(), allowed_domains=["docs.test"])
    sent = fetcher.fetch_resource(
        "http://public.test/article",
        deadline=soon(),
        locale="de-DE",
        headers={"Accept": "text/css", "User-Agent": "HeadlessChrome", "Host": "evil.test", "X-App": "1"},
    )
    seen = state.headers["/article"]
    assert sent.status == 200 and seen["host"] == "public.test" and seen["accept"] == "text/css"
    assert seen["user-agent"].startswith("citegate") and seen["x-app"] == "1"
    assert seen["accept-language"].startswith("de-DE")
