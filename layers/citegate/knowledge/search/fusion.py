"""Hybrid score fusion, the way OpenSearch's search pipelines do it, as pure functions.

Both engines must rank hybrid results identically, so this module is the reference. Inputs are the
two candidate lists, lexical (BM25) and dense (cosine), each a sequence of `(ref_id, score)`. Each
list is first put in canonical order: score descending, then ref_id ascending; a ref_id repeated in
one list keeps its first (best) entry. Output: `Fused(ref_id, score, lexical, dense)` tuples sorted
by fused score descending, ties broken by ref_id ascending, where `lexical` / `dense` are the raw
input scores (None when the document was not a candidate on that side).

min_max (OpenSearch `normalization-processor`, technique `min_max` without lower bounds, combined
with `arithmetic_mean` and weights `[w, 1 - w]`, w = `lexical_weight`):

    per side, over that side's candidates:  lo = min(scores), hi = max(scores)
        norm(s) = 1.0                      if hi == lo (then every score on the side equals hi)
        norm(s) = (s - lo) / (hi - lo)     otherwise, and 0.001 instead of exactly 0.0
    fused = (w * norm_lexical + (1 - w) * norm_dense) / (w + (1 - w))

    A document missing from a side contributes 0 there (OpenSearch keeps 0.0 for sub-queries that
    did not return the document and still counts their weight). The 0.001 floor is OpenSearch's
    MIN_SCORE: the last candidate of a side still beats "not a candidate".

rrf (OpenSearch `score-ranker-processor`, combination `rrf`, no weights):

    rank = 1-based position in the canonical order of a side
    fused = sum over the sides where the document appears of 1 / (rank_constant + rank)

OpenSearch computes in float32 and orders ties by Lucene doc id; here everything is float64 and ties
go by ref_id, so an OpenSearch backend that wants byte-identical ordering should fuse client-side
with these functions (or re-sort with the same key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from citegate.knowledge.search.base import FusionConfig

# OpenSearch's min-max normalisation maps the minimum to this instead of 0.0.
MIN_MAX_FLOOR = 0.001
# ... and a side whose scores are all equal to this.
MIN_MAX_SINGLE = 1.0

Ranked = Sequence[tuple[str, float]]


class Fused(NamedTuple):
    ref_id: str
    score: float
    lexical: float | None
    dense: float | None


def canonical(ranked: Ranked) -> list[tuple[str, float]]:
    """Score descending, ref_id ascending; the first (best) occurrence of a repeated ref_id wins."""
    seen: set[str] = set()
    side = []
    for ref_id, score in sorted(ranked, key=lambda item: (-item[1], item[0])):
        if ref_id not in seen:
            seen.add(ref_id)
            side.append((ref_id, float(score)))
    return side


def min_max_normalise(ranked: Ranked) -> dict[str, float]:
    """OpenSearch min-max over one side's candidates: [0.001, 1], or 1.0 when all scores are equal."""
    side = canonical(ranked)
    if not side:
        return {}
    hi = side[0][1]
    lo = side[-1][1]
    if hi == lo:
        return {ref_id: MIN_MAX_SINGLE for ref_id, _ in side}
    span = hi - lo
    return {ref_id: ((score - lo) / span) or MIN_MAX_FLOOR for ref_id, score in side}


def _sorted(fused: list[Fused]) -> list[Fused]:
    return sorted(fused, key=lambda f: (-f.score, f.ref_id))


def min_max(lexical: Ranked, dense: Ranked, lexical_weight: float = 0.7) -> list[Fused]:
    """Weighted arithmetic mean of min-max normalised scores (see the module docstring)."""
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError("lexical_weight must be within [0, 1]")
    dense_weight = 1.0 - lexical_weight
    raw_lexical = dict(canonical(lexical))
    raw_dense = dict(canonical(dense))
    norm_lexical = min_max_normalise(lexical)
    norm_dense = min_max_normalise(dense)
    fused = []
    for ref_id in raw_lexical.keys() | raw_dense.keys():
        combined = lexical_weight * norm_lexical.get(ref_id, 0.0) + dense_weight * norm_dense.get(ref_id, 0.0)
        fused.append(
            Fused(
                ref_id,
                combined / (lexical_weight + dense_weight),
                raw_lexical.get(ref_id),
                raw_dense.get(ref_id),
            )
        )
    return _sorted(fused)


def rrf(lexical: Ranked, dense: Ranked, rank_constant: int = 60) -> list[Fused]:
    """Reciprocal rank fusion: sum of 1 / (rank_constant + rank), rank starting at 1."""
    if rank_constant < 1:
        raise ValueError("rank_constant must be at least 1")
    raw_lexical = dict(canonical(lexical))
    raw_dense = dict(canonical(dense))
    scores: dict[str, float] = {}
    for side in (raw_lexical, raw_dense):
        for rank, ref_id in enumerate(side, start=1):
            scores[ref_id] = scores.get(ref_id, 0.0) + 1.0 / (rank_constant + rank)
    return _sorted(
        [
            Fused(ref_id, score, raw_lexical.get(ref_id), raw_dense.get(ref_id))
            for ref_id, score in scores.items()
        ]
    )


def fuse(lexical: Ranked, dense: Ranked, config: FusionConfig) -> list[Fused]:
    """Fuse two candidate lists as `config` says."""
    if config.method == "min_max":
        return min_max(lexical, dense, config.lexical_weight)
    if config.method == "rrf":
        return rrf(lexical, dense, config.rank_constant)
    raise ValueError(f"unknown fusion method: {config.method!r}")
