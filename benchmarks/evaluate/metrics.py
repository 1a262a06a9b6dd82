"""Scores of the evaluation harness: ranking metrics, answer honesty, latency percentiles, ratios.

The ranking metrics (nDCG@10, Recall@k, MRR@10, binary relevance) and the child-to-document
aggregation are benchmarks/eval_retrieval.py's own, imported rather than copied, so the two
scripts can never disagree; tests/unit/test_eval_metrics.py pins them with hand-computed cases.
What is new here: honesty of answers (declines and citations), percentiles and ratios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.eval_retrieval import (
    AGGREGATIONS,
    METRIC_NAMES,
    aggregate,
    evaluate,
    mrr_at_k,
    ndcg_at_k,
    query_metrics,
    recall_at_k,
)

__all__ = [
    "AGGREGATIONS",
    "METRIC_NAMES",
    "AnswerCase",
    "aggregate",
    "contains_answer",
    "evaluate",
    "honesty",
    "latency_summary",
    "mrr_at_k",
    "ndcg_at_k",
    "percentile",
    "query_metrics",
    "ratio",
    "recall_at_k",
]


@dataclass(frozen=True)
class AnswerCase:
    """What the ask path did with one question, mapped back to corpus documents."""

    answers: tuple[str, ...]  # accepted answer strings; empty when the question is unanswerable
    impossible: bool
    gold: frozenset[str]  # corpus ids of the gold passages
    declined: bool
    cited_docs: frozenset[str]  # corpus ids of the cited passages
    cited_texts: tuple[str, ...]  # the cited passages' text, as shown to the user
    evidence_docs: frozenset[str]  # corpus ids of every passage the answerer was given


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """Case-insensitive substring test, the rule of benchmarks/tune_extractive.py."""
    lowered = text.lower()
    return any(a.strip() and a.strip().lower() in lowered for a in answers)


def honesty(cases: Sequence[AnswerCase]) -> dict[str, float]:
    """Shares over a set of questions (NaN where the denominator is empty).

    declined_unanswerable  unanswerable questions declined
    answered_gold          answerable questions answered with a gold passage among the citations
    answered_answerable    answerable questions answered at all
    citation_precision     answered questions with a cited passage containing an accepted answer
                           (an answered unanswerable question has none, so it counts as wrong)
    evidence_recall        answerable questions with a gold passage among the answerer's evidence
    """
    answerable = [c for c in cases if not c.impossible]
    impossible = [c for c in cases if c.impossible]
    answered = [c for c in cases if not c.declined]

    def share(hits: int, total: int) -> float:
        return hits / total if total else math.nan

    out = {
        "questions": float(len(cases)),
        "answerable": float(len(answerable)),
        "unanswerable": float(len(impossible)),
        "answered_gold": share(
            sum(1 for c in answerable if not c.declined and c.gold & c.cited_docs), len(answerable)
        ),
        "answered_answerable": share(sum(1 for c in answerable if not c.declined), len(answerable)),
        "citation_precision": share(
            sum(1 for c in answered if any(contains_answer(t, c.answers) for t in c.cited_texts)),
            len(answered),
        ),
        "evidence_recall": share(sum(1 for c in answerable if c.gold & c.evidence_docs), len(answerable)),
    }
    if impossible:
        out["declined_unanswerable"] = share(sum(1 for c in impossible if c.declined), len(impossible))
    return out


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]): an observed value, never an interpolation."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratio(ours: float, theirs: float) -> float:
    """ours / theirs, NaN when theirs is zero or either is missing."""
    if theirs == 0 or math.isnan(ours) or math.isnan(theirs):
        return math.nan
    return ours / theirs


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(samples_ms, 50), 2),
        "p95_ms": round(percentile(samples_ms, 95), 2),
        "mean_ms": round(sum(samples_ms) / len(samples_ms), 2) if samples_ms else math.nan,
    }
