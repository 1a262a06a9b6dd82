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


# Children of one parent overlap (the chunker repeats ~50-100 characters); a shorter common
# suffix/prefix is taken for coincidence, not overlap, so the two texts are joined whole.
MIN_OVERLAP_CHARS = 16
# A parent's text searched as each child's context is capped around the child: the chunker's parents
# are at most ~5,000 characters, but a caller could send one parent with thousands of children.
MAX_CONTEXT_CHARS = 6000


def _overlap(left: str, right: str) -> int:
    """Length of the longest suffix of `left` that is a prefix of `right` (0 below MIN_OVERLAP_CHARS)."""
    limit = min(len(left), len(right))
    if limit < MIN_OVERLAP_CHARS:
        return 0
    head = right[:MIN_OVERLAP_CHARS]
    start = len(left) - limit
    while True:
        found = left.find(head, start)
        if found < 0 or len(left) - found < MIN_OVERLAP_CHARS:
            return 0
        if right.startswith(left[found:]):
            return len(left) - found
        start = found + 1


def parent_contexts(chunks: Sequence[ChunkRecord]) -> dict[str, str]:
    """Each chunk's parent text (ref_id -> text), rebuilt from the children of that parent.

    The lexical side scores a child by its own text and by its parent's: evidence for a query is
    often spread over a section, and BM25 over ~500-character pieces misses it (SciFact dev nDCG@10
    .63 for children alone against .66 for whole abstracts). Children are the only text the index
    receives, so the parent is rebuilt from them: ordered by position, overlaps removed. A chunk
    without a parent_id is its own context. Both engines index the result the same way.
    """
    groups: dict[str, list[ChunkRecord]] = {}
    contexts: dict[str, str] = {}
    for chunk in chunks:
        if chunk.parent_id:
            groups.setdefault(chunk.parent_id, []).append(chunk)
        else:
            contexts[chunk.ref_id] = chunk.text
    for members in groups.values():
        members.sort(key=lambda c: (c.position, c.ref_id))
        parts: list[str] = []
        starts: list[int] = []
        length = 0
        previous = ""
        for chunk in members:
            cut = _overlap(previous, chunk.text) if previous else 0
            if previous and not cut:
                parts.append("\n")
                length += 1
            starts.append(length - cut)
            parts.append(chunk.text[cut:])
            length += len(chunk.text) - cut
            previous = chunk.text
        text = "".join(parts)
        for chunk, start in zip(members, starts, strict=True):
            if len(text) <= MAX_CONTEXT_CHARS:
                contexts[chunk.ref_id] = text
            else:  # the window of the parent centred on the child
                centre = start + len(chunk.text) // 2
                lo = max(0, min(centre - MAX_CONTEXT_CHARS // 2, len(text) - MAX_CONTEXT_CHARS))
                contexts[chunk.ref_id] = text[lo : lo + MAX_CONTEXT_CHARS]
    return contexts


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
        return self.admits_source(chunk.kb_id, chunk.source_name, chunk.project, chunk.path, chunk.version)

    def admits_source(self, kb_id: str, source_name: str, project: str, path: str, version: str) -> bool:
        """The same predicate over a document's fields: a document is in scope exactly when its
        chunks are (they carry its project, path and version)."""
        if kb_id not in self.kb_ids:
            return False
        if self.source_names is not None and source_name not in self.source_names:
            return False
        if self.projects is not None and project not in self.projects:
            return False
        if self.versions is not None and version not in self.versions:
            return False
        if self.path_prefixes is not None:
            return any(path.startswith(prefix) for prefix in self.path_prefixes)
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
class LexicalFields:
    """BM25 boosts of the lexical fields; a chunk's lexical score is the boosted sum over them.

    `text` is the chunk's own text, `title` its document's title, `context` its parent's text (see
    `parent_contexts`). Tuned on SciFact dev (benchmarks/tune_fusion.py); both engines apply them.
    `heading` is the chunk's section heading, searched for the identifiers a query names only (the
    entry of `-O`, `work_mem`, `os.path.join` in a reference manual names what the chunk is about,
    where the text may only mention it). On the python and git manuals' dev halves, searching
    headings for every word of the question cost 4 answers of 60 at 1.0 and 1 at 0.3 (headings such
    as "Defaults" drew "what is the default ..."); for identifiers only it cost none. The other
    sets' corpora have no headings.
    """

    text: float = 1.0
    title: float = 0.5
    context: float = 1.0
    heading: float = 1.0

    def __post_init__(self) -> None:
        boosts = (self.text, self.title, self.context, self.heading)
        if min(boosts) < 0 or max(boosts) <= 0:
            raise ValueError("lexical boosts must be >= 0, and one of them > 0")


@dataclass(frozen=True)
class Hit:
    """One ranked chunk. From an engine, `score` is engine-native (see the module docstring); from
    `citegate.knowledge.retrieval.retrieve` it is the relevance estimate of
    `citegate.knowledge.search.relevance` (absolute, in [0, 1]) and the engine's score is kept in
    `fused_score`. `lexical_score` is BM25, `dense_score` the cosine (None when that side did not
    return the chunk), `coverage` the share of the query's content terms in the chunk (set by
    `retrieve`)."""

    chunk: ChunkRecord
    score: float
    lexical_score: float | None = None
    dense_score: float | None = None
    fused_score: float | None = None
    coverage: float | None = None


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
        """The chunks that exist among `ref_ids` (without vectors); unknown ids are absent.
        Unscoped: callers serving a request use `chunks_in`, which takes the caller's filter."""

    def count(self, kb_id: str | None = None, document_id: str | None = None) -> int:
        """How many chunks are indexed (in one knowledge base, or one document)."""

    def document_chunks(self, kb_id: str, document_id: str, limit: int) -> list[ChunkRecord]:
        """The chunks of one document in reading order (without vectors), at most `limit`.
        Unscoped, like `get_chunks`: a caller serving a request filters them with its scope."""

    def close(self) -> None:
        """Release files and writers."""


def chunks_in(index: SearchIndex, filter: SearchFilter, ref_ids: Sequence[str]) -> dict[str, ChunkRecord]:
    """The chunks among `ref_ids` that `filter` admits: a ref outside the caller's scope reads
    exactly like one that does not exist."""
    return {ref: chunk for ref, chunk in index.get_chunks(ref_ids).items() if filter.admits(chunk)}
