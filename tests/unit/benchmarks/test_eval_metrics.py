"""The evaluation harness's scores on hand-computed examples (benchmarks/evaluate.metrics re-exports
citegate.clients.evaluation.metrics, which `citegate eval` uses too)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from benchmarks.evaluate import metrics as ev
from benchmarks.evaluate.ingest import PrecomputedEmbedder
from benchmarks.evaluate.run import SystemRun, score_system

from citegate.knowledge.embedding import HashingEmbedder

# -- ranking metrics (binary relevance) -------------------------------------------------------------


def test_ndcg_single_relevant_at_rank_one_and_three() -> None:
    assert ev.ndcg_at_k(["a", "b", "c"], {"a"}, 10) == pytest.approx(1.0)
    # rank 3: 1/log2(4) = 0.5, ideal 1.
    assert ev.ndcg_at_k(["x", "y", "a"], {"a"}, 10) == pytest.approx(0.5)


def test_ndcg_two_relevant_uses_ideal_from_relevant_count() -> None:
    # Relevant at ranks 1 and 3: DCG = 1 + 0.5; ideal = 1 + 1/log2(3).
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ev.ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(expected)
    # A relevant document never retrieved still counts in the ideal: 1 / (1 + 1/log2(3)).
    assert ev.ndcg_at_k(["a", "x"], {"a", "b"}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ndcg_ideal_is_capped_at_k() -> None:
    relevant = {f"d{i}" for i in range(12)}
    assert ev.ndcg_at_k([f"d{i}" for i in range(12)], relevant, 10) == pytest.approx(1.0)


def test_ndcg_ignores_hits_past_k() -> None:
    assert ev.ndcg_at_k([*"abcdefghij", "r"], {"r"}, 10) == 0.0


def test_recall_and_mrr() -> None:
    ranked = ["x", "a", "y", "z", "w", "b"]
    relevant = {"a", "b", "c"}
    assert ev.recall_at_k(ranked, relevant, 5) == pytest.approx(1 / 3)
    assert ev.recall_at_k(ranked, relevant, 10) == pytest.approx(2 / 3)
    assert ev.mrr_at_k(ranked, relevant, 10) == pytest.approx(0.5)
    assert ev.mrr_at_k(ranked, relevant, 1) == 0.0
    assert ev.recall_at_k(ranked, set(), 5) == 0.0


def test_recall_at_100_counts_deep_hits() -> None:
    ranked = [f"x{i}" for i in range(60)] + ["a"]
    assert ev.query_metrics(ranked, {"a", "b"})["recall@100"] == pytest.approx(0.5)
    assert ev.query_metrics(ranked, {"a", "b"})["recall@10"] == 0.0


def test_duplicates_are_counted_once() -> None:
    metrics = ev.query_metrics(["a", "a", "b"], {"a", "b"})
    assert metrics["recall@5"] == pytest.approx(1.0)
    assert metrics["ndcg@10"] == pytest.approx(1.0)


def test_evaluate_averages_over_judged_queries_only() -> None:
    run = {"q1": ["a"], "q2": ["x", "b"], "unanswerable": ["z"]}
    qrels = {"q1": {"a"}, "q2": {"b"}}
    result = ev.evaluate(run, qrels)
    assert result["queries"] == 2
    assert result["mrr@10"] == pytest.approx((1 + 0.5) / 2)
    assert result["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_aggregate_max_and_top2() -> None:
    hits = [("d1", 0.9), ("d2", 0.8), ("d2", 0.7), ("d3", 0.1), ("d1", 0.05)]
    assert ev.aggregate(hits, "max") == ["d1", "d2", "d3"]
    # top2: d2 = 1.5, d1 = 0.95, d3 = 0.1
    assert ev.aggregate(hits, "top2") == ["d2", "d1", "d3"]
    with pytest.raises(ValueError):
        ev.aggregate(hits, "mean")


def test_aggregate_ties_keep_engine_order() -> None:
    assert ev.aggregate([("b", 0.5), ("a", 0.5)], "max") == ["b", "a"]


# -- the aggregation is chosen on dev and applied unchanged to test --------------------------------


def test_score_system_chooses_aggregation_on_dev_only() -> None:
    hits = [("A", 0.9), ("B", 0.8), ("B", 0.7)]  # max ranks A first, top2 ranks B (1.5) first
    run = SystemRun(
        hits={"dev": {"d1": hits}, "test": {"t1": hits}},
        latency_ms=[1.0, 3.0],
        aggregations=("max", "top2"),
    )
    # Dev wants B (top2 wins there); test wants A, which max would have put first.
    scored = score_system(run, {"d1": {"B"}, "t1": {"A"}})
    assert scored["aggregation"] == "top2"
    assert scored["dev"]["ndcg@10"] == pytest.approx(1.0)
    assert scored["test"]["ndcg@10"] == pytest.approx(round(1 / math.log2(3), 4))
    assert scored["latency"] == {"p50_ms": 1.0, "p95_ms": 3.0, "mean_ms": 2.0}


# -- honesty of the ask path -----------------------------------------------------------------------


def _case(
    *,
    answers: tuple[str, ...] = ("Paris",),
    impossible: bool = False,
    gold: frozenset[str] = frozenset({"g"}),
    declined: bool = False,
    cited: dict[str, str] | None = None,
    evidence: frozenset[str] = frozenset(),
) -> ev.AnswerCase:
    cited = cited or {}
    return ev.AnswerCase(
        answers=answers,
        impossible=impossible,
        gold=gold,
        declined=declined,
        cited_docs=frozenset(cited),
        cited_texts=tuple(cited.values()),
        evidence_docs=evidence,
    )


def test_honesty_shares_on_a_hand_computed_mix() -> None:
    cases = [
        # answered, gold cited, the cited text holds the answer
        _case(cited={"g": "The capital is Paris."}, evidence=frozenset({"g", "x"})),
        # answered from a wrong passage that still holds the answer (case-insensitive)
        _case(cited={"x": "paris is large"}, evidence=frozenset({"x"})),
        # declined although the gold passage was in the evidence
        _case(declined=True, evidence=frozenset({"g"})),
        # unanswerable: one declined, one answered (which can never be a precise citation)
        _case(answers=(), impossible=True, gold=frozenset(), declined=True),
        _case(answers=(), impossible=True, gold=frozenset(), cited={"y": "whatever"}),
    ]
    h = ev.honesty(cases)
    assert (h["questions"], h["answerable"], h["unanswerable"]) == (5, 3, 2)
    assert h["answered_gold"] == pytest.approx(1 / 3)
    assert h["answered_answerable"] == pytest.approx(2 / 3)
    assert h["citation_precision"] == pytest.approx(2 / 3)  # 2 of the 3 answered
    assert h["evidence_recall"] == pytest.approx(2 / 3)
    assert h["declined_unanswerable"] == pytest.approx(0.5)


def test_honesty_without_unanswerable_questions_has_no_decline_share() -> None:
    h = ev.honesty([_case(cited={"g": "Paris"})])
    assert "declined_unanswerable" not in h
    assert h["answered_gold"] == 1.0
    assert math.isnan(ev.honesty([])["answered_gold"])


def test_contains_answer_ignores_blank_answers_and_case() -> None:
    assert ev.contains_answer("《男儿本色》而成名", ["《男儿本色》"])
    assert ev.contains_answer("In WORLD WAR I", ["world war i"])
    assert not ev.contains_answer("anything", ["  ", ""])


# -- latency and ratios -----------------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    samples = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert ev.percentile(samples, 50) == 3.0
    assert ev.percentile(samples, 95) == 5.0
    assert ev.percentile(samples, 0) == 1.0
    assert ev.percentile([float(i) for i in range(1, 21)], 95) == 19.0
    assert math.isnan(ev.percentile([], 50))


def test_ratio() -> None:
    assert ev.ratio(0.8, 0.4) == pytest.approx(2.0)
    assert math.isnan(ev.ratio(1.0, 0.0))
    assert math.isnan(ev.ratio(math.nan, 1.0))


# -- the embedder that serves cached vectors to the ingestion's embed step -------------------------


def test_precomputed_embedder_serves_known_texts_and_counts_the_rest() -> None:
    inner = HashingEmbedder(dimension=8)
    known = np.ones(8, dtype=np.float32)
    embedder = PrecomputedEmbedder(inner, {"cached": known})
    out = embedder.embed_documents(["cached", "new"])
    assert out.shape == (2, 8)
    assert np.array_equal(out[0], known)
    assert np.allclose(out[1], inner.embed_documents(["new"])[0])
    assert (embedder.hits, embedder.misses) == (1, 1)
