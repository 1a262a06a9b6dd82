"""Knowledge-base requests and records (spec 004; shapes decided in PRODUCT.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from citegate.platform.schemas import StrictModel

KbStatus = Literal["working", "approved"]
KB_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class CreateKbRequest(StrictModel):
    kb_id: str | None = Field(None, pattern=KB_ID_PATTERN)
    name: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=2000)
    status: KbStatus = "working"
    tenant_id: str | None = Field(None, min_length=1, max_length=64)


class UpdateKbRequest(StrictModel):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    status: KbStatus | None = None


class KnowledgeBase(BaseModel):
    kb_id: str
    tenant_id: str
    name: str
    description: str = ""
    status: KbStatus = "working"
    document_count: int = 0
    created_at: str
    updated_at: str
