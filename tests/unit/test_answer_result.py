"""AnswerResult's grounding and confidence, on examples where confidence must be high and low."""

from __future__ import annotations

from typing import Any

from citegate.answer_api import confidence_of, ground, split_sentences
from citegate.answering.ask import AskOutcome
from citegate.answering.base import Draft
from citegate.retrieval import Retrieval
from citegate.search.base import ChunkRecord, Hit


def _outcome(
    *, refs: list[str], support: float | None, scores: list[float], no_answer: bool = False
) -> AskOutcome:
    hits = [
        Hit(
            ChunkRecord(
                ref_id=f"r_{i}",
                kb_id="k",
                tenant_id="t",
                document_id="d",
                parent_id="p",
                source_name="s",
                text="x",
            ),
            score,
        )
        for i, score in enumerate(scores)
    ]
    draft = Draft("a", tuple(refs), support_score=support)
    return AskOutcome("a", refs, [], no_answer, None, None, Retrieval(hits, {}), [], None, draft, {})


def test_sentences_keep_their_markers_in_english_and_chinese() -> None:
    assert split_sentences(
        "It is 22 km high. [1] It is a shield volcano. [1][2] 长城很长。[2]它在中国。"
    ) == ["It is 22 km high. [1]", "It is a shield volcano. [1][2]", "长城很长。[2]", "它在中国。"]


def test_an_unsupported_sentence_is_removed_and_reported() -> None:
    answer, grounding, removed = ground("Olympus Mons is 22 km high. [1] It is made of cheese.", 1)
    assert answer == "Olympus Mons is 22 km high. [1]" and removed == 1
    assert [g.supported for g in grounding] == [True, False] and grounding[0].citations == [1]


def test_a_marker_beyond_the_citations_supports_nothing() -> None:
    _, grounding, removed = ground("A claim. [3]", 1)
    assert removed == 1 and grounding[0].citations == []


def test_confidence_is_high_for_strong_agreeing_fully_grounded_evidence() -> None:
    _, grounding, removed = ground("A. [1] B. [2]", 2)
    level, score = confidence_of(
        _outcome(refs=["r_0", "r_1"], support=0.95, scores=[0.9, 0.8]), grounding, removed
    )
    assert level == "high" and score >= 0.75


def test_confidence_is_low_for_weak_support_from_one_passage() -> None:
    _, grounding, removed = ground("A. [1] B.", 1)
    level, _ = confidence_of(_outcome(refs=["r_0"], support=0.1, scores=[0.2]), grounding, removed)
    assert level == "low"


def test_a_dropped_sentence_caps_confidence_below_high() -> None:
    _, grounding, removed = ground("A. [1] B. [2] C.", 2)
    level, _ = confidence_of(
        _outcome(refs=["r_0", "r_1"], support=1.0, scores=[1.0, 1.0]), grounding, removed
    )
    assert level == "medium"


def test_no_answer_is_always_low() -> None:
    level, score = confidence_of(_outcome(refs=[], support=0.99, scores=[1.0], no_answer=True), [], 0)
    assert (level, score) == ("low", 0.0)


def test_without_an_answerer_score_the_top_retrieval_score_stands_in() -> None:
    _, grounding, removed = ground("A. [1] B. [2]", 2)
    high: Any = confidence_of(_outcome(refs=["r_0", "r_1"], support=None, scores=[0.95]), grounding, removed)
    low: Any = confidence_of(_outcome(refs=["r_0"], support=None, scores=[0.05]), grounding[:1], 0)
    assert high[0] == "high" and low[0] in ("low", "medium") and low[1] < high[1]
