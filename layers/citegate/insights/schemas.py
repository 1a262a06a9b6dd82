"""The bodies of the insights routes (citegate.api.openapi documents them from here)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FixBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fixed: bool = True  # false takes the mark off
    note: str | None = Field(None, max_length=2000)
    recheck: bool = True  # ask the group's questions again now


class TaskBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, max_length=300)
    description: str | None = Field(None, max_length=8000)
    idempotencyKey: str | None = Field(None, min_length=1, max_length=200)
