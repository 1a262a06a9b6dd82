"""The retrieval-evaluation metrics on hand-computed examples (benchmarks/eval_retrieval.py)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "eval_retrieval.py"


def _load() -> ModuleType:
    # benchmarks/ is not a package: load the script by path, once.
    spec = importlib.util.spec_from_file_location("eval_retrieval", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("eval_retrieval", module)
    spec.loader.exec_module(module)
    return module


ev = _load()


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
