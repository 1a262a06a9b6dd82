"""Signals derived from audit records, who sees them, the window, and the exports."""

from __future__ import annotations

import csv
import io

import pytest

from citegate.governance.audit import AuditRecord
from citegate.governance.policy.model import Policy
from citegate.governance.signals import gap_kind, signal_item
from citegate.insights.export import gaps_text, negotiate, summary_text
from citegate.insights.service import Filters, Window, visible
from citegate.platform.errors import InvalidRequest


def _record(**fields: object) -> AuditRecord:
    base: dict[str, object] = {
        "request_id": "r1",
        "timestamp": "2026-11-28T05:00:00.000Z",
        "tenant_id": "default",
        "caller_type": "anonymous",
        "caller_id": "203.0.113.9",
        "route": "POST /answer/ask",
        "source_ip": "203.0.113.9",
        "user_id": "u-1",
        "status": 200,
        "knowledge_bases": ["kb1"],
        "query": "How do I rotate keys?",
        "effective_scope": {"projects": ["p"], "versions": ["main"]},
        "outcome": "declined",
        "no_answer_code": "no_evidence",
        "confidence": "low",
        "nearby_paths": ["ops/keys.md"],
    }
    base.update(fields)
    return AuditRecord.model_validate(base)


def test_a_signal_holds_the_outcome_and_no_caller_identity() -> None:
    item = signal_item(_record(), 1_900_000_000)
    assert item is not None
    assert item["pk"] == "default#signal" and item["sk"] == "2026-11-28T05:00:00.000Z#r1"
    assert (item["outcome"], item["reason"], item["gap"], item["caller_kind"]) == (
        "declined",
        "no_evidence",
        "declined",
        "human",
    )
    assert item["projects"] == ["p"] and item["expires_at"] == 1_900_000_000
    # The caller is kept by kind only: no id, address or user id.
    text = repr(item)
    assert "203.0.113.9" not in text and "u-1" not in text


def test_which_calls_are_signals_and_which_are_gaps() -> None:
    assert signal_item(_record(outcome=None), 1) is None  # not a question's outcome
    assert signal_item(_record(status=503), 1) is None  # failed: no outcome to keep
    assert signal_item(_record(query=None), 1) is None
    assert gap_kind("answered", "low") == "low_confidence"
    assert gap_kind("answered", "medium") is None
    assert gap_kind("feedback", None) == "not_helpful"
    assert gap_kind("improvement_task", None) == "not_helpful"
    answered = signal_item(_record(outcome="answered", confidence="high", caller_type="agent"), 1)
    assert answered is not None and "gap" not in answered and answered["caller_kind"] == "agent"


def _policy(**fields: object) -> Policy:
    return Policy.model_validate({"principal_key": "agent:v", "tenant_id": "default", **fields})


def test_a_viewer_sees_signals_of_granted_knowledge_bases_inside_its_scope() -> None:
    signal = {"kbs": ["kb1", "kb2"], "projects": ["p"], "versions": ["main"], "paths": ["docs/a/"]}
    assert visible(signal, _policy(knowledge_bases=["*"]))
    assert visible(signal, _policy(knowledge_bases=["kb1", "kb2"]))
    assert not visible(signal, _policy(knowledge_bases=["kb1"]))  # every kb it names
    assert not visible({"kbs": []}, _policy(knowledge_bases=["kb1"]))
    assert visible({"kbs": []}, _policy(knowledge_bases=["*"]))
    assert visible(signal, _policy(knowledge_bases=["*"], scope={"projects": ["p", "q"]}))
    assert not visible(signal, _policy(knowledge_bases=["*"], scope={"projects": ["q"]}))
    assert not visible({"kbs": ["kb1"]}, _policy(knowledge_bases=["*"], scope={"versions": ["main"]}))
    assert visible(signal, _policy(knowledge_bases=["*"], scope={"path_prefixes": ["docs"]}))
    assert not visible(signal, _policy(knowledge_bases=["*"], scope={"path_prefixes": ["docs/b"]}))


def test_filters_and_window_refuse_what_they_cannot_mean() -> None:
    policy = _policy(knowledge_bases=["kb1"])
    for bad in (Filters(kind="angry"), Filters(caller="robot")):
        with pytest.raises(InvalidRequest):
            bad.validate(policy)
    with pytest.raises(Exception, match="not granted"):
        Filters(kb="kb2").validate(policy)
    window = Window.parse("2026-11-01", "2026-11-28", 30)
    assert window.since == "2026-11-01T00:00:00.000Z" and window.until == "2026-11-28T23:59:59.999Z"
    with pytest.raises(InvalidRequest):
        Window.parse("2026-11-29", "2026-11-28", 30)
    with pytest.raises(InvalidRequest):
        Window.parse("last week", None, 30)


def test_format_negotiation() -> None:
    assert negotiate(None, None) == "json"
    assert negotiate("csv", "text/markdown") == "csv"  # the parameter wins
    assert negotiate(None, "text/markdown, */*") == "md"
    assert negotiate("markdown", None) == "md"
    with pytest.raises(InvalidRequest):
        negotiate("pdf", None)


VIEW = {
    "window": {"since": "2026-11-01T00:00:00.000Z", "until": "2026-11-28T00:00:00.000Z"},
    "totalGroups": 1,
    "gapQuestions": 3,
    "groups": [
        {
            "groupId": "g1",
            "representative": '=HYPERLINK("x") | what?',
            "count": 3,
            "distinctQuestions": 2,
            "firstSeen": "2026-11-02T00:00:00.000Z",
            "lastSeen": "2026-11-03T00:00:00.000Z",
            "callers": {"human": 2, "agent": 1},
            "kinds": {"declined": 3},
            "pages": [{"path": "a.md", "count": 2}],
            "questions": [
                {"question": '=HYPERLINK("x") | what?', "count": 2},
                {"question": "hm", "count": 1},
            ],
            "improvementTask": None,
            "fix": {"fixedAt": "2026-11-04T00:00:00.000Z", "verdict": "answered"},
        }
    ],
}


def test_the_gap_exports_are_safe_in_spreadsheets_and_tables() -> None:
    rows = list(csv.DictReader(io.StringIO(gaps_text(VIEW, "csv"))))
    assert len(rows) == 1 and rows[0]["representative"].startswith("'=")  # not a formula
    assert rows[0]["human"] == "2" and rows[0]["verdict"] == "answered"
    markdown = gaps_text(VIEW, "md")
    assert "\\| what?" in markdown and markdown.count("\n| 1 |") == 1


def test_the_summary_exports() -> None:
    view = {
        "window": VIEW["window"],
        "questions": 4,
        "answerRate": 0.5,
        "declineRate": 0.5,
        "notHelpful": 1,
        "confidence": {"high": 1, "medium": 1, "low": 0},
        "declinedByReason": {"no_evidence": 2},
        "declineRateByReason": {"no_evidence": 0.5},
        "topCitedPages": [{"path": "a.md", "count": 2}],
        "perDay": [
            {
                "day": "2026-11-02",
                "questions": 4,
                "answered": 2,
                "declined": 2,
                "lowConfidence": 0,
                "notHelpful": 1,
            }
        ],
    }
    assert summary_text(view, "csv").splitlines()[1] == "2026-11-02,4,2,2,0,1"
    markdown = summary_text(view, "md")
    assert "answer rate 50.0%" in markdown and "| no_evidence | 2 | 50.0% |" in markdown
