"""AnswerResult's grounding and confidence, on examples where confidence must be high and low."""

from __future__ import annotations

from citegate.answers.answer_api import confidence_of, ground, split_sentences
from citegate.answers.ask import AskOutcome
from citegate.answers.base import Draft
from citegate.answers.confidence import Confidence, assess
from citegate.answers.validate import Bound
from citegate.knowledge.retrieval import Retrieval
from citegate.knowledge.search.base import ChunkRecord, Hit


def _outcome(
    *,
    refs: list[str],
    support: float | None,
    scores: list[float],
    no_answer: bool = False,
    recall: float = 1.0,
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
    draft = Draft("a", tuple(refs), support_score=support, diagnostics={"best": {"recall": recall}})
    confidence = assess(draft, Bound("a. [1]", refs), hits, None)
    return AskOutcome(
        "a", refs, [], no_answer, None, None, Retrieval(hits, {}), [], None, draft, {}, confidence
    )


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


def test_confidence_is_the_ask_paths_and_a_removed_sentence_caps_it_at_medium() -> None:
    outcome = _outcome(refs=["r_0"], support=0.99, scores=[0.9], recall=1.0)
    assert confidence_of(outcome, 0) == ("medium", 0.99)
    outcome.confidence = Confidence("high", 0.99)
    assert confidence_of(outcome, 0) == ("high", 0.99)
    assert confidence_of(outcome, 1) == ("medium", 0.99)


def test_an_extractive_answer_whose_quote_misses_question_terms_is_low() -> None:
    assert confidence_of(_outcome(refs=["r_0"], support=0.99, scores=[1.0], recall=0.6), 0)[0] == "low"


def test_weak_support_is_low_confidence() -> None:
    assert confidence_of(_outcome(refs=["r_0"], support=0.05, scores=[1.0]), 0)[0] == "low"


def test_no_answer_is_always_low() -> None:
    level, score = confidence_of(_outcome(refs=[], support=0.99, scores=[1.0], no_answer=True), 0)
    assert (level, score) == ("low", 0.0)


def test_a_high_retrieval_score_alone_never_makes_confidence_high() -> None:
    # A model's answer has no support score: a top retrieval score of 1.0 once stood in for it.
    level, _ = confidence_of(_outcome(refs=["r_0", "r_1"], support=None, scores=[1.0, 1.0]), 0)
    assert level == "low"
