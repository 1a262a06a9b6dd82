"""The widget in a real Docusaurus site (ui/docs-site, built from npm here), added by citegate's
Docusaurus plugin (ui/docusaurus-plugin), on another origin than the API, in Debian's Chromium.

The site is the sample corpus as Docusaurus docs, built against the server this module starts. A
reader asks from the Solar System page by keyboard: a cited answer whose link lands on the
section Docusaurus rendered (`/docs/solar-system/#mars`), a follow-up in the same session, and an
unanswerable question whose report is sent once on a double press. The widget's requests cross
origins under the API's CORS (CITEGATE_ALLOWED_ORIGINS), and nothing goes anywhere but the site
and citegate. Building the site takes about a minute (plus about one more the first time, to
install Docusaurus into ui/node_modules).
"""

from __future__ import annotations

import functools
import http.server
import socket
import subprocess
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from tests.e2e.browser.widget_support import (
    UI,
    axe,
    build_widget,
    chromium,
    focused,
    ingest,
    record,
    require_chromium,
    screenshot,
    tab_to,
)
from tests.e2e.browser.widget_support import ask as ask_in
from tests.e2e.conftest import ROOT, Server

pytestmark = pytest.mark.e2e

PROJECT = "citegate-docs-site"  # as ui/docs-site/docusaurus.config.js configures the plugin
DOCUSAURUS = UI / "node_modules" / ".bin" / "docusaurus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require_docusaurus() -> None:
    """Docusaurus is the docs-site workspace's dependency, installed by `make install` (make ui)
    from ui/package-lock.json: tests never reach the registry."""
    if not DOCUSAURUS.exists():
        pytest.skip("Docusaurus is not installed in ui/node_modules: run `make ui`")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Server]]:
    require_chromium()
    build_widget()
    _require_docusaurus()
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    data = tmp_path_factory.mktemp("docusaurus")
    server = Server(data / "data", {"CITEGATE_ALLOWED_ORIGINS": origin}).start()
    httpd = None
    try:
        out = data / "build"
        subprocess.run(
            [str(DOCUSAURUS), "build", "--out-dir", str(out), "--no-minify"],
            cwd=UI / "docs-site",
            env={**_env(), "CITEGATE_URL": server.url},
            check=True,
            capture_output=True,
            timeout=600,
        )
        docs = sorted(p for p in (ROOT / "samples").glob("*.md") if p.name != "README.md")
        # Where Docusaurus publishes them (/docs/<file name>/), the path keyed the same way.
        pages = [
            (
                p,
                {
                    "project": PROJECT,
                    "path": f"docs/{p.stem}",
                    "version": "main",
                    "url": f"/docs/{quote(p.stem)}/",
                },
            )
            for p in docs
        ]
        with server.client() as client:
            ingest(client, "docusaurus-docs", pages)
        handler = functools.partial(_Quiet, directory=str(out))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        yield origin, server
    finally:
        if httpd is not None:
            httpd.shutdown()
        server.stop()


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("npm_")}


def test_a_reader_asks_from_a_docusaurus_page_by_keyboard(site: tuple[str, Server]) -> None:
    origin, server = site
    with chromium() as browser:
        page = browser.new_page(color_scheme="light", viewport={"width": 1200, "height": 860})
        traffic = record(page)
        page.goto(f"{origin}/docs/solar-system/")
        page.locator("#citegate-widget").get_by_role("button", name="Ask the docs").wait_for()
        assert page.locator("h3#mars").count() == 1  # Docusaurus's anchor for the section

        page.keyboard.press("Control+k")
        page.get_by_role("dialog", name="Ask the documentation").wait_for()
        answer = ask_in(page, "How high is Olympus Mons?", 1)
        assert "22 kilometres" in answer.locator(".md").inner_text()
        href = answer.locator("ol.sources a").first.get_attribute("href")
        assert href == f"{origin}/docs/solar-system/#mars", href
        [created] = traffic.calls("/answer/sessions")
        assert created.url == f"{server.url}/answer/sessions"
        # The plugin's project and version; the section from Docusaurus's URL; published docs only.
        assert created.body["scope"] == {
            "projects": [PROJECT],
            "paths": ["docs"],
            "version": "main",
            "includeWorkingDocs": False,
        }

        follow = ask_in(page, "Does it have moons?", 2)
        [turn] = traffic.calls("/turns")
        session_id = turn.url.split("/answer/sessions/")[1].split("/")[0]
        assert session_id.startswith("s_") and turn.headers.get("x-session-token")
        assert "Phobos" in follow.locator(".md").inner_text()

        gap = ask_in(page, "What is the boiling point of tungsten?", 3)
        gap.locator(".noanswer").wait_for()
        tab_to(page, lambda f: f["text"] == "Report this gap to the maintainers")
        page.keyboard.press("Enter")
        page.keyboard.press("Enter")
        gap.get_by_text("Reported. The maintainers will see it").wait_for()
        assert len(traffic.calls("/agent/tools/create_feedback")) == 1

        assert axe(page) == []
        screenshot(page, "widget-docusaurus")

        # The citation jumps back: Tab to the first answer's source, Enter, and the page is there.
        tab_to(
            page, lambda f: f["inDialog"] and f["href"].endswith("#mars") and f["text"] == "The Solar System"
        )
        page.keyboard.press("Enter")
        page.wait_for_url(f"{origin}/docs/solar-system/#mars")
        top = page.evaluate("() => document.getElementById('mars').getBoundingClientRect().top")
        assert 0 <= top < 860, top  # scrolled to the cited section
        assert focused(page)["inWidget"] is False

        api = {url for url in traffic.urls if not url.startswith(origin + "/")}
        assert api and all(url.startswith(server.url + "/") for url in api), api
        page.close()
