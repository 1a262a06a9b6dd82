"""The search index interface: one contract, two engines (embedded tantivy+numpy, OpenSearch).

Every query names the set of knowledge bases it may see; an engine must never return a chunk of a
knowledge base outside that set. Scores are engine-native: lexical (BM25), dense (cosine in
[-1, 1]) or fused (in [0, 1] after min-max normalisation, or RRF).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]
else:  # numpy is not imported just to name a type: handlers that never touch vectors start faster
    Vector = Any
SearchMode = Literal["hybrid", "lexical", "dense"]


@dataclass(frozen=True)
class ChunkRecord:
    """A child chunk as the index stores it: the unit of retrieval and of citation (`ref_id`)."""

    ref_id: str
    kb_id: str
    tenant_id: str
    document_id: str
    parent_id: str
    source_name: str
    text: str
    position: int = 0
    title: str = ""
    page: int | None = None
    project: str = ""
    path: str = ""
    version: str = ""
    url: str = ""
    anchor: str = ""
    heading: str = ""
    vector: Vector | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SearchFilter:
    """Which chunks a query may see. `kb_ids` is required and never empty."""

    kb_ids: frozenset[str]
    source_names: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    path_prefixes: tuple[str, ...] | None = None
    versions: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if not self.kb_ids:
            raise ValueError("a search must name at least one knowledge base")

    def admits(self, chunk: ChunkRecord) -> bool:
        """The filter as a predicate: engines use it to double-check, tests to verify isolation."""
        if chunk.kb_id not in self.kb_ids:
            return False
        if self.source_names is not None and chunk.source_name not in self.source_names:
            return False
        if self.projects is not None and chunk.project not in self.projects:
            return False
        if self.versions is not None and chunk.version not in self.versions:
            return False
        if self.path_prefixes is not None:
            return any(chunk.path.startswith(prefix) for prefix in self.path_prefixes)
        return True


@dataclass(frozen=True)
class FusionConfig:
    """How lexical and dense scores combine, the way an OpenSearch search pipeline would.

    `min_max`: each side normalised to [0, 1] over its candidates, then a weighted arithmetic mean
    (a candidate missing on one side scores 0 there). `rrf`: sum of 1 / (rank_constant + rank).
    """

    method: Literal["min_max", "rrf"] = "min_max"
    lexical_weight: float = 0.7
    rank_constant: int = 60


@dataclass(frozen=True)
class Hit:
    chunk: ChunkRecord
    score: float
    lexical_score: float | None = None
    dense_score: float | None = None


@dataclass
class SearchResult:
    hits: list[Hit]
    # engine, mode, lexical_candidates, dense_candidates, timings_ms {...}
    stats: dict[str, object] = field(default_factory=dict)


class SearchUnavailable(Exception):
    """The engine cannot be reached or cannot answer: callers report `search_unavailable`."""


class SearchIndex(Protocol):
    """What retrieval and ingestion need from a search engine."""

    engine: str

    def upsert_document(self, kb_id: str, document_id: str, chunks: Sequence[ChunkRecord]) -> None:
        """Replace every chunk of one document with `chunks` (atomically where the engine can)."""

    def delete_document(self, kb_id: str, document_id: str) -> int:
        """Remove every chunk of one document; returns how many were removed."""

    def delete_kb(self, kb_id: str) -> None:
        """Remove every chunk of one knowledge base."""

    def search(
        self,
        *,
        query: str,
        vector: Vector | None,
        filter: SearchFilter,
        limit: int,
        mode: SearchMode = "hybrid",
        fusion: FusionConfig = FusionConfig(),
        candidates: int | None = None,
    ) -> SearchResult:
        """Ranked chunks admitted by `filter`. `candidates` is the per-side pool before fusion."""

    def get_chunks(self, ref_ids: Sequence[str]) -> dict[str, ChunkRecord]:
        """The chunks that exist among `ref_ids` (without vectors); unknown ids are absent."""

    def count(self, kb_id: str | None = None, document_id: str | None = None) -> int:
        """How many chunks are indexed (in one knowledge base, or one document)."""

    def close(self) -> None:
        """Release files and writers."""
