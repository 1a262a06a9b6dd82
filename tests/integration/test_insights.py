"""Insights through the local gateway: question signals from real answer calls, gap groups, the
policy check (no `insights` -> 403 before any parameter or body is read; only granted knowledge
bases), the exports, a "fixed" mark that turns a group answered, and the improvement task's dedupe.

The session's embedder is the hashing test double, so the groups here are of near-duplicates
(case, punctuation, spacing); rephrasings in English and Chinese are grouped with the real
embedder in tests/unit/insights/test_grouping.py.
"""

from __future__ import annotations

import csv
import io
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.runtime.gateway import create_app
from tests.integration.conftest import ingest

GAPS = "/v1/insights/gaps"
SUMMARY = "/v1/insights/summary"
LOGO = "What is the colour of the kunora logo?"
LOGO_AGAIN = ("what is the colour of the kunora logo", "WHAT IS THE COLOUR OF THE KUNORA LOGO?!")
MOONS = "How many moons does the planet Mars have?"
MEMORY = (
    "Agent memory is configured in memory.yaml with the max_items setting, which defaults to 500 entries."
)


def _principal(client: TestClient, policy: dict[str, Any]) -> TestClient:
    agent_id = "ins-" + uuid.uuid4().hex[:8]
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    return TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module")
def setup(client: TestClient) -> dict[str, Any]:
    kb = "kb-ins-" + uuid.uuid4().hex[:8]
    other = "kb-ins-" + uuid.uuid4().hex[:8]
    for kb_id in (kb, other):
        made = client.post("/v1/kb", json={"kb_id": kb_id, "name": kb_id, "status": "approved"})
        assert made.status_code == 201, made.text
    ingest(client, kb, text=f"# Memory\n\n{MEMORY}", source_name="memory.md")
    asker = _principal(
        client,
        {"tools": ["ask", "create_feedback"], "knowledge_bases": [kb], "write_actions": ["feedback"]},
    )
    viewer = _principal(
        client,
        {
            "tools": ["insights"],
            "knowledge_bases": [kb],
            "write_actions": ["insights", "improvement_task"],
        },
    )
    stranger = _principal(client, {"tools": ["insights"], "knowledge_bases": [other]})
    outsider = _principal(client, {"tools": ["ask"], "knowledge_bases": [kb]})
    asked = []
    for question in (LOGO, *LOGO_AGAIN, MOONS, "Which setting configures agent memory?"):
        reply = asker.post("/agent/tools/ask", json={"question": question})
        assert reply.status_code == 200, reply.text
        asked.append(reply.json())
    return {
        "kb": kb,
        "other": other,
        "client": client,
        "asker": asker,
        "viewer": viewer,
        "stranger": stranger,
        "outsider": outsider,
        "asked": asked,
    }


def _group(view: dict[str, Any], question: str) -> dict[str, Any]:
    found = [g for g in view["groups"] if any(q["question"] == question for q in g["questions"])]
    assert len(found) == 1, view
    return found[0]


def test_near_duplicates_make_one_group_ranked_by_count(setup: dict[str, Any]) -> None:
    assert [a["noAnswerReason"] is not None for a in setup["asked"][:4]] == [True] * 4
    view = setup["viewer"].get(GAPS).json()
    logo = _group(view, LOGO)
    assert logo["count"] == 3 and logo["distinctQuestions"] == 1
    assert logo["representative"] == LOGO
    assert logo["callers"] == {"agent": 3} and logo["kinds"] == {"declined": 3}
    assert logo["knowledgeBases"] == [setup["kb"]]
    moons = _group(view, MOONS)
    assert moons["groupId"] != logo["groupId"] and moons["count"] == 1
    assert view["groups"][0]["groupId"] == logo["groupId"]  # ranked by count
    assert view["refresh"]["skipped"] is False
    # A second view folds nothing new: the groups are kept, not recomputed.
    again = setup["viewer"].get(GAPS).json()
    assert again["refresh"]["seen"] == 0 and _group(again, LOGO)["groupId"] == logo["groupId"]


def test_without_the_insights_tool_it_is_403_before_anything_is_read(setup: dict[str, Any]) -> None:
    outsider: TestClient = setup["outsider"]
    for response in (
        outsider.get(GAPS, params={"since": "not a date", "format": "pdf"}),
        outsider.get(SUMMARY, params={"kind": "nonsense"}),
        outsider.post(f"{GAPS}/nope/fix", content=b"{not json"),
        outsider.post(f"{GAPS}/nope/improvement_task", content=b"[]"),
    ):
        assert response.status_code == 403, response.text
        # The /v1 family's code for spec 000's forbidden_tool (spec 004).
        assert response.json()["error"] == "forbidden" and "insights" in response.json()["message"]
    with TestClient(create_app()) as anonymous:
        assert anonymous.get(GAPS).status_code == 401


def test_a_caller_sees_only_the_signals_of_granted_knowledge_bases(setup: dict[str, Any]) -> None:
    stranger: TestClient = setup["stranger"]
    assert stranger.get(GAPS).json()["groups"] == []
    assert stranger.get(SUMMARY).json()["questions"] == 0
    denied = stranger.get(GAPS, params={"kb": setup["kb"]})
    assert denied.status_code == 403 and denied.json()["details"]["reason"] == "dataset_not_allowed"
    group = _group(setup["viewer"].get(GAPS).json(), LOGO)["groupId"]
    assert stranger.post(f"{GAPS}/{group}/fix", json={}).status_code == 403  # no write action
    # The service token (every knowledge base) sees them; the kb filter narrows.
    client: TestClient = setup["client"]
    assert _group(client.get(GAPS, params={"kb": setup["kb"]}).json(), LOGO)["count"] == 3


def test_bad_parameters_are_400(setup: dict[str, Any]) -> None:
    viewer: TestClient = setup["viewer"]
    for params in (
        {"since": "yesterday"},
        {"since": "2026-12-02", "until": "2026-12-01"},
        {"kind": "angry"},
        {"caller": "robot"},
        {"format": "pdf"},
        {"limit": "0"},
    ):
        response = viewer.get(GAPS, params=params)
        assert response.status_code == 400, (params, response.text)
        assert response.json()["error"] == "invalid_request"
    assert viewer.get(SUMMARY, params={"kind": "declined"}).status_code == 400


def test_the_exports(setup: dict[str, Any]) -> None:
    viewer: TestClient = setup["viewer"]
    exported = viewer.get(GAPS, params={"format": "csv"})
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert "attachment" in exported.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    logo = [r for r in rows if r["representative"] == LOGO]
    assert len(logo) == 1 and logo[0]["count"] == "3" and logo[0]["agent"] == "3"
    markdown = viewer.get(GAPS, headers={"Accept": "text/markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.text.startswith("# Documentation gaps") and f"| {LOGO} | 3 |" in markdown.text
    summary = viewer.get(SUMMARY, params={"format": "md"}).text
    assert "# Questions and answers" in summary and "## Per day" in summary
    per_day = list(csv.reader(io.StringIO(viewer.get(SUMMARY, params={"format": "csv"}).text)))
    assert per_day[0] == ["day", "questions", "answered", "declined", "low_confidence", "not_helpful"]
    assert len(per_day) >= 2


def test_the_summary_counts_questions_and_outcomes(setup: dict[str, Any]) -> None:
    summary = setup["viewer"].get(SUMMARY).json()
    assert (summary["questions"], summary["answered"], summary["declined"]) == (5, 1, 4)
    assert summary["callers"] == {"agent": 5} and summary["answerRate"] == 0.2
    assert sum(summary["declinedByReason"].values()) == 4
    assert summary["topCitedPages"] == [{"path": "memory.md", "count": 1}]
    assert summary["perDay"][-1]["questions"] == 5


def test_not_helpful_feedback_joins_the_group(setup: dict[str, Any]) -> None:
    asker: TestClient = setup["asker"]
    request_id = setup["asked"][0]["audit"]["requestId"]
    reply = asker.post("/agent/tools/create_feedback", json={"question": LOGO, "answerRequestId": request_id})
    assert reply.status_code == 200, reply.text
    logo = _group(setup["viewer"].get(GAPS).json(), LOGO)
    assert logo["kinds"].get("not_helpful") == 1 and logo["count"] == 4
    assert reply.json()["record"]["recordId"] in logo["feedbackRecords"]
    only = setup["viewer"].get(GAPS, params={"kind": "not_helpful"}).json()
    assert [g["count"] for g in only["groups"]] == [1]


def test_an_improvement_task_for_a_group_is_deduplicated(setup: dict[str, Any]) -> None:
    viewer: TestClient = setup["viewer"]
    group = _group(viewer.get(GAPS).json(), MOONS)["groupId"]
    first = viewer.post(f"{GAPS}/{group}/improvement_task", json={})
    assert first.status_code == 200, first.text
    second = viewer.post(f"{GAPS}/{group}/improvement_task")
    assert first.json()["created"] is True and second.json()["created"] is False
    record = first.json()["record"]["recordId"]
    assert second.json()["duplicateOf"] == record and second.json()["record"]["count"] == 2
    assert _group(viewer.get(GAPS).json(), MOONS)["improvementTask"] == record
    assert viewer.post(f"{GAPS}/g-unknown/improvement_task").status_code == 404


def test_a_fix_turns_the_group_answered(setup: dict[str, Any]) -> None:
    viewer: TestClient = setup["viewer"]
    group = _group(viewer.get(GAPS).json(), LOGO)["groupId"]
    before = viewer.post(f"{GAPS}/{group}/fix", json={"note": "nothing changed yet"}).json()
    assert before["recheck"]["asked"] >= 1 and before["recheck"]["answered"] == 0
    assert _group(viewer.get(GAPS).json(), LOGO)["fix"]["verdict"] == "unanswered"
    # The documents change: the page that answers it is added.
    ingest(
        setup["client"],
        setup["kb"],
        text="# Brand\n\nThe colour of the kunora logo is teal, on a white background.",
        source_name="brand.md",
    )
    fixed = viewer.post(f"{GAPS}/{group}/fix", json={"note": "brand page added"})
    assert fixed.status_code == 200, fixed.text
    assert fixed.json()["recheck"]["answered"] == fixed.json()["recheck"]["asked"] >= 1
    # Readers ask again: answered now, and tracked against the mark.
    again = setup["asker"].post("/agent/tools/ask", json={"question": LOGO_AGAIN[0]}).json()
    assert again["noAnswerReason"] is None and "teal" in again["answer"]
    view = _group(viewer.get(GAPS).json(), LOGO)
    assert view["fix"]["note"] == "brand page added"
    assert view["fix"]["afterFix"] == {"answered": 1, "gaps": 0}
    assert view["fix"]["verdict"] == "answered"
    unmarked = viewer.post(f"{GAPS}/{group}/fix", json={"fixed": False})
    assert unmarked.json()["fixed"] is False and _group(viewer.get(GAPS).json(), LOGO)["fix"] is None


def test_a_view_during_another_refresh_shows_the_questions_not_yet_grouped(
    setup: dict[str, Any], stack: Any
) -> None:
    store, tenant = stack.services.insights, stack.settings.default_tenant
    viewer: TestClient = setup["viewer"]
    viewer.get(GAPS)  # everything so far folded in
    assert store.take_lease(tenant, "another-view", 60)  # another view is folding
    try:
        question = "Where is the kunora changelog published?"
        assert setup["asker"].post("/agent/tools/ask", json={"question": question}).status_code == 200
        held = viewer.get(GAPS).json()
        assert held["refresh"]["skipped"] is True and held["ungrouped"] == 1
        assert not [g for g in held["groups"] if g["representative"] == question]
    finally:
        store.release(tenant, "another-view", None)
    folded = viewer.get(GAPS).json()
    assert folded["refresh"]["seen"] >= 1 and folded["ungrouped"] == 0
    assert _group(folded, question)["count"] == 1


def test_a_like_question_of_another_knowledge_base_is_that_knowledge_bases_gap(setup: dict[str, Any]) -> None:
    """Groups are per knowledge base: the same question declined on a base the viewer cannot read
    neither joins the viewer's group nor keeps the viewer from acting on it."""
    elsewhere = _principal(setup["client"], {"tools": ["ask"], "knowledge_bases": [setup["other"]]})
    assert elsewhere.post("/agent/tools/ask", json={"question": LOGO}).status_code == 200
    viewer: TestClient = setup["viewer"]
    logo = _group(viewer.get(GAPS).json(), LOGO)
    assert logo["knowledgeBases"] == [setup["kb"]]
    assert viewer.post(f"{GAPS}/{logo['groupId']}/improvement_task").status_code == 200
