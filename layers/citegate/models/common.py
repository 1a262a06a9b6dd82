from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Request models refuse unknown fields, so a typo is a 400 naming it, not a silent default."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
