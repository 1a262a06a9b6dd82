from __future__ import annotations

from typing import Literal

from pydantic import Field

from citegate.platform.schemas import StrictModel


class CredentialRequest(StrictModel):
    kind: Literal["token", "caller_key"] = "token"
    description: str = Field("", max_length=200)
