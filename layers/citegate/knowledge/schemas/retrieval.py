"""Retrieve, ask and resolve_refs requests and responses (spec 004; PRODUCT.md decisions)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from citegate.platform.schemas import StrictModel

MAX_TOP_K = 50


class RetrieveRequest(StrictModel):
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(8, ge=1, le=MAX_TOP_K)
    score_threshold: float | None = Field(None, ge=0.0)
    source_names: list[str] | None = Field(None, min_length=1, max_length=200)


class AskRequest(StrictModel):
    question: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(8, ge=1, le=MAX_TOP_K)
    score_threshold: float | None = Field(None, ge=0.0)
    source_names: list[str] | None = Field(None, min_length=1, max_length=200)
    max_context_parents: int = Field(4, ge=1, le=10)


class ResolveRefsRequest(StrictModel):
    ref_ids: list[str] = Field(min_length=1, max_length=200)


class RetrievedChunk(BaseModel):
    """One hit. Hits come in rank order, the order of `rank_score` (the engine's fused score, which
    ranks best but is relative to the query); `score` is the absolute relevance estimate in [0, 1]
    that `score_threshold` filters on, so it need not decrease down the list."""

    ref_id: str
    chunk_text: str
    score: float = Field(description="absolute relevance estimate in [0, 1], comparable across queries")
    rank_score: float | None = Field(
        None, description="what the order follows: the fused score (min-max: [0, 1] within this query)"
    )


class RetrieveResponse(BaseModel):
    results: list[RetrievedChunk]
    stats: dict[str, Any]


class Citation(BaseModel):
    """A ref resolved for display: where the passage lives and how to link to it."""

    ref_id: str
    kb_id: str
    source_name: str
    document_id: str
    parent_id: str
    page_hint: int | None = None
    snippet: str
    title: str = ""
    heading: str = ""
    path: str = ""
    url: str = ""
    anchor: str = ""
    project: str = ""
    version: str = ""


class AskCitation(Citation):
    """A citation of an `ask` answer: the citation `resolve_refs` returns for the ref, plus the
    answer's sentences bound to it (those carrying its `[n]` marker, markers left out)."""

    answer_sentences: list[str] = Field(default_factory=list)


class ResolveRefsResponse(BaseModel):
    citations: list[Citation]
    missing: list[str]


class AskResponse(BaseModel):
    answer: str
    used_refs: list[str]
    citations: list[AskCitation]
    no_answer: bool
    no_answer_reason: str | None = None
    stats: dict[str, Any]
