"""Issue 22: what the local gateway serves beside the API (citegate.runtime.static): the widget, the
console (single-page, deep links come back to its index, nothing outside its folder) and the
example documentation site, whose headings carry the anchors citations point at and whose strict
CSP is the one a careful documentation site would send."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from citegate.knowledge.ingest.chunking import slugify
from citegate.runtime import example_site
from citegate.runtime.gateway import create_app


@pytest.fixture
def dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "console").mkdir()
    (tmp_path / "widget.js").write_text("(()=>{window.built=1})();")
    (tmp_path / "console" / "index.html").write_text("<!doctype html><title>console</title>")
    (tmp_path / "console" / "console.js").write_text("export {};")
    monkeypatch.setenv("CITEGATE_UI_DIST", str(tmp_path))
    return tmp_path


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(), raise_server_exceptions=False, follow_redirects=False) as running:
        yield running


def test_the_widget_script(client: TestClient, dist: Path) -> None:
    response = client.get("/widget.js")
    assert response.status_code == 200 and response.text == (dist / "widget.js").read_text()
    assert response.headers["content-type"].startswith(("application/javascript", "text/javascript"))
    assert response.headers["x-content-type-options"] == "nosniff"
    assert client.head("/widget.js").status_code == 200


def test_an_unbuilt_widget_says_how_to_build_it(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITEGATE_UI_DIST", str(tmp_path / "nothing"))
    response = client.get("/widget.js")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found" and "make ui" in response.json()["message"]


def test_the_console_and_its_deep_links(client: TestClient, dist: Path) -> None:
    assert client.get("/console").headers["location"] == "/console/"
    index = client.get("/console/")
    assert index.status_code == 200 and "<title>console</title>" in index.text
    assert index.headers["cache-control"] == "no-cache"
    assert client.get("/console/feedback/open").text == index.text  # the app routes it
    assert client.get("/console/console.js").text == "export {};"


@pytest.mark.parametrize("path", ["/console/%2e%2e/%2e%2e/pyproject.toml", "/console/..%2fwidget.js"])
def test_nothing_outside_the_console_folder(client: TestClient, dist: Path, path: str) -> None:
    response = client.get(path)
    assert "window.built" not in response.text and "[project]" not in response.text


def test_the_example_pages_embed_the_widget_under_a_strict_csp(client: TestClient) -> None:
    index = client.get("/example/")
    assert index.status_code == 200
    for page in example_site.example_pages():
        assert f'href="{page.url}"' in index.text
    page = client.get("/example/solar-system/")
    assert page.status_code == 200 and '<html lang="en">' in page.text
    script = re.search(r"<script ([^>]*)></script>", page.text)
    assert script and 'src="/widget.js"' in script.group(1)
    assert f'data-project="{example_site.PROJECT}"' in script.group(1)
    csp = dict(d.split(" ", 1) for d in page.headers["content-security-policy"].split("; "))
    assert csp["script-src"] == "'self'" and csp["connect-src"] == "'self'" and csp["default-src"] == "'none'"
    assert "unsafe-inline" not in page.headers["content-security-policy"]
    assert client.get("/example/solar-system").headers["location"] == "/example/solar-system/"
    assert client.get("/example/no-such-page/").status_code == 404
    assert '<html lang="zh">' in client.get("/example/长城/").text


def test_headings_carry_the_anchors_citations_point_at(client: TestClient) -> None:
    html = client.get("/example/solar-system/").text
    ids = re.findall(r'<h\d id="([^"]+)">([^<]+)</h\d>', html)
    assert ("mars", "Mars") in ids
    assert all(anchor == slugify(title) for anchor, title in ids)  # no repeated headings here
    text = client.get("/example/%E9%95%BF%E5%9F%8E/").text
    assert '<h2 id="长度">长度</h2>' in text


def test_ingest_metadata_ties_a_document_to_its_page() -> None:
    page = example_site.page_for("长城")
    assert page is not None
    assert example_site.ingest_metadata(page) == {
        "project": example_site.PROJECT,
        "path": "example/长城",
        "version": example_site.VERSION,
        "url": "/example/%E9%95%BF%E5%9F%8E/",
    }
