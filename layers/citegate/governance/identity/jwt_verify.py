"""Verify people's JWTs from an OIDC provider against the provider's published keys (JWKS).

Signature checking and claim validation are joserfc's; this module decides which key may verify a
token and keeps the JWKS fresh without letting callers drive traffic to the issuer:

* Only asymmetric algorithms are ever accepted (RS256 and ES256 by default). The allow-list is
  checked on the token's header before any key is looked up, so ``alg: none`` and HS256 signed
  with a public key (the classic confusion attack) never reach a verifier.
* A key is chosen by ``kid`` and must suit the algorithm (RSA for RS*/PS*, EC on the right curve
  for ES*), be a signing key, and agree with its own ``alg`` when it declares one. A token without
  ``kid`` is accepted only when exactly one published key suits its algorithm.
* The JWKS is fetched lazily, cached for ``cache_seconds``, and fetched again at most once per
  ``min_refetch_seconds`` for a ``kid`` it does not know (key rotation) and after a failed fetch.
  If a refresh fails while keys are cached, the cached keys stay in use until the issuer answers.
* ``exp``, ``iss``, ``aud`` and ``sub`` are required; ``nbf`` and ``iat`` are honoured when present.

Fetching is synchronous (httpx, ``http_timeout`` per request, no redirects) and serialised by a
lock; an async gateway should call ``verify`` from a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import ECKey, RSAKey

log = logging.getLogger(__name__)

# Asymmetric algorithms this verifier knows how to match to a key; HS* and "none" are never among them.
_KEY_SHAPE: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
}
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")
_MAX_TOKEN_LENGTH = 16_384
_MAX_DOCUMENT_BYTES = 1_000_000
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}

JwkKey = RSAKey | ECKey


class JwtError(Exception):
    """A refused token; ``reason`` is short and safe to show the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _FetchError(Exception):
    pass


def _b64url_decode(segment: str) -> bytes:
    if not _SEGMENT.fullmatch(segment):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _decode_header(token: str) -> dict[str, Any] | None:
    """The JOSE header of a compact JWS, or None when the token is not shaped like one."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    try:
        header = json.loads(_b64url_decode(parts[0]))
        _b64url_decode(parts[1])
        _b64url_decode(parts[2])
    # JSONDecodeError and UnicodeDecodeError are ValueErrors; a header nested thousands of levels
    # deep (a forged token fits 6,000 in its 16 KB) exhausts the decoder's recursion instead.
    except (ValueError, binascii.Error, RecursionError):
        return None
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
        return None
    return header


def looks_like_jwt(token: str) -> bool:
    """Three base64url segments whose first decodes to a JSON object with ``alg``.

    Unsigned (``alg: none``) tokens count: they are JWTs, to be refused as such, not other credentials.
    """
    return len(token) <= _MAX_TOKEN_LENGTH and _decode_header(token) is not None


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str, *, allow_http: bool) -> None:
    parts = urlsplit(url)
    if not parts.hostname or parts.scheme not in ("https", "http"):
        raise ValueError(f"not an http(s) URL: {url!r}")
    # Keys fetched over plain HTTP could be swapped in transit; only loopback is exempt by default.
    if parts.scheme == "http" and not allow_http and not _is_loopback(parts.hostname):
        raise ValueError(f"JWKS and discovery URLs must use https (got {url!r})")


def _import_jwks(document: Any) -> tuple[dict[str, JwkKey], list[JwkKey]]:
    """Signing keys by kid, plus those without a kid. Keys that cannot verify signatures are skipped."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise _FetchError("the JWKS has no 'keys' list")
    by_kid: dict[str, JwkKey] = {}
    unnamed: list[JwkKey] = []
    for entry in document["keys"]:
        if not isinstance(entry, dict):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        ops = entry.get("key_ops")
        if isinstance(ops, list) and "verify" not in ops:
            continue
        kty = entry.get("kty")
        try:
            if kty == "RSA":
                key: JwkKey = RSAKey.import_key(entry)
            elif kty == "EC":
                key = ECKey.import_key(entry)
            else:
                continue
        except (JoseError, ValueError, TypeError) as exc:
            log.warning("skipping an unusable key in the JWKS (kid=%r): %s", entry.get("kid"), exc)
            continue
        kid = entry.get("kid")
        if isinstance(kid, str) and kid:
            by_kid.setdefault(kid, key)
        else:
            unnamed.append(key)
    return by_kid, unnamed


def _suits(key: JwkKey, alg: str) -> bool:
    kty, curve = _KEY_SHAPE[alg]
    if key.key_type != kty:
        return False
    if curve is not None and key.get("crv") != curve:
        return False
    declared = key.get("alg")
    return declared is None or declared == alg


class JwksJwtVerifier:
    """Verifies JWTs from one OIDC issuer for one or more audiences.

    ``http_client`` lets callers share one httpx client (and its TLS set-up) between verifiers.
    ``clock`` (wall time, for exp/nbf/iat) and ``timer`` (monotonic, for caching) are test hooks.
    """

    def __init__(
        self,
        issuer: str,
        audience: str | Sequence[str],
        jwks_url: str | None = None,
        *,
        algorithms: Sequence[str] = ("RS256", "ES256"),
        leeway_seconds: int = 30,
        cache_seconds: float = 300,
        http_timeout: float = 3.0,
        min_refetch_seconds: float = 10.0,
        allow_http: bool = False,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if not issuer:
            raise ValueError("issuer is required")
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not all(isinstance(a, str) and a for a in audiences):
            raise ValueError("at least one non-empty audience is required")
        unknown = [a for a in algorithms if a not in _KEY_SHAPE]
        if unknown or not algorithms:
            raise ValueError(f"only asymmetric JWS algorithms are allowed, not {unknown or 'none'}")
        _check_url(issuer, allow_http=allow_http)
        if jwks_url is not None:
            _check_url(jwks_url, allow_http=allow_http)

        self.issuer = issuer
        self.audiences = tuple(audiences)
        self.algorithms = tuple(algorithms)
        self._leeway = int(leeway_seconds)
        self._cache_seconds = cache_seconds
        self._http_timeout = http_timeout
        self._min_refetch = min_refetch_seconds
        self._allow_http = allow_http
        self._http = http_client  # created on first fetch when not given; reused for every fetch
        self._owns_http = http_client is None
        self._clock = clock
        self._timer = timer

        self._jwks_url = jwks_url
        self._lock = threading.Lock()
        self._by_kid: dict[str, JwkKey] | None = None
        self._unnamed: list[JwkKey] = []
        self._fetched_at = 0.0
        self._last_failure: float | None = None
        self._last_kid_refetch: float | None = None

    def close(self) -> None:
        """Close the HTTP client this verifier created (a client passed in is the caller's to close)."""
        if self._owns_http and self._http is not None:
            self._http.close()
            self._http = None

    # --- verification -------------------------------------------------------------------------------

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or JwtError with a short reason."""
        if len(token) > _MAX_TOKEN_LENGTH:
            raise JwtError("malformed token")
        header = _decode_header(token)
        if header is None:
            raise JwtError("malformed token")
        alg = header["alg"]
        # Before any key is touched: this is what stops "none" and HS256-with-a-public-key.
        if alg not in self.algorithms:
            raise JwtError("unsupported algorithm")
        kid = header.get("kid")
        if kid is not None and (not isinstance(kid, str) or not kid):
            raise JwtError("malformed token")

        key = self._key_for(kid, alg)
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except BadSignatureError:
            raise JwtError("bad signature") from None
        except JoseError:
            raise JwtError("malformed token") from None
        claims = decoded.claims
        self._validate_claims(claims)
        return claims

    def _validate_claims(self, claims: dict[str, Any]) -> None:
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()),
            leeway=self._leeway,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "values": list(self.audiences)},
            exp={"essential": True},
            sub={"essential": True},  # the principal id: a token naming nobody is refused here
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise JwtError("expired") from None
        except MissingClaimError as exc:
            missing = set(exc.claim.split(","))
            reason = "wrong issuer" if "iss" in missing else "wrong audience" if "aud" in missing else None
            raise JwtError(reason or "missing required claim") from None
        except InvalidClaimError as exc:
            raise JwtError(_CLAIM_REASONS.get(exc.claim, "invalid claims")) from None

    # --- keys ---------------------------------------------------------------------------------------

    def _key_for(self, kid: str | None, alg: str) -> JwkKey:
        with self._lock:
            now = self._timer()
            refreshed = False
            if self._by_kid is None or now - self._fetched_at >= self._cache_seconds:
                refreshed = self._refresh(now)
            found, known = self._lookup(kid, alg)
            if found is None and not known and not refreshed and self._may_refetch_for_kid(now):
                # An unknown kid is most likely a rotation: look once, then not again for a while.
                self._last_kid_refetch = now
                self._refresh(now)
                found, known = self._lookup(kid, alg)
        if found is None:
            raise JwtError("unknown key")
        return found

    def _lookup(self, kid: str | None, alg: str) -> tuple[JwkKey | None, bool]:
        """(usable key, whether the kid is published at all): a known kid of the wrong type is no rotation."""
        by_kid = self._by_kid or {}
        if kid is not None:
            key = by_kid.get(kid)
            if key is None:
                return None, False
            return (key if _suits(key, alg) else None), True
        candidates = [k for k in [*by_kid.values(), *self._unnamed] if _suits(k, alg)]
        return (candidates[0] if len(candidates) == 1 else None), bool(candidates)

    def _may_refetch_for_kid(self, now: float) -> bool:
        last = self._last_kid_refetch
        return last is None or now - last >= self._min_refetch

    def _refresh(self, now: float) -> bool:
        """Fetch the JWKS (caller holds the lock); True when fresh keys arrived.

        Keeps the cached keys when the issuer does not answer, and raises only when there are none.
        """
        if self._last_failure is not None and now - self._last_failure < self._min_refetch:
            if self._by_kid is None:
                raise JwtError("issuer unreachable")
            return False
        try:
            by_kid, unnamed = _import_jwks(self._get_json(self._resolve_jwks_url()))
        except _FetchError as exc:
            self._last_failure = now
            log.warning("could not fetch the JWKS for issuer %s: %s", self.issuer, exc)
            if self._by_kid is None:
                raise JwtError("issuer unreachable") from None
            return False
        self._by_kid, self._unnamed = by_kid, unnamed
        self._fetched_at = now
        self._last_failure = None
        return True

    def _resolve_jwks_url(self) -> str:
        if self._jwks_url is None:
            url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
            document = self._get_json(url)
            if not isinstance(document, Mapping):
                raise _FetchError("the discovery document is not a JSON object")
            # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer we asked.
            if document.get("issuer") != self.issuer:
                raise _FetchError(f"the discovery document names issuer {document.get('issuer')!r}")
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise _FetchError("the discovery document has no jwks_uri")
            try:
                _check_url(jwks_uri, allow_http=self._allow_http)
            except ValueError as exc:
                raise _FetchError(str(exc)) from None
            self._jwks_url = jwks_uri
        return self._jwks_url

    def _get_json(self, url: str) -> Any:
        if self._http is None:
            self._http = httpx.Client()
        try:
            response = self._http.get(
                url,
                timeout=self._http_timeout,
                follow_redirects=False,
                headers={"Accept": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise _FetchError(f"{type(exc).__name__} from {url}") from None
        if response.status_code != 200:
            raise _FetchError(f"HTTP {response.status_code} from {url}")
        if len(response.content) > _MAX_DOCUMENT_BYTES:
            raise _FetchError(f"oversized response from {url}")
        try:
            return json.loads(response.content)
        except ValueError:
            raise _FetchError(f"invalid JSON from {url}") from None


_CLAIM_REASONS = {
    "iss": "wrong issuer",
    "aud": "wrong audience",
    "nbf": "not yet valid",
    "iat": "not yet valid",
    "exp": "malformed token",  # present but not a number; a past exp raises ExpiredTokenError
}
