"""Scores: ranking metrics (binary relevance), child-to-document aggregation, answer honesty, latency.

Ranking: nDCG@10, Recall@k, MRR@10 over documents ranked best first; queries without a relevant
document (SQuAD's unanswerable ones) are left out of the means. The recall depths are a parameter
because a remote run sees at most the API's top_k (50), so it reports Recall@50, not Recall@100.
tests/unit/test_eval_metrics.py pins every formula on hand-computed cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

AGGREGATIONS = ("max", "top2")
RECALL_KS = (5, 10, 100)  # the in-process harness retrieves 100 children per query


def metric_names(recall_ks: Sequence[int] = RECALL_KS) -> tuple[str, ...]:
    return ("ndcg@10", *(f"recall@{k}" for k in recall_ks), "mrr@10")


METRIC_NAMES = metric_names()


def dcg_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    # Rank r (1-based) is discounted by log2(r + 1): the first hit counts fully.
    return sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]) if doc in relevant)


def ndcg_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    if not relevant:
        return 0.0
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(relevant), k)))
    return dcg_at_k(ranked, relevant, k) / ideal


def recall_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    for rank, doc in enumerate(ranked[:k]):
        if doc in relevant:
            return 1.0 / (rank + 1)
    return 0.0


def query_metrics(
    ranked: Sequence[str], relevant: set[str], recall_ks: Sequence[int] = RECALL_KS
) -> dict[str, float]:
    # Duplicates would inflate DCG and recall: keep each document's first (best) position only.
    ranked = list(dict.fromkeys(ranked))
    return {
        "ndcg@10": ndcg_at_k(ranked, relevant, 10),
        **{f"recall@{k}": recall_at_k(ranked, relevant, k) for k in recall_ks},
        "mrr@10": mrr_at_k(ranked, relevant, 10),
    }


def evaluate(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, set[str]], recall_ks: Sequence[int] = RECALL_KS
) -> dict[str, float]:
    """Mean of each metric over the run's queries that have at least one relevant document."""
    judged = [q for q in run if qrels.get(q)]
    totals = dict.fromkeys(metric_names(recall_ks), 0.0)
    for q in judged:
        for name, value in query_metrics(run[q], qrels[q], recall_ks).items():
            totals[name] += value
    means = {name: (total / len(judged) if judged else 0.0) for name, total in totals.items()}
    return {**means, "queries": float(len(judged))}


def aggregate(hits: Sequence[tuple[str, float]], method: str) -> list[str]:
    """Child hits (document_id, score), best first, to documents best first.

    max   a document's score is its best child's
    top2  the sum of its two best children's (rewards several matching children)
    """
    scores: dict[str, list[float]] = {}
    for doc, score in hits:
        scores.setdefault(doc, []).append(score)
    if method == "max":
        value: Callable[[list[float]], float] = max
    elif method == "top2":
        value = lambda s: sum(sorted(s, reverse=True)[:2])  # noqa: E731
    else:
        raise ValueError(f"unknown aggregation {method!r}")
    first = {doc: i for i, doc in enumerate(scores)}  # ties keep the engine's order
    return sorted(scores, key=lambda d: (-value(scores[d]), first[d]))


# --------------------------------------------------------------------------------------------------
# Honesty of answers


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
    confidence: str | None = None  # the confidence the answer was given (high / medium / low)


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """Case-insensitive substring test of any non-blank accepted answer."""
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


# --------------------------------------------------------------------------------------------------
# Latency and ratios


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


# --------------------------------------------------------------------------------------------------
# Reliability of the confidence levels

CONFIDENCE_LEVELS = ("high", "medium", "low")
# Spec 000 / issue 21, on test: what each level must mean.
CONFIDENCE_BARS = {"high_cites_gold": 0.90, "medium_cites_gold": 0.70, "unanswerable_high_at_most": 0.05}


def reliability(cases: Sequence[AnswerCase]) -> dict[str, dict[str, float]]:
    """Per confidence level, what an answer at that level is worth.

    For each level (and `declined`): `answered` answers at that level (declined: questions
    declined), `cites_gold` the share of them whose citations include a gold passage (an answered
    unanswerable question has none: it counts against its level), `holds_answer` the share citing
    a passage with an accepted answer, `unanswerable` how many unanswerable questions ended there
    and `unanswerable_share` that count over all unanswerable questions. Cases without a confidence
    are left out (an answerer that reports none)."""
    rated = [c for c in cases if c.confidence is not None or c.declined]
    impossible = sum(1 for c in rated if c.impossible)
    out: dict[str, dict[str, float]] = {}
    for level in (*CONFIDENCE_LEVELS, "declined"):
        if level == "declined":
            group = [c for c in rated if c.declined]
        else:
            group = [c for c in rated if not c.declined and c.confidence == level]
        unanswerable = sum(1 for c in group if c.impossible)
        out[level] = {
            "answered": float(len(group)),
            "cites_gold": _share(sum(1 for c in group if c.gold & c.cited_docs), len(group)),
            "holds_answer": _share(
                sum(1 for c in group if any(contains_answer(t, c.answers) for t in c.cited_texts)), len(group)
            ),
            "unanswerable": float(unanswerable),
            "unanswerable_share": _share(unanswerable, impossible),
        }
    return out


def _share(hits: int, total: int) -> float:
    return hits / total if total else math.nan
