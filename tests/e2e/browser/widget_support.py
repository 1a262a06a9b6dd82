"""What the widget's browser tests share: building widget.js, the sample pages ingested with the
metadata their site gives them, Chromium through Playwright, keyboard moves inside the widget's
shadow root, the requests a page sends, and axe-core."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ROOT, SCREENSHOTS

UI = ROOT / "ui"
WIDGET = UI / "dist" / "widget.js"
AXE = UI / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The widget's own requests: the Answer API and the feedback tool, nothing else.
API_PATHS = ("/answer/ask", "/answer/sessions", "/agent/tools/create_feedback")


def require_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium)")


def build_widget() -> None:
    """Build ui/dist/widget.js when it is missing or older than its sources (esbuild, a second)."""
    sources = [p for p in (UI / "widget").rglob("*") if p.is_file()]
    if WIDGET.exists() and all(p.stat().st_mtime <= WIDGET.stat().st_mtime for p in sources):
        return
    node = shutil.which("node")
    if node is None:
        pytest.skip("no Node.js: widget.js cannot be built (install Node.js 20+, then make ui)")
    if not (UI / "node_modules" / "esbuild").exists():
        pytest.fail("widget.js is not built and cannot be: run `make install` (npm ci in ui/)")
    subprocess.run([node, "build.mjs"], cwd=UI, check=True, capture_output=True, timeout=120)


def ingest(client: httpx.Client, kb_id: str, documents: list[tuple[Path, dict[str, str]]]) -> None:
    """An approved knowledge base holding `documents` (file, metadata), every task succeeded."""
    created = client.post("/v1/kb", json={"kb_id": kb_id, "name": kb_id, "status": "approved"})
    assert created.status_code == 201, created.text
    tasks = []
    for path, metadata in documents:
        body = {
            "base64_file": base64.b64encode(path.read_bytes()).decode(),
            "source_name": path.name,
            "metadata": metadata,
        }
        response = client.post(f"/v1/kb/{kb_id}/documents", json=body)
        assert response.status_code == 202, response.text
        tasks.append(response.json()["task_id"])
    deadline = time.monotonic() + 180
    for task_id in tasks:
        while (task := client.get(f"/v1/tasks/{task_id}").json())["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, f"task {task_id} did not finish"
            time.sleep(0.2)
        assert task["status"] == "succeeded", task


@dataclass
class Sent:
    url: str
    method: str
    headers: dict[str, str]
    body: Any


@dataclass
class Traffic:
    """Every request the page made, and the widget's API calls with their bodies."""

    urls: list[str] = field(default_factory=list)
    api: list[Sent] = field(default_factory=list)

    def calls(self, path: str) -> list[Sent]:
        return [s for s in self.api if s.method == "POST" and path in s.url]


def record(page: Any) -> Traffic:
    traffic = Traffic()

    def on_request(request: Any) -> None:
        traffic.urls.append(request.url)
        if request.method == "POST" and any(p in request.url for p in API_PATHS):
            body = json.loads(request.post_data or "null")
            traffic.api.append(Sent(request.url, request.method, dict(request.headers), body))

    page.on("request", on_request)
    return traffic


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


# The element focused inside the widget's shadow root, described for assertions.
_FOCUSED = """() => {
  const host = document.getElementById('citegate-widget');
  const el = host && host.shadowRoot.activeElement;
  if (!el) return {inWidget: false, tag: document.activeElement && document.activeElement.tagName,
                   text: document.activeElement && document.activeElement.textContent.trim()};
  const dialog = host.shadowRoot.querySelector('[role=dialog]');
  return {inWidget: true, inDialog: !!dialog && dialog.contains(el), tag: el.tagName,
          text: (el.getAttribute('aria-label') || el.textContent || '').trim(), name: el.name || '',
          href: el.getAttribute('href') || ''};
}"""


def focused(page: Any) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(_FOCUSED)
    return result


def tab_to(page: Any, wanted: Callable[[dict[str, Any]], bool], limit: int = 60) -> dict[str, Any]:
    """Press Tab until the focused element is the wanted one (a keyboard user's way there)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        if wanted(now):
            return now
    raise AssertionError(f"Tab never reached the wanted element (last: {focused(page)})")


def ask(page: Any, question: str, count: int) -> Any:
    """Type a question into the focused input, press Enter, and wait for the `count`th turn's reply."""
    assert focused(page)["name"] == "question", focused(page)
    page.keyboard.type(question)
    page.keyboard.press("Enter")
    turn = page.locator("#citegate-widget article.turn").nth(count - 1)
    turn.locator(".md, .noanswer, .error").first.wait_for(timeout=60_000)
    return turn


def axe(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now (open shadow roots too)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol, which the page's CSP does not govern (a script
        # tag would be refused: the example pages allow no inline script).
        page.evaluate(AXE.read_text(encoding="utf-8"))
    violations: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
