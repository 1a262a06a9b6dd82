"""Retrieve, ask and resolve_refs requests and responses (spec 004; PRODUCT.md decisions)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from citegate.models.common import StrictModel

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
    ref_id: str
    chunk_text: str
    score: float


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


class ResolveRefsResponse(BaseModel):
    citations: list[Citation]
    missing: list[str]


class AskResponse(BaseModel):
    answer: str
    used_refs: list[str]
    citations: list[Citation]
    no_answer: bool
    no_answer_reason: str | None = None
    stats: dict[str, Any]
