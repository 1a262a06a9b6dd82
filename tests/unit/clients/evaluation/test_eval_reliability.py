"""The reliability table of `make eval`: what each confidence level is worth, on hand-made cases."""

from __future__ import annotations

import math

from citegate.clients.evaluation.metrics import AnswerCase, reliability


def case(
    level: str | None,
    *,
    gold: str = "g",
    cited: str = "",
    text: str = "",
    impossible: bool = False,
    declined: bool = False,
) -> AnswerCase:
    return AnswerCase(
        answers=() if impossible else ("Paris",),
        impossible=impossible,
        gold=frozenset() if impossible else frozenset({gold}),
        declined=declined,
        cited_docs=frozenset({cited}) if cited else frozenset(),
        cited_texts=(text,) if text else (),
        evidence_docs=frozenset({gold}),
        confidence=level,
    )


def test_each_level_reports_how_often_its_answers_cite_gold() -> None:
    table = reliability(
        [
            case("high", cited="g", text="Paris is the capital."),
            case("high", cited="x", text="Lyon is a city."),  # cites the wrong passage
            case("medium", cited="g", text="It is in France."),  # gold passage, answer not quoted
            case("medium", impossible=True, cited="x", text="Paris, perhaps."),  # answered the unanswerable
            case("low", cited="g", text="Paris."),
            case("low", impossible=True, declined=True),
            case("low", declined=True),
        ]
    )
    assert table["high"] == {
        "answered": 2.0,
        "cites_gold": 0.5,
        "holds_answer": 0.5,
        "unanswerable": 0.0,
        "unanswerable_share": 0.0,
    }
    # an answered unanswerable question counts against its level; its answer string matches nothing
    assert table["medium"]["answered"] == 2 and table["medium"]["cites_gold"] == 0.5
    assert table["medium"]["holds_answer"] == 0.0
    assert table["medium"]["unanswerable"] == 1 and table["medium"]["unanswerable_share"] == 0.5
    assert table["low"]["answered"] == 1 and table["low"]["cites_gold"] == 1.0
    assert table["declined"]["answered"] == 2
    assert table["declined"]["unanswerable"] == 1 and table["declined"]["unanswerable_share"] == 0.5


def test_empty_levels_and_answerers_without_confidence() -> None:
    table = reliability([case(None, cited="g", text="Paris"), case("medium", cited="g", text="Paris")])
    assert table["medium"]["answered"] == 1  # the case without a confidence is left out
    assert table["high"]["answered"] == 0 and math.isnan(table["high"]["cites_gold"])
    assert math.isnan(table["high"]["unanswerable_share"])  # no unanswerable question in the set
