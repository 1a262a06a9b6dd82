"""What the layer's metrics add to the harness's (tests/unit/benchmarks/test_eval_metrics.py pins the
formulas)."""

from __future__ import annotations

import pytest

from citegate.clients.evaluation import metrics as m


def test_recall_depths_are_a_parameter() -> None:
    ranked = [f"x{i}" for i in range(30)] + ["a"]  # "a" at rank 31
    remote = m.query_metrics(ranked, {"a"}, recall_ks=(5, 10, 50))
    assert set(remote) == {"ndcg@10", "recall@5", "recall@10", "recall@50", "mrr@10"}
    assert remote["recall@50"] == 1.0 and remote["recall@10"] == 0.0
    assert m.metric_names((5, 50)) == ("ndcg@10", "recall@5", "recall@50", "mrr@10")
    assert m.METRIC_NAMES == ("ndcg@10", "recall@5", "recall@10", "recall@100", "mrr@10")


def test_evaluate_with_remote_depths() -> None:
    result = m.evaluate({"q": ["x", "a"], "none": ["a"]}, {"q": {"a"}}, recall_ks=(1, 50))
    assert result == pytest.approx(
        {"ndcg@10": 1 / 1.5849625, "recall@1": 0.0, "recall@50": 1.0, "mrr@10": 0.5, "queries": 1.0}, rel=1e-6
    )
