"""The page widget (ui/widget) on the example documentation site of `citegate serve`, in Debian's
Chromium, by keyboard only.

A reader on the Solar System page presses Ctrl+K, asks how high Olympus Mons is and gets a cited
answer whose links jump back to the section (`url#anchor`); follows up in the same answer session;
asks something the pages do not answer, sees why, and reports the gap: pressing Enter twice sends
one create_feedback, which the maintainers' queue counts once. Esc closes the dialog and focus goes
back where it was. The Chinese page speaks Chinese. No request leaves for anywhere but citegate,
an answer's Markdown cannot inject HTML, and axe-core finds nothing serious or critical, light
or dark. Screenshots: widget-*.png (docs/screenshots with make screenshots).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from citegate.runtime import example_site
from tests.e2e.browser.widget_support import ask as ask_in
from tests.e2e.browser.widget_support import (
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
from tests.e2e.conftest import TOKEN, Server

pytestmark = pytest.mark.e2e

KB = "example-docs"
PAGE_SCOPE = {
    "projects": [example_site.PROJECT],
    "paths": [example_site.SECTION],
    "version": example_site.VERSION,
    "includeWorkingDocs": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_chromium()
    build_widget()
    running = Server(tmp_path_factory.mktemp("widget") / "data").start()
    try:
        with running.client() as client:
            pages = example_site.example_pages()
            ingest(client, KB, [(p.source, example_site.ingest_metadata(p)) for p in pages])
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def _admin(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def test_a_reader_asks_follows_up_and_reports_a_gap_by_keyboard(server: Server, browser: Any) -> None:
    page = browser.new_page(color_scheme="light", viewport={"width": 1100, "height": 860})
    traffic = record(page)
    page.goto(f"{server.url}/example/solar-system/")
    page.locator("#citegate-widget").get_by_role("button", name="Ask the docs").wait_for()

    # From the first link of the page, Ctrl+K: the dialog opens and the question field has focus.
    first = tab_to(page, lambda f: not f["inWidget"] and f["tag"] == "A")
    page.keyboard.press("Control+k")
    dialog = page.get_by_role("dialog", name="Ask the documentation")
    dialog.wait_for()
    assert focused(page)["name"] == "question"

    answer = ask_in(page, "How high is Olympus Mons?", 1)
    assert "22 kilometres" in answer.locator(".md").inner_text()
    assert "confidence" in answer.locator(".confidence").inner_text().lower()
    sources = answer.locator("ol.sources a")
    assert sources.count() >= 1
    href = sources.first.get_attribute("href")
    assert href == f"{server.url}/example/solar-system/#mars", href
    assert "example/solar-system" in answer.locator("ol.sources .meta").first.inner_text()
    assert "version main" in answer.locator("ol.sources .meta").first.inner_text()
    marker = answer.locator(".md a.cite").first
    assert marker.get_attribute("href") == href
    assert marker.get_attribute("aria-label") == "Source 1: The Solar System"
    # The page's scope went with the question: its project, its section, its version, published only.
    [created] = traffic.calls("/answer/sessions")
    assert created.body == {"question": "How high is Olympus Mons?", "scope": PAGE_SCOPE}
    assert "authorization" not in created.headers  # an anonymous reader: public-read

    # A follow-up is a turn of the same session, with its token, read in context.
    follow = ask_in(page, "Does it have moons?", 2)
    [turn] = [s for s in traffic.calls("/turns")]
    session_id = turn.url.split("/answer/sessions/")[1].split("/")[0]
    assert session_id.startswith("s_") and turn.headers.get("x-session-token")
    assert turn.body == {"question": "Does it have moons?"}
    said = follow.locator(".md").inner_text()
    assert "Phobos" in said  # "it": Mars, from the first turn
    assert "All four" not in said  # not the giant planets' moons: they are not what "it" is
    screenshot(page, "widget-answer")

    # Something the pages do not answer: the reason, and a report the reader sends by keyboard.
    with page.expect_response(lambda r: r.url.endswith("/turns")) as replied:
        gap = ask_in(page, "What is the boiling point of tungsten?", 3)
    reason = replied.value.json()["noAnswerReason"]["reason"]
    assert len(traffic.calls("/turns")) == 2 and len(traffic.calls("/answer/sessions")) == 3
    assert gap.locator(".noanswer h3").first.inner_text() == "No answer in the documentation"
    assert gap.locator(".noanswer p").first.inner_text() == reason  # the server's reason, as it gave it
    reached = tab_to(page, lambda f: f["text"] == "Report this gap to the maintainers")
    assert reached["inDialog"]
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # a double press: still one report
    gap.get_by_text("Reported. The maintainers will see it").wait_for()
    reports = traffic.calls("/agent/tools/create_feedback")
    assert len(reports) == 1, [r.body for r in reports]
    report = reports[0].body
    assert (
        report["eventType"] == "qa_no_answer"
        and report["question"] == "What is the boiling point of tungsten?"
    )
    with _admin(server) as admin:
        records = admin.get("/admin/feedback", params={"status": "open"}).json()["records"]
    [record_] = [r for r in records if r["dedupeKey"] == report["dedupeKey"]]
    assert record_["count"] == 1 and record_["callers"] == {"anonymous": 1}
    screenshot(page, "widget-no-answer")

    # Focus stays in the dialog (Tab and Shift+Tab wrap); Esc closes it and focus goes back.
    for key in ["Tab"] * 25 + ["Shift+Tab"] * 25:
        page.keyboard.press(key)
        assert focused(page)["inDialog"], focused(page)
    assert axe(page) == []
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    assert focused(page) == {"inWidget": False, "tag": "A", "text": first["text"]}

    # Every request went to citegate (the page and the API share its origin here).
    assert all(url.startswith(server.url + "/") for url in traffic.urls), traffic.urls
    page.close()


def test_helpful_and_not_helpful_are_sent_once_each_answer(server: Server, browser: Any) -> None:
    page = browser.new_page(color_scheme="dark")
    traffic = record(page)
    page.goto(f"{server.url}/example/solar-system/")
    page.locator("#citegate-widget").get_by_role("button", name="Ask the docs").wait_for()
    page.keyboard.press("Control+k")
    answer = ask_in(page, "Which planet has the largest volcano?", 1)
    not_helpful = answer.get_by_role("button", name="Not helpful")
    not_helpful.dblclick()
    answer.get_by_text("Thank you for your feedback.").wait_for()
    assert not_helpful.get_attribute("aria-pressed") == "true"
    [sent] = traffic.calls("/agent/tools/create_feedback")
    # "Not helpful" is the answer's own feedback action, keyed as the server keyed it.
    assert sent.body["eventType"] == "qa_feedback" and sent.body["comment"] == "not helpful"
    assert sent.body["scope"] == PAGE_SCOPE and sent.body["citations"][0]["path"] == "example/solar-system"
    with _admin(server) as admin:
        records = admin.get("/admin/feedback", params={"status": "open"}).json()["records"]
    [record_] = [r for r in records if r["dedupeKey"] == sent.body["dedupeKey"]]
    assert record_["count"] == 1
    # The answer's helpful buttons have done their work: pressing again sends nothing.
    answer.get_by_role("button", name="Helpful", exact=True).focus()
    page.keyboard.press("Enter")
    assert len(traffic.calls("/agent/tools/create_feedback")) == 1
    assert axe(page) == []
    screenshot(page, "widget-dark")
    page.close()


def test_the_chinese_page_asks_in_chinese(server: Server, browser: Any) -> None:
    page = browser.new_page(color_scheme="light", locale="en-US")
    page.goto(f"{server.url}/example/{quote('长城')}/")
    launcher = page.locator("#citegate-widget").get_by_role("button", name="向文档提问")
    launcher.focus()
    page.keyboard.press("Enter")
    page.get_by_role("dialog", name="向文档提问").wait_for()
    answer = ask_in(page, "长城有多长？", 1)
    assert "长城" in answer.locator(".md").inner_text()
    assert answer.locator("h3.sub").first.inner_text() == "引用来源"
    href = answer.locator("ol.sources a").first.get_attribute("href") or ""
    assert href.startswith(f"{server.url}/example/%E9%95%BF%E5%9F%8E/#"), href
    assert axe(page) == []
    screenshot(page, "widget-zh")
    page.keyboard.press("Escape")
    assert focused(page)["text"].startswith("向文档提问")
    page.close()


def test_an_answer_is_rendered_as_markdown_and_never_as_html(server: Server, browser: Any) -> None:
    """The Answer API's text is the documents' text: whatever markup it holds must stay text. The
    reply is shaped here (a route in the browser) because no sample document says such things."""
    page = browser.new_page()
    traffic = record(page)
    hostile = (
        "Use **bold** and `code`, keep kb_id and doc_id. "
        '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
        "```bash\necho '<b>not bold</b>'\n```\n\n- [a link](javascript:window.pwned=3) [1]\n"
    )
    result = {
        "answer": hostile,
        "summary": "",
        "citations": [
            {
                "path": "example/x",
                "url": "javascript:window.pwned=4",
                "title": "<i>t</i>",
                "anchor": "a",
                "chunkId": "r_1",
                "version": "main",
            }
        ],
        "confidence": "high",
        "noAnswerReason": None,
        "relatedPages": [],
        "actions": [],
        "audit": {"requestId": "r", "caller": "anonymous", "scope": "*"},
    }
    session = {"sessionId": "s_x", "sessionToken": "t", "turns": [result]}
    page.route(
        f"{server.url}/answer/sessions",
        lambda route: route.fulfill(status=201, content_type="application/json", body=json.dumps(session)),
    )
    page.goto(f"{server.url}/example/")
    page.locator("#citegate-widget").get_by_role("button", name="Ask the docs").wait_for()
    page.keyboard.press("Control+k")
    turn = ask_in(page, "anything", 1)
    md = turn.locator(".md")
    assert md.locator("strong").inner_text() == "bold" and md.locator("p code").inner_text() == "code"
    assert md.locator("pre code").inner_text() == "echo '<b>not bold</b>'"
    assert md.locator("img, script, b, i, em").count() == 0  # and snake_case is no emphasis
    assert "kb_id and doc_id" in md.inner_text()
    assert "<img src=x" in md.inner_text()
    assert (
        md.locator("a[href^='javascript']").count() == 0
        and turn.locator("a[href^='javascript']").count() == 0
    )
    assert turn.locator("ol.sources li").inner_text().startswith("<i>t</i>")
    assert page.evaluate("() => window.pwned") is None
    assert len(traffic.calls("/answer/sessions")) == 1
    page.close()


def test_refusals_and_lost_connections_are_said_plainly(server: Server, browser: Any) -> None:
    """What the reader reads when citegate says no (429 with Retry-After) or cannot be reached."""
    page = browser.new_page()
    replies = iter(
        [
            lambda route: route.fulfill(
                status=429,
                headers={"retry-after": "7", "content-type": "application/json"},
                body=json.dumps(
                    {"error": "rate_limited", "message": "slow down", "requestId": "r", "details": {}}
                ),
            ),
            lambda route: route.abort("connectionrefused"),
        ]
    )
    page.route(f"{server.url}/answer/sessions", lambda route: next(replies)(route))
    page.goto(f"{server.url}/example/")
    page.locator("#citegate-widget").get_by_role("button", name="Ask the docs").wait_for()
    page.keyboard.press("Control+k")
    limited = ask_in(page, "How high is Olympus Mons?", 1)
    assert limited.get_by_role("alert").inner_text() == "Too many questions right now. Try again in 7 s."
    lost = ask_in(page, "How high is Olympus Mons?", 2)
    assert "could not be reached" in lost.get_by_role("alert").inner_text()
    page.close()
