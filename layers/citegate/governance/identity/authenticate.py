"""Who is calling, from the credentials of the token front door (what the Lambda authorizer runs).

- `Authorization: Bearer <RAG_API_TOKEN>`: the spec 004 service principal.
- `Authorization: Bearer cgat_...`: an agent token (stored only as a hash, revocable).
- `Authorization: Bearer <JWT>`: a person, verified against the OIDC provider's JWKS.
- `X-Caller-Agent-Key: cgak_...`: spec 002's caller agent key, identifying an agent.
- Cookie `citegate_token` (CITEGATE_AUTH_COOKIE) holding any of the bearer credentials above, for
  pages in a browser (spec 001 9.1); the Authorization header wins when both are sent.
- Nothing: an anonymous caller (public-read where a route allows it).
SigV4 callers come through the IAM front door instead (citegate.governance.identity.resolve).

With a `cache` (the authorizer passes citegate.governance.identity.credential_cache.CREDENTIALS), accepted
agent credentials and JWTs are remembered for at most 60 s; that module says what is kept and why
revocation still applies within that bound.

Cross-site request forgery: a browser attaches cookies to requests that other sites trigger, so a
cookie-authenticated request that can change state (any method but GET, HEAD, OPTIONS) must come
from an allowed page: its `Origin` (or, without one, its `Referer`) must be the API's own origin
or one of CITEGATE_ALLOWED_ORIGINS. Otherwise it is refused with 403, whatever the cookie holds.
Bearer, caller-key and SigV4 requests are not affected: a browser never adds those on its own.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from citegate.platform.principal import Principal, anonymous
from citegate.platform.settings import Settings

if TYPE_CHECKING:
    from citegate.governance.identity.credential_cache import CredentialCache
    from citegate.governance.policy.store import PolicyStore

AGENT_TOKEN_PREFIX = "cgat_"
CALLER_KEY_PREFIX = "cgak_"
CALLER_KEY_HEADER = "x-caller-agent-key"
DEFAULT_AUTH_COOKIE = "citegate_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class AuthResult:
    principal: Principal | None
    error: str | None = None  # why credentials were refused; None when they were fine or absent
    status: int = 401  # 403 for a refused cross-site cookie request


def header(headers: Mapping[str, str], name: str) -> str | None:
    name = name.lower()
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


_verifiers: dict[tuple[str, str, str | None], Any] = {}
_verifiers_lock = threading.Lock()


def _jwt_verifier(settings: Settings) -> Any:
    from citegate.governance.identity.jwt_verify import JwksJwtVerifier

    assert settings.oidc_issuer and settings.oidc_audience
    key = (settings.oidc_issuer, settings.oidc_audience, settings.oidc_jwks_url)
    with _verifiers_lock:
        if key not in _verifiers:  # one verifier per issuer keeps its JWKS cache across calls
            _verifiers[key] = JwksJwtVerifier(
                settings.oidc_issuer, settings.oidc_audience, jwks_url=settings.oidc_jwks_url
            )
        return _verifiers[key]


def agent_from_secret(
    secret: str, kind: str, policies: PolicyStore, cache: CredentialCache | None = None
) -> AuthResult:
    from citegate.governance.identity.credential_cache import digest

    # An agent's principal is its credential record's alone: no setting shapes it, so no scope.
    key = digest(secret) if cache is not None else ""
    if cache is not None and (known := cache.get(kind, key, None)) is not None:
        return AuthResult(known)
    record = policies.agent_for_secret(secret, kind)
    if record is None:
        what = "agent token" if kind == "token" else "caller agent key"
        return AuthResult(None, f"the {what} is not valid or was revoked")
    principal = Principal(
        type="agent",
        id=str(record["agent_id"]),
        tenant_id=str(record["tenant_id"]),
        claims={"auth": kind, "credential_id": record["credential_id"]},
    )
    if cache is not None:
        cache.put(kind, key, None, principal)
    return AuthResult(principal)


def cookie(cookies: Iterable[str] | None, name: str) -> str | None:
    """A cookie's value from payload 2.0's `cookies` list (["a=1", "b=2"]); quotes and
    percent-encoding removed."""
    for entry in cookies or ():
        for pair in entry.split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key.strip() == name:
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] == '"':
                    value = value[1:-1]
                return unquote(value) or None
    return None


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def allowed_origins(settings: Settings) -> frozenset[str]:
    # getattr: the setting is added to Settings by the lead (CITEGATE_ALLOWED_ORIGINS, comma list).
    configured = str(getattr(settings, "allowed_origins", "") or "")
    origins = (_origin_of(item) for item in configured.split(","))
    return frozenset(origin for origin in origins if origin)


def cross_site_refusal(method: str | None, headers: Mapping[str, str], allowed: frozenset[str]) -> str | None:
    """Why a cookie-authenticated request is refused as cross-site, or None when it may proceed."""
    if (method or "GET").upper() in SAFE_METHODS:
        return None
    sent = header(headers, "origin")
    origin = None if sent is None or sent.strip().lower() == "null" else _origin_of(sent)
    if origin is None and sent is None:
        referer = header(headers, "referer")
        origin = _origin_of(referer) if referer else None
    if origin is None:
        return "a cookie-authenticated request that changes state must carry its page's Origin"
    # Host, not X-Forwarded-Host: a page cannot set Host, but it may try other headers.
    host = (header(headers, "host") or "").strip().lower()
    own = {f"https://{host}", f"http://{host}"} if host else set()
    if origin in allowed or origin in own:
        return None
    return f"cross-site request refused: the origin {origin} is not allowed to use the session cookie"


def authenticate(
    headers: Mapping[str, str],
    settings: Settings,
    policies: PolicyStore | None = None,
    *,
    cookies: Iterable[str] | None = None,
    method: str | None = None,
    cache: CredentialCache | None = None,
) -> AuthResult:
    authorization = header(headers, "authorization")
    caller_key = header(headers, CALLER_KEY_HEADER)
    if not authorization:
        if caller_key and policies is not None:
            return agent_from_secret(caller_key.strip(), "caller_key", policies, cache)
        name = str(getattr(settings, "auth_cookie", DEFAULT_AUTH_COOKIE) or DEFAULT_AUTH_COOKIE)
        from_cookie = cookie(cookies, name)
        if from_cookie is None:
            return AuthResult(anonymous(settings.default_tenant))
        refusal = cross_site_refusal(method, headers, allowed_origins(settings))
        if refusal is not None:
            return AuthResult(None, refusal, status=403)
        return bearer(from_cookie.strip(), settings, policies, cache)
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        return AuthResult(None, "the Authorization header must be 'Bearer <token>'")
    return bearer(credential, settings, policies, cache)


def bearer(
    credential: str, settings: Settings, policies: PolicyStore | None, cache: CredentialCache | None = None
) -> AuthResult:
    """The principal of a bearer credential: the spec 004 token, an agent token or a JWT."""
    from citegate.platform.secrets import secret_value

    expected = secret_value(settings.api_token, settings.api_token_secret_arn)
    # Constant-time comparison: the token is a shared secret. Never cached: this is the cheap check.
    if expected and hmac.compare_digest(credential.encode(), expected.encode()):
        return AuthResult(
            Principal(type="service", id=settings.service_principal_id, tenant_id=settings.default_tenant)
        )
    if credential.startswith(AGENT_TOKEN_PREFIX) and policies is not None:
        return agent_from_secret(credential, "token", policies, cache)
    if settings.oidc_issuer and settings.oidc_audience:
        from citegate.governance.identity.jwt_verify import looks_like_jwt

        if looks_like_jwt(credential):
            return _person(credential, settings, cache)
    return AuthResult(None, "the bearer token is not valid")


def _person(token: str, settings: Settings, cache: CredentialCache | None) -> AuthResult:
    """A person's JWT, verified against the issuer's JWKS (or remembered from a verification)."""
    from citegate.governance.identity.credential_cache import digest
    from citegate.governance.identity.jwt_verify import JwtError

    # The issuer, audience and default tenant decide whether and as whom a token is accepted.
    scope = (settings.oidc_issuer, settings.oidc_audience, settings.oidc_jwks_url, settings.default_tenant)
    key = digest(token) if cache is not None else ""
    if cache is not None and (known := cache.get("jwt", key, scope)) is not None:
        return AuthResult(known)
    try:
        claims = _jwt_verifier(settings).verify(token)
    except JwtError as error:
        return AuthResult(None, f"the identity token was refused: {error.reason}")
    tenant = str(claims.get("tenant_id") or claims.get("tid") or settings.default_tenant)
    principal = Principal(type="human", id=str(claims["sub"]), tenant_id=tenant, claims=claims)
    if cache is not None:
        exp = claims.get("exp")
        # Never past the token's own expiry (exp is required and numeric once verified).
        cache.put("jwt", key, scope, principal, not_after=float(exp) if isinstance(exp, int | float) else 0.0)
    return AuthResult(principal)
