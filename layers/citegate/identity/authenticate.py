"""Who is calling, from the credentials of the token front door (what the Lambda authorizer runs).

- `Authorization: Bearer <RAG_API_TOKEN>`: the spec 004 service principal.
- `Authorization: Bearer cgat_...`: an agent token (stored only as a hash, revocable).
- `Authorization: Bearer <JWT>`: a person, verified against the OIDC provider's JWKS.
- `X-Caller-Agent-Key: cgak_...`: spec 002's caller agent key, identifying an agent.
- Nothing: an anonymous caller (public-read where a route allows it).
SigV4 callers come through the IAM front door instead (citegate.identity.resolve).
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from citegate.identity.principal import Principal, anonymous
from citegate.settings import Settings

if TYPE_CHECKING:
    from citegate.policy.store import PolicyStore

AGENT_TOKEN_PREFIX = "cgat_"
CALLER_KEY_PREFIX = "cgak_"
CALLER_KEY_HEADER = "x-caller-agent-key"


@dataclass(frozen=True)
class AuthResult:
    principal: Principal | None
    error: str | None = None  # why credentials were refused; None when they were fine or absent


def header(headers: Mapping[str, str], name: str) -> str | None:
    name = name.lower()
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


_verifiers: dict[tuple[str, str, str | None], Any] = {}
_verifiers_lock = threading.Lock()


def _jwt_verifier(settings: Settings) -> Any:
    from citegate.identity.jwt_verify import JwksJwtVerifier

    assert settings.oidc_issuer and settings.oidc_audience
    key = (settings.oidc_issuer, settings.oidc_audience, settings.oidc_jwks_url)
    with _verifiers_lock:
        if key not in _verifiers:  # one verifier per issuer keeps its JWKS cache across calls
            _verifiers[key] = JwksJwtVerifier(
                settings.oidc_issuer, settings.oidc_audience, jwks_url=settings.oidc_jwks_url
            )
        return _verifiers[key]


def agent_from_secret(secret: str, kind: str, policies: PolicyStore) -> AuthResult:
    record = policies.agent_for_secret(secret, kind)
    if record is None:
        what = "agent token" if kind == "token" else "caller agent key"
        return AuthResult(None, f"the {what} is not valid or was revoked")
    return AuthResult(
        Principal(
            type="agent",
            id=str(record["agent_id"]),
            tenant_id=str(record["tenant_id"]),
            claims={"auth": kind, "credential_id": record["credential_id"]},
        )
    )


def authenticate(
    headers: Mapping[str, str], settings: Settings, policies: PolicyStore | None = None
) -> AuthResult:
    authorization = header(headers, "authorization")
    caller_key = header(headers, CALLER_KEY_HEADER)
    if not authorization:
        if caller_key and policies is not None:
            return agent_from_secret(caller_key.strip(), "caller_key", policies)
        return AuthResult(anonymous(settings.default_tenant))
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        return AuthResult(None, "the Authorization header must be 'Bearer <token>'")

    from citegate.secrets import secret_value

    expected = secret_value(settings.api_token, settings.api_token_secret_arn)
    # Constant-time comparison: the token is a shared secret.
    if expected and hmac.compare_digest(credential.encode(), expected.encode()):
        return AuthResult(
            Principal(type="service", id=settings.service_principal_id, tenant_id=settings.default_tenant)
        )
    if credential.startswith(AGENT_TOKEN_PREFIX) and policies is not None:
        return agent_from_secret(credential, "token", policies)
    if settings.oidc_issuer and settings.oidc_audience:
        from citegate.identity.jwt_verify import JwtError, looks_like_jwt

        if looks_like_jwt(credential):
            try:
                claims = _jwt_verifier(settings).verify(credential)
            except JwtError as error:
                return AuthResult(None, f"the identity token was refused: {error.reason}")
            tenant = str(claims.get("tenant_id") or claims.get("tid") or settings.default_tenant)
            return AuthResult(Principal(type="human", id=str(claims["sub"]), tenant_id=tenant, claims=claims))
    return AuthResult(None, "the bearer token is not valid")
