"""Who is calling: the one hook every front door uses to turn credentials into a principal.

Today: spec 004's bearer token (a configured service principal) and anonymous callers. The
identity issue adds JWTs, SigV4 agents, agent tokens and spec 002's caller agent key here.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from citegate.identity.principal import Principal, anonymous
from citegate.settings import Settings


@dataclass(frozen=True)
class AuthResult:
    principal: Principal | None
    error: str | None = None  # why credentials were refused; None when they were fine or absent


def _header(headers: Mapping[str, str], name: str) -> str | None:
    name = name.lower()
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def authenticate(headers: Mapping[str, str], settings: Settings) -> AuthResult:
    authorization = _header(headers, "authorization")
    if not authorization:
        return AuthResult(anonymous(settings.default_tenant))
    scheme, _, credential = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return AuthResult(None, "the Authorization header must be 'Bearer <token>'")
    expected = settings.api_token.get_secret_value() if settings.api_token else None
    # Constant-time comparison: the token is a shared secret.
    if expected and hmac.compare_digest(credential.strip().encode(), expected.encode()):
        return AuthResult(
            Principal(type="service", id=settings.service_principal_id, tenant_id=settings.default_tenant)
        )
    return AuthResult(None, "the bearer token is not valid")
