"""Cookie authentication (spec 001 9.1) and its cross-site request forgery guard."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from citegate.governance.identity.authenticate import authenticate, cookie, cross_site_refusal
from citegate.platform.settings import Settings

TOKEN = "cookie-test-token"
HOST = {"host": "api.example.com"}
NONE: frozenset[str] = frozenset()


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("RAG_API_TOKEN_SECRET_ARN", raising=False)
    return Settings(RAG_API_TOKEN=SecretStr(TOKEN))


def test_cookie_values_from_payload_2_cookies() -> None:
    assert cookie(["a=1", "citegate_token=abc"], "citegate_token") == "abc"
    assert cookie(['a=1; citegate_token="x%3Dy"'], "citegate_token") == "x=y"
    assert cookie(["xcitegate_token=abc"], "citegate_token") is None
    assert cookie(None, "citegate_token") is None and cookie(["citegate_token="], "citegate_token") is None


def test_a_cookie_carries_the_bearer_credential(settings: Settings) -> None:
    jar = [f"citegate_token={TOKEN}"]
    read = authenticate(HOST, settings, cookies=jar, method="GET")
    assert read.principal is not None and read.principal.type == "service"
    wrong = authenticate(HOST, settings, cookies=["citegate_token=guess"], method="GET")
    assert wrong.principal is None and wrong.status == 401
    # The Authorization header wins over a cookie.
    header = authenticate({**HOST, "Authorization": "Bearer guess"}, settings, cookies=jar, method="GET")
    assert header.principal is None and header.status == 401
    assert authenticate(HOST, settings, cookies=["other=1"]).principal.type == "anonymous"  # type: ignore[union-attr]


def test_a_state_changing_cookie_request_needs_an_allowed_origin(settings: Settings) -> None:
    jar = [f"citegate_token={TOKEN}"]
    same = authenticate({**HOST, "origin": "https://api.example.com"}, settings, cookies=jar, method="POST")
    assert same.principal is not None
    forged = authenticate({**HOST, "origin": "https://evil.example"}, settings, cookies=jar, method="DELETE")
    assert forged.principal is None and forged.status == 403 and "evil.example" in (forged.error or "")
    bare = authenticate(HOST, settings, cookies=jar, method="PATCH")
    assert bare.principal is None and bare.status == 403
    # Bearer callers are not browsers adding credentials on their own: no Origin needed.
    assert authenticate({**HOST, "Authorization": f"Bearer {TOKEN}"}, settings, method="POST").principal


def test_cross_site_refusal_rules() -> None:
    pages = frozenset({"https://app.example.com"})
    assert cross_site_refusal("GET", {"origin": "https://evil.example"}, NONE) is None
    assert cross_site_refusal("POST", {**HOST, "origin": "https://app.example.com"}, pages) is None
    assert cross_site_refusal("POST", {**HOST, "Origin": "HTTPS://App.Example.com"}, pages) is None
    assert cross_site_refusal("POST", {**HOST, "referer": "https://app.example.com/chat?x=1"}, pages) is None
    assert cross_site_refusal("POST", {**HOST, "origin": "https://app.example.com.evil.example"}, pages)
    assert cross_site_refusal("POST", {**HOST, "origin": "null", "referer": "https://api.example.com/"}, NONE)
    assert cross_site_refusal("POST", {"origin": "https://api.example.com"}, NONE), "no Host: nothing is own"
    assert cross_site_refusal("PUT", {**HOST, "origin": "http://api.example.com:8080"}, NONE)
