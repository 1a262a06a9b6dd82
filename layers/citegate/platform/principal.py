"""Every request resolves to one principal before its handler runs (PRODUCT.md, "Principals")."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

PrincipalType = Literal["human", "agent", "service", "anonymous"]


class Principal(BaseModel):
    type: PrincipalType
    id: str
    tenant_id: str
    claims: dict[str, Any] = Field(default_factory=dict)

    @property
    def authenticated(self) -> bool:
        return self.type != "anonymous"

    def to_authorizer_context(self) -> dict[str, str]:
        """Flat string values: what an API Gateway Lambda authorizer may hand to the integration."""
        return {
            "principal_type": self.type,
            "principal_id": self.id,
            "tenant_id": self.tenant_id,
            "claims": json.dumps(self.claims, separators=(",", ":"), sort_keys=True),
        }

    @classmethod
    def from_authorizer_context(cls, context: dict[str, Any]) -> Principal | None:
        if not context or "principal_type" not in context:
            return None
        claims = context.get("claims") or "{}"
        return cls(
            type=context["principal_type"],
            id=context["principal_id"],
            tenant_id=context["tenant_id"],
            claims=json.loads(claims) if isinstance(claims, str) else dict(claims),
        )


def anonymous(tenant_id: str) -> Principal:
    return Principal(type="anonymous", id="anonymous", tenant_id=tenant_id)
