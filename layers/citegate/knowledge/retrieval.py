"""Hybrid retrieval over a set of knowledge bases, with spec 004's fallbacks made real.

- The dense side needs a query embedding; if the embedder fails, BM25 answers alone.
- If the engine cannot fuse (a missing search pipeline, say), the engine that answered ranks.
- Only when no side can answer is the search index unavailable (503 search_unavailable).
Every fallback taken is named in `stats["fallbacks"]`.

Scores: every hit's `score` is the relevance estimate of `citegate.knowledge.search.relevance` (in [0, 1],
the same scale for every query, fusion method, engine and fallback), so `score_threshold` keeps the
hits at least that likely to be relevant; the engine's own score stays in `Hit.fused_score`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citegate.knowledge.search import relevance
from citegate.knowledge.search.base import FusionConfig, Hit, SearchFilter, SearchMode, SearchUnavailable
from citegate.platform.errors import SearchUnavailableError
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.ports import Retrieving

MAX_CANDIDATES = 200
# Min-max fusion's weight on BM25 per embedding model, tuned on SciFact dev with the service's BM25
# fields (benchmarks/tune_fusion.py; bench-results/fusion-<embedder>.json). BM25 leads with both:
# on 500-character children e5's dense side alone scores below BM25 (SciFact dev nDCG@10 .55 / .67).
LEXICAL_WEIGHTS = {"use-multilingual-v3": 0.7, "multilingual-e5-small": 0.6}
# Any other model (an embedding endpoint) has not been measured: lean on BM25 like the default.
DEFAULT_LEXICAL_WEIGHT = 0.7
DEFAULT_FUSION = FusionConfig(method="min_max", lexical_weight=DEFAULT_LEXICAL_WEIGHT)


@dataclass(frozen=True)
class Scope:
    """What a query may see: a set of knowledge bases and optional metadata filters."""

    kb_ids: frozenset[str]
    source_names: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    path_prefixes: tuple[str, ...] | None = None
    versions: frozenset[str] | None = None

    @property
    def filtered(self) -> bool:
        return any(
            v is not None for v in (self.source_names, self.projects, self.path_prefixes, self.versions)
        )

    def to_filter(self) -> SearchFilter:
        return SearchFilter(
            kb_ids=self.kb_ids,
            source_names=self.source_names,
            projects=self.projects,
            path_prefixes=self.path_prefixes,
            versions=self.versions,
        )


@dataclass
class Retrieval:
    hits: list[Hit]
    stats: dict[str, Any] = field(default_factory=dict)


def candidate_pool(top_k: int, filtered: bool) -> int:
    """Spec 004: when filtering, widen the pool to top_k * 5 (at most 200) so filters lose little."""
    if filtered:
        return min(top_k * 5, MAX_CANDIDATES)
    return min(max(top_k * 5, 50), MAX_CANDIDATES)


def fusion_for(model_id: str | None, lexical_weight: float | None = None) -> FusionConfig:
    """Min-max fusion with the configured weight, else the one tuned for the embedding model."""
    if lexical_weight is None:
        lexical_weight = LEXICAL_WEIGHTS.get(model_id or "", DEFAULT_LEXICAL_WEIGHT)
    return FusionConfig(method="min_max", lexical_weight=lexical_weight)


def retrieve(
    s: Retrieving,
    scope: Scope,
    query: str,
    *,
    top_k: int = 8,
    score_threshold: float | None = None,
    fusion: FusionConfig | None = None,
) -> Retrieval:
    """Hybrid search over `scope`; `fusion` defaults to `fusion_for` the embedder and settings."""
    started = time.perf_counter()
    fallbacks: list[str] = []
    timings: dict[str, float] = {}
    pool = candidate_pool(top_k, scope.filtered)

    vector = None
    model_id: str | None = None
    embed_started = time.perf_counter()
    try:
        embedder = s.embedder
        model_id = embedder.model_id
        vector = embedder.embed_query(query)
    except Exception as error:  # any embedder failure degrades to BM25, it never fails the query
        logger.warning("query embedding failed; BM25 answers alone", extra={"reason": str(error)})
        fallbacks.append(f"dense_unavailable: {type(error).__name__}")
    timings["embed_ms"] = _ms(embed_started)
    if fusion is None:
        fusion = fusion_for(model_id, s.settings.fusion_lexical_weight)

    modes: list[SearchMode] = ["hybrid", "lexical", "dense"] if vector is not None else ["lexical"]
    result = None
    errors: list[str] = []
    search_started = time.perf_counter()
    for mode in modes:
        try:
            result = s.index.search(
                query=query,
                vector=vector,
                filter=scope.to_filter(),
                limit=top_k,
                mode=mode,
                fusion=fusion,
                candidates=pool,
            )
            break
        except SearchUnavailable as error:
            errors.append(f"{mode}: {error}")
            if mode != modes[-1]:
                fallbacks.append(f"{mode}_unavailable")
    timings["search_ms"] = _ms(search_started)
    if result is None:
        # What each attempt failed with (hosts, ports, paths) is for the log, not for the caller.
        logger.warning("search index unreachable", extra={"attempts": errors})
        raise SearchUnavailableError("the search index is unreachable", details={"modes": list(modes)})
    started_scoring = time.perf_counter()
    scored = relevance.rescore(query, result.hits, model_id, dense_floor=_floor(result.stats, "dense_floor"))
    timings["score_ms"] = _ms(started_scoring)
    hits = scored
    if score_threshold is not None:
        hits = [h for h in hits if h.score >= score_threshold]
    timings["total_ms"] = _ms(started)
    stats = {
        "engine": result.stats.get("engine", s.index.engine),
        "mode": result.stats.get("mode"),
        "fusion": {"method": fusion.method, "lexical_weight": fusion.lexical_weight}
        if result.stats.get("mode") == "hybrid"
        else None,
        "candidates": pool,
        "lexical_candidates": result.stats.get("lexical_candidates"),
        "dense_candidates": result.stats.get("dense_candidates"),
        "score": relevance.describe(model_id, dense=result.stats.get("mode") in ("hybrid", "dense")),
        "returned": len(hits),
        "filtered_by_threshold": len(result.hits) - len(hits),
        "fallbacks": fallbacks,
        "timings_ms": {
            **timings,
            **{f"engine_{k}": v for k, v in _timings(result.stats).items()},
        },
    }
    return Retrieval(hits, stats)


def _floor(stats: dict[str, object], name: str) -> float | None:
    floor = stats.get(name)
    return float(floor) if isinstance(floor, int | float) else None


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def _timings(stats: dict[str, object]) -> dict[str, object]:
    timings = stats.get("timings_ms")
    return dict(timings) if isinstance(timings, dict) else {}
