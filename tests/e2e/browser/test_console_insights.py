"""The console's Insights view in Debian's Chromium against the real server (`citegate serve`, the
default embedder): readers and an agent ask questions the documents do not answer (in English and
Chinese, rephrased), a reader marks an answer not helpful; the operator sees the summary chart and
the gap groups ranked by count, opens an improvement task for a group (a second click counts on the
same task), adds the missing page, and marks the group fixed: its questions are answered now.
axe-core finds no violation at all (light and dark); screenshots console-insights*.png."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser.test_console import DIST, _axe, _build_console
from tests.e2e.browser.widget_support import chromium, require_chromium
from tests.e2e.conftest import SCREENSHOTS, TOKEN, Server

pytestmark = pytest.mark.e2e

KB = "insights-e2e"
PORT = [
    "What is the default port of the kunora console?",
    "Which port does the kunora console listen on by default?",
    "kunora 控制台默认使用哪个端口？",
    "what is the default port of the kunora console",
]
SSO = ["Can I sign in to the kunora console with single sign-on?", "kunora 控制台可以用单点登录吗？"]
ANSWERED = "How many entries does agent memory keep by default?"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    _build_console()
    assert (DIST / "console.js").exists()
    server = Server(
        tmp_path_factory.mktemp("insights") / "data",
        # The product's embedder, whatever an earlier test of this process set in the environment.
        {"CITEGATE_ANONYMOUS_IP_RATE_LIMIT": "1000", "CITEGATE_EMBEDDER": "use"},
    )
    server.start(timeout=180)
    try:
        yield {"api": server.url, "console": f"{server.url}/console/"}
    finally:
        server.stop()


def _wait(api: httpx.Client, task_id: str) -> None:
    import time

    for _ in range(600):
        if api.get(f"/v1/tasks/{task_id}").json()["status"] in ("succeeded", "failed"):
            return
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} did not finish")


def _ingest(api: httpx.Client, name: str, text: str) -> None:
    made = api.post(f"/v1/kb/{KB}/documents", json={"source_name": name, "text": text})
    assert made.status_code == 202, made.text
    _wait(api, made.json()["task_id"])


def _traffic(base: str) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as api:
        assert api.post("/v1/kb", json={"kb_id": KB, "name": "Insights E2E", "status": "approved"}).is_success
        _ingest(
            api,
            "memory.md",
            "# Agent memory\n\nAgent memory keeps 500 entries by default (max_items in memory.yaml).",
        )
        api.put(
            "/admin/policies/agent:insights-asker", json={"tools": ["ask"], "knowledge_bases": ["*"]}
        ).raise_for_status()
        token = api.post("/admin/agents/insights-asker/credentials", json={"kind": "token"}).json()["secret"]
    with (
        httpx.Client(base_url=base, timeout=60) as reader,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as agent,
    ):
        for i, question in enumerate(PORT * 2 + SSO):
            client, path = (agent, "/agent/tools/ask") if i % 3 == 0 else (reader, "/answer/ask")
            reply = client.post(path, json={"question": question})
            assert reply.status_code == 200 and reply.json()["noAnswerReason"], reply.text
        answered = reader.post("/answer/ask", json={"question": ANSWERED}).json()
        assert answered["noAnswerReason"] is None, answered
        marked = reader.post(
            "/agent/tools/create_feedback",
            json={
                "question": ANSWERED,
                "answerRequestId": answered["audit"]["requestId"],
                "comment": "too short",
            },
        )
        assert marked.status_code == 200, marked.text


def _scan(page: Any, name: str, found: dict[str, list[dict[str, Any]]]) -> None:
    page.wait_for_timeout(50)
    found[name] = _axe(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"console-{name}.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    found[f"{name} (dark)"] = _axe(page)
    page.screenshot(path=str(SCREENSHOTS / f"console-{name}-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")


def test_the_insights_view_ranks_gaps_opens_a_task_and_shows_a_fix(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    _traffic(stack["api"])
    violations: dict[str, list[dict[str, Any]]] = {}
    errors: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(stack["console"])
            page.get_by_label("Bearer token").fill(TOKEN)
            page.get_by_role("button", name="Sign in", exact=True).click()
            page.get_by_text("Signed in as service:rag-service").wait_for()
            page.get_by_role("link", name="Insights", exact=True).click()
            page.get_by_role("heading", name="Insights: what the documents do not answer").wait_for()
            # The summary: 11 questions (10 declined), the chart and its figures.
            expect(page.get_by_test_id("questions")).to_have_text("11")
            chart = page.locator("svg.chart")
            expect(chart).to_have_attribute("role", "img")
            assert chart.locator("rect.declined").count() >= 1
            # Gap groups ranked by count: the port question (8, English and Chinese) first.
            groups = page.locator("ol.records > li")
            expect(groups.first.get_by_test_id("count")).to_have_text("8")
            first = groups.first
            first.get_by_text("Questions asked").click()
            expect(first.get_by_text(PORT[2])).to_be_visible()
            assert groups.count() == 3  # port, sso, the answer marked not helpful
            _scan(page, "insights", violations)

            # One click opens the improvement task; a second counts on the same one.
            first.get_by_role("button", name="Open improvement task").click()
            page.get_by_role("status").filter(has_text="Opened improvement task").wait_for()
            first.get_by_role("button", name="Open improvement task").click()
            page.get_by_role("status").filter(has_text="2 reports").wait_for()

            # The documents change, the group is marked fixed: its questions are answered now.
            with httpx.Client(base_url=stack["api"], headers={"Authorization": f"Bearer {TOKEN}"}) as api:
                _ingest(
                    api,
                    "console.md",
                    "# Console\n\nThe kunora console listens on port 8443 by default.\n\n"
                    "kunora 控制台默认使用端口 8443。",
                )
            first.get_by_label("Fix note").fill("console page added")
            first.get_by_role("button", name="Mark fixed").click()
            page.get_by_role("status").filter(has_text="questions answered now").wait_for()
            expect(first.locator(".badge-answered")).to_have_text("answered")
            expect(first.get_by_text("console page added")).to_be_visible()
            _scan(page, "insights-fixed", violations)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(
                f"console at failure: {tmp_path / 'failure.png'}\n{page.locator('main').inner_text()[:3000]}"
            )
            raise
        context.close()
    assert errors == [], errors
    print("axe-core:", {screen: [v["id"] for v in found] for screen, found in violations.items()})
    assert violations and all(found == [] for found in violations.values()), json.dumps(violations, indent=1)
