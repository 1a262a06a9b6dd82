"""Confidence (spec 000 "不确定性表达"): high, medium or low, from evidence the bars rely on.

`assess` is the one place that reads the features a confidence rests on:

    support    the extractive answerer's support score of the quoted sentence: a logistic model
               over the sentence's coverage of the question, its key terms, the asked answer type
               and mismatch signals, fitted on the dev splits (extractive.py)
    focus      the quoted sentence holds what the question asks for (a number, a time, a name);
               the extractive answerer never answers without it
    recall     the share of the question's terms (IDF-weighted) in the sentence the answer rests on
    relevance  the best retrieval score among the cited passages (recorded in the basis; not used
               for the level: not measured against the bars yet)
    verified   the model's verification step judged every kept citation supported (model path)

Levels (chosen on dev only, with benchmarks/tune_extractive.py; test figures in its output):
    extractive  medium when the quoted sentence holds every term of the question (`recall` of
                the sentence the answer rests on is 1) and its support >= MEDIUM_SUPPORT; low
                otherwise. Never high: on SQuAD 2.0 dev no support threshold and no rule tried
                (support, key-term recall, coverage, phrase runs, typed focus) reached 95% of
                answers citing gold with at most 3% of unanswerable questions answered; the best,
                support >= 0.8, cites gold 75% of the time on 8 answers. `high` waits for an
                answerability signal the lexical features do not have (a reading model).
    model       never high (no measured calibration for a configured model); medium when the
                verification step is on and passed, low otherwise
    no answer   always low (spec 000 section 8)
A sentence removed for want of a valid citation caps the level at medium.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from citegate.answers.base import Draft
from citegate.answers.validate import Bound
from citegate.knowledge.search.base import Hit

Level = Literal["high", "medium", "low"]

# Dev (SQuAD 2.0 + CMRC 2018 dev halves): answers whose quoted sentence holds every question term
# cite gold 70% (SQuAD, 40 answers, 10 of 134 unanswerable among them) and 100% (CMRC, 42) of the
# time, against 53% and 99% for all answers. A support floor on top keeps the level from answers the
# support model itself doubts.
MEDIUM_RECALL = 0.999
MEDIUM_SUPPORT = 0.09
HIGH_SUPPORT: float | None = None  # never: see the module docstring


@dataclass(frozen=True)
class Confidence:
    level: Level
    score: float
    basis: dict[str, object] = field(default_factory=dict)

    @classmethod
    def none(cls) -> Confidence:
        return cls("low", 0.0, {"answered": False})

    def stats(self) -> dict[str, object]:
        return {"level": self.level, "score": round(self.score, 4), **self.basis}


def extractive_level(draft: Draft) -> Level:
    """The level of an extractive answer from its own evidence (the sentence it rests on)."""
    support = float(draft.support_score or 0.0)
    best = draft.diagnostics.get("best")
    recall = float(best.get("recall", 0.0)) if isinstance(best, dict) else 0.0
    if HIGH_SUPPORT is not None and support >= HIGH_SUPPORT and recall >= MEDIUM_RECALL:
        return "high"
    if support >= MEDIUM_SUPPORT and recall >= MEDIUM_RECALL:
        return "medium"
    return "low"


def assess(draft: Draft, bound: Bound, cited: Sequence[Hit], verified: bool | None) -> Confidence:
    """The confidence of a bound (non-empty) answer; see the module docstring."""
    relevance = max((h.score for h in cited), default=0.0)
    basis: dict[str, object] = {
        "answered": True,
        "relevance": round(relevance, 4),
        "removed_sentences": len(bound.removed),
    }
    level: Level
    if draft.support_score is not None:
        support = float(draft.support_score)
        basis["support"] = round(support, 4)
        level = extractive_level(draft)
        score = support
    else:
        basis["verified"] = bool(verified)
        level = "medium" if verified else "low"
        score = 0.5 if verified else 0.25
    if bound.removed and level == "high":
        level = "medium"
    return Confidence(level, score, basis)
