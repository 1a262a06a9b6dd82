"""Spec 002's governed knowledge entry: the request business agents send and the result shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class KnowledgeMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    caller_agent_key: str | None = None
    caller_agent_id: str | None = None


class KnowledgeOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    top_k: int = Field(5, ge=1, le=50)
    include_graph: bool = False  # accepted for compatibility; citegate has no graph store


class KnowledgeQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=4000)
    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    knowledge_bases: list[str] | None = None
    metadata: KnowledgeMetadata = Field(default_factory=KnowledgeMetadata)
    options: KnowledgeOptions = Field(default_factory=KnowledgeOptions)


class KnowledgeResult(BaseModel):
    content: str
    source: str
    score: float
    metadata: dict[str, Any]
