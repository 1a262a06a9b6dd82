"""Spec 003's `/api/v2/query` request, and the event shapes it streams (for the OpenAPI document)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class QueryV2Body(BaseModel):
    """Spec 003 asks only for `query`; the rest are optional narrowing and choices."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=4000, description="the user's question")
    top_k: int = Field(5, ge=1, le=20, description="passages per retrieve_knowledge call")
    model_id: str | None = Field(None, max_length=200, description="a model from GET /api/v1/agent/models")
    include_working_docs: bool = Field(
        False, description="also search working knowledge bases, where the caller's policy allows it"
    )


class QueryV2Event(BaseModel):
    """One `data:` line of the stream; `message_type` is spec 003's code."""

    message_type: int = Field(
        description="201 status, 301/302 tool call, 1 content, 204 references, 0 end, 22 error"
    )
    content: Any = None
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
