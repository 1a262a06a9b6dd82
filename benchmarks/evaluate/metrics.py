"""Scores of the evaluation harness, re-exported from the layer (citegate.clients.evaluation.metrics).

The ranking metrics, the child-to-document aggregation, answer honesty, percentiles and ratios
live in the layer so that `make eval` (in-process) and `citegate eval` (over HTTP) score alike.
"""

from __future__ import annotations

from citegate.clients.evaluation.metrics import (
    AGGREGATIONS,
    CONFIDENCE_BARS,
    CONFIDENCE_LEVELS,
    METRIC_NAMES,
    AnswerCase,
    aggregate,
    contains_answer,
    evaluate,
    honesty,
    latency_summary,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    query_metrics,
    ratio,
    recall_at_k,
    reliability,
)

__all__ = [
    "AGGREGATIONS",
    "CONFIDENCE_BARS",
    "CONFIDENCE_LEVELS",
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
    "reliability",
]
