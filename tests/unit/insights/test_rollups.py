"""The rollups' arithmetic: what one signal adds to its rows, how a window splits into whole days
(rollups) and partial edges (raw signals), and how deltas of one row add up."""

from __future__ import annotations

from citegate.insights.rollups import (
    GROUP_DAY,
    SUMMARY_DAY,
    as_row,
    combine,
    counters,
    deltas,
    from_row,
    question_key,
    read_row,
    rows_pk,
    stored_row,
)
from citegate.insights.service import Window, split_window

GAP = {
    "sk": "2026-11-28T05:00:00.000Z#r1",
    "at": "2026-11-28T05:00:00.000Z",
    "day": "2026-11-28",
    "question": "How do I rotate keys?",
    "kbs": ["kb1"],
    "projects": ["p"],
    "outcome": "declined",
    "reason": "no_evidence",
    "confidence": "low",
    "caller_kind": "human",
    "nearby_paths": ["ops/keys.md", "ops/index.md"],
    "gap": "declined",
    "feedback_record": "fb-1",
    "expires_at": 1_900_000_000,
}


def test_a_gap_adds_to_its_days_summary_and_to_its_groups_day() -> None:
    summary, group = deltas("t", GAP, "g1")
    assert summary.pk == rows_pk("t", SUMMARY_DAY) and group.pk == rows_pk("t", GROUP_DAY)
    assert summary.counts == {"questions": 1, "declined": 1, "r:no_evidence": 1}
    assert group.sk.startswith("2026-11-28#g1#") and group.sk.endswith("#human#declined")
    assert group.counts["n"] == 1 and group.counts["p:ops/keys.md"] == 1
    assert group.texts == {"t:" + question_key(GAP["question"]): GAP["question"]}
    assert group.records == {"fb-1"} and group.first == group.last == GAP["at"]
    # The scope a viewer is checked against, and an expiry a day after the signal's own.
    assert group.fixed["kbs"] == ["kb1"] and group.fixed["projects"] == ["p"] and "paths" not in group.fixed
    assert group.fixed["expires_at"] == GAP["expires_at"] + 86400
    # Near-duplicates count as one question.
    again = deltas("t", {**GAP, "question": "how do i rotate keys"}, "g1")[1]
    assert again.texts.keys() == group.texts.keys()


def test_answers_add_confidence_and_cited_pages_and_a_linked_answer_no_question() -> None:
    answered = {**GAP, "outcome": "answered", "confidence": "high", "cited_paths": ["a.md", "a.md"]}
    del answered["gap"], answered["reason"]
    summary, linked = deltas("t", answered, "g1")
    assert summary.counts == {"questions": 1, "answered": 1, "c:high": 1, "p:a.md": 1}
    assert linked.sk.endswith("#answered") and linked.counts == {"n": 1} and not linked.texts
    assert len(deltas("t", answered, None)) == 1  # in no group: the summary only
    feedback = {**GAP, "outcome": "feedback", "gap": "not_helpful"}
    assert deltas("t", feedback, None)[0].counts == {"notHelpful": 1}


def test_deltas_of_one_row_add_up() -> None:
    later = {
        **GAP,
        "sk": "2026-11-28T07:00:00.000Z#r2",
        "at": "2026-11-28T07:00:00.000Z",
        "feedback_record": None,
    }
    earlier = {**GAP, "sk": "2026-11-28T04:00:00.000Z#r3", "at": "2026-11-28T04:00:00.000Z", "reason": "weak"}
    rows = combine([d for s in (GAP, later, earlier) for d in deltas("t", s, "g1")])
    assert len(rows) == 2
    group = next(d for (pk, _), d in rows.items() if pk.endswith(GROUP_DAY))
    row = as_row(group)
    assert row["n"] == 3 and row["first"] == earlier["at"] and row["last"] == later["at"]
    assert counters(row, "r:") == {"no_evidence": 2, "weak": 1} and row["records"] == ["fb-1"]
    # Stored whole: identity and counts are two JSON attributes; read back, the same row.
    stored = stored_row(group, 3)
    assert stored["v"] == 3 and stored["pk"] == group.pk and stored["sk"] == group.sk
    assert {"first", "last", "expires_at", "id", "data"} <= set(stored)
    assert not any(k.startswith(("r:", "q:", "p:")) for k in stored)
    assert read_row(dict(stored)) == {**row, "v": 3}
    again = from_row(stored)
    assert (again.counts, again.texts, again.records) == (group.counts, group.texts, group.records)
    assert (again.first, again.last, again.fixed) == (group.first, group.last, group.fixed)
    # A row of the first rollups (counters as attributes) reads the same way.
    flat = {**row, "records": set(row["records"])}
    old = from_row(flat)
    assert old.counts == group.counts and old.texts == group.texts and old.fixed == group.fixed
    # Adding an earlier and a later signal moves first and last, whatever the order of counting.
    early = deltas("t", {**GAP, "sk": "2026-11-28T01:00:00.000Z#r4", "at": "2026-11-28T01:00:00.000Z"}, "g1")
    again.add(early[1])
    assert again.first == "2026-11-28T01:00:00.000Z" and again.last == later["at"]
    assert again.counts["n"] == 4


def test_a_window_is_whole_days_and_partial_edges() -> None:
    now = "2026-11-28T10:00:00.000Z"
    whole = Window("2026-11-01T00:00:00.000Z", "2026-11-27T23:59:59.999Z")
    assert split_window(whole, now) == ("2026-11-01", "2026-11-27", [])
    # Until now: today is whole (nothing is asked in the future).
    assert split_window(
        Window("2026-11-01T00:00:00.000Z", "2026-11-28T09:59:59.000Z"), "2026-11-28T09:00:00.000Z"
    )[:2] == ("2026-11-01", "2026-11-28")
    edges = Window("2026-11-01T12:00:00.000Z", "2026-11-05T06:00:00.000Z")
    assert split_window(edges, now) == (
        "2026-11-02",
        "2026-11-04",
        [
            ("2026-11-01T12:00:00.000Z", "2026-11-01T23:59:59.999Z"),
            ("2026-11-05T00:00:00.000Z", "2026-11-05T06:00:00.000Z"),
        ],
    )
    inside = Window("2026-11-03T01:00:00.000Z", "2026-11-03T02:00:00.000Z")
    assert split_window(inside, now) == (None, None, [(inside.since, inside.until)])
    two = Window("2026-11-03T01:00:00.000Z", "2026-11-04T02:00:00.000Z")
    assert split_window(two, now)[:2] == (None, None) and len(split_window(two, now)[2]) == 2
    # The default window is whole days, today included.
    default = Window.parse(None, None, 30)
    assert default.open_end
    # The view reads later than the window was parsed: today is still whole.
    first, last, raws = split_window(default, "9999")
    assert raws == [] and first is not None and last is not None
