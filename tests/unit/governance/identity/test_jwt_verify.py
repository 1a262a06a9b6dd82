"""JwksJwtVerifier against a real (loopback) OIDC issuer serving discovery and a JWKS."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from tests.support.oidc_issuer import (
    DISCOVERY_PATH,
    JWKS_PATH,
    OidcIssuer,
    b64url,
    new_ec_key,
    new_rsa_key,
    sign_jws,
)

from citegate.governance.identity.jwt_verify import JwksJwtVerifier, JwtError, looks_like_jwt

AUDIENCE = "citegate-api"
# Generated once: RSA key generation is the slow part of these tests.
RSA_KEYS = [new_rsa_key() for _ in range(3)]
EC_KEY = new_ec_key()


# One client for every verifier here: creating its TLS context is the slow part of a fetch.
HTTP = httpx.Client()


class FakeTimer:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def running_issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer(key=RSA_KEYS[0]) as running:
        yield running


@pytest.fixture
def issuer(running_issuer: OidcIssuer) -> OidcIssuer:
    running_issuer.reset(key=RSA_KEYS[0])
    return running_issuer


@pytest.fixture
def timer() -> FakeTimer:
    return FakeTimer()


def verifier_for(issuer: OidcIssuer, timer: FakeTimer | None = None, **options: Any) -> JwksJwtVerifier:
    return JwksJwtVerifier(issuer.url, AUDIENCE, timer=timer or FakeTimer(), http_client=HTTP, **options)


def reason(verifier: JwksJwtVerifier, token: str) -> str:
    with pytest.raises(JwtError) as caught:
        verifier.verify(token)
    return caught.value.reason


def _segments(token: str) -> list[str]:
    return token.split(".")


def _decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


# --- valid tokens -----------------------------------------------------------------------------------


def test_valid_token_via_discovery(issuer: OidcIssuer) -> None:
    verifier = verifier_for(issuer)
    claims = verifier.verify(issuer.issue("alice", audience=AUDIENCE, claims={"tenant": "acme"}))
    assert claims["sub"] == "alice"
    assert claims["tenant"] == "acme"
    assert claims["iss"] == issuer.url
    verifier.verify(issuer.issue("bob", audience=AUDIENCE))
    assert issuer.requests == {DISCOVERY_PATH: 1, JWKS_PATH: 1}  # cached after the first token


def test_valid_token_with_a_given_jwks_url(issuer: OidcIssuer) -> None:
    verifier = JwksJwtVerifier(issuer.url, [AUDIENCE, "other"], issuer.jwks_url, http_client=HTTP)
    token = issuer.issue("alice", audience=["someone-else", AUDIENCE])
    assert verifier.verify(token)["sub"] == "alice"
    assert issuer.requests == {JWKS_PATH: 1}


def test_es256_token(issuer: OidcIssuer) -> None:
    kid = issuer.rotate(key=EC_KEY)
    token = issuer.issue("alice", audience=AUDIENCE)
    assert json.loads(_decode(_segments(token)[0])) == {"alg": "ES256", "typ": "JWT", "kid": kid}
    assert verifier_for(issuer).verify(token)["sub"] == "alice"


def test_token_without_kid_when_one_key_fits(issuer: OidcIssuer) -> None:
    claims = issuer.claims_for("alice", audience=AUDIENCE)
    token = sign_jws({"alg": "RS256", "typ": "JWT"}, claims, RSA_KEYS[0])
    verifier = verifier_for(issuer)
    assert verifier.verify(token)["sub"] == "alice"
    issuer.rotate(key=RSA_KEYS[1])  # now two RSA keys could have signed it: refuse to guess
    assert reason(verifier_for(issuer), token) == "unknown key"


def test_clock_skew_within_leeway(issuer: OidcIssuer) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, expires_in=-10)
    assert verifier_for(issuer).verify(token)["sub"] == "alice"


# --- refused tokens ---------------------------------------------------------------------------------


def test_expired(issuer: OidcIssuer) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, expires_in=-120)
    assert reason(verifier_for(issuer), token) == "expired"


@pytest.mark.parametrize("claim", ["exp", "sub"])
def test_expiry_and_subject_are_required(issuer: OidcIssuer, claim: str) -> None:
    claims = issuer.claims_for("alice", audience=AUDIENCE)
    del claims[claim]
    token = sign_jws({"alg": "RS256", "kid": issuer.current.kid}, claims, RSA_KEYS[0])
    assert reason(verifier_for(issuer), token) == "missing required claim"


def test_not_yet_valid(issuer: OidcIssuer) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, claims={"nbf": int(time.time()) + 600})
    assert reason(verifier_for(issuer), token) == "not yet valid"


def test_wrong_audience(issuer: OidcIssuer) -> None:
    verifier = verifier_for(issuer)
    assert reason(verifier, issuer.issue("alice", audience="another-api")) == "wrong audience"
    assert reason(verifier, issuer.issue("alice", audience=["a", "b"])) == "wrong audience"
    no_aud = issuer.claims_for("alice", audience=AUDIENCE)
    del no_aud["aud"]
    token = sign_jws({"alg": "RS256", "kid": issuer.current.kid}, no_aud, RSA_KEYS[0])
    assert reason(verifier, token) == "wrong audience"


def test_wrong_issuer(issuer: OidcIssuer) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, claims={"iss": "https://evil.example"})
    assert reason(verifier_for(issuer), token) == "wrong issuer"


def test_tampered_payload(issuer: OidcIssuer) -> None:
    header, payload, signature = _segments(issuer.issue("alice", audience=AUDIENCE))
    claims = json.loads(_decode(payload))
    claims["sub"] = "admin"
    forged = f"{header}.{b64url(json.dumps(claims).encode())}.{signature}"
    assert reason(verifier_for(issuer), forged) == "bad signature"


def test_signed_by_a_key_the_issuer_does_not_publish(issuer: OidcIssuer) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, key=RSA_KEYS[2], kid=issuer.current.kid)
    assert reason(verifier_for(issuer), token) == "bad signature"


def test_alg_none_is_refused(issuer: OidcIssuer) -> None:
    claims = issuer.claims_for("alice", audience=AUDIENCE)
    header = {"alg": "none", "typ": "JWT", "kid": issuer.current.kid}
    token = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}."
    assert looks_like_jwt(token)
    assert reason(verifier_for(issuer), token) == "unsupported algorithm"
    assert issuer.requests == {}  # refused before any key was needed


@pytest.mark.parametrize("public_form", ["pem", "der", "jwk"])
def test_hs256_signed_with_the_public_key_is_refused(issuer: OidcIssuer, public_form: str) -> None:
    """The classic confusion: use the issuer's *public* key as an HMAC secret."""
    public = RSA_KEYS[0].public_key()
    secret = {
        "pem": public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        "der": public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        "jwk": json.dumps(issuer.jwks()["keys"][0]).encode(),
    }[public_form]
    header = {"alg": "HS256", "typ": "JWT", "kid": issuer.current.kid}
    signing_input = ".".join(
        b64url(json.dumps(part).encode())
        for part in (header, issuer.claims_for("mallory", audience=AUDIENCE))
    )
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    assert reason(verifier_for(issuer), f"{signing_input}.{b64url(mac)}") == "unsupported algorithm"


def test_header_alg_must_suit_the_key(issuer: OidcIssuer) -> None:
    """An RSA kid with an ES256 header (and the reverse) is refused, without a refetch."""
    timer = FakeTimer()
    verifier = verifier_for(issuer, timer)
    verifier.verify(issuer.issue("alice", audience=AUDIENCE))
    claims = issuer.claims_for("alice", audience=AUDIENCE)
    token = sign_jws({"alg": "ES256", "kid": issuer.current.kid}, claims, EC_KEY)
    assert reason(verifier, token) == "unknown key"
    assert issuer.requests[JWKS_PATH] == 1


def test_hmac_algorithms_cannot_be_configured() -> None:
    with pytest.raises(ValueError):
        JwksJwtVerifier("https://idp.example", AUDIENCE, algorithms=("RS256", "HS256"))
    with pytest.raises(ValueError):
        JwksJwtVerifier("https://idp.example", AUDIENCE, algorithms=("none",))


def test_plain_http_only_on_loopback() -> None:
    with pytest.raises(ValueError):
        JwksJwtVerifier("http://idp.example", AUDIENCE)
    with pytest.raises(ValueError):
        JwksJwtVerifier("https://idp.example", AUDIENCE, "http://keys.example/jwks.json")
    JwksJwtVerifier("http://idp.internal:8080", AUDIENCE, allow_http=True)
    JwksJwtVerifier("http://localhost:8080/realms/x", AUDIENCE)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-jwt",
        "a.b",
        "a.b.c.d",
        "eyJhbGciOiJSUzI1NiJ9..sig",  # empty payload
        b64url(b"not json") + ".e30.sig",
        b64url(b'{"typ": "JWT"}') + ".e30.sig",  # no alg
        b64url(b"[1]") + ".e30.sig",
        "eyJhbGciOiJSUzI1NiJ9.e30.c2ln!",
        "x" * 20_000,
        # A header nested 5,000 levels deep (16 KB): the JSON decoder's recursion gives out.
        b64url(b"[" * 5_000 + b"]" * 5_000) + ".e30.sig",
    ],
)
def test_malformed_tokens(issuer: OidcIssuer, token: str) -> None:
    assert not looks_like_jwt(token)
    assert reason(verifier_for(issuer), token) == "malformed token"


def test_looks_like_jwt(issuer: OidcIssuer) -> None:
    assert looks_like_jwt(issuer.issue("alice", audience=AUDIENCE))
    assert not looks_like_jwt("sk-citegate-0123456789abcdef")
    assert not looks_like_jwt("abc.def.ghi")  # base64url, but the header is not JSON


# --- keys: rotation, caching, outages ---------------------------------------------------------------


def test_unknown_kid_refetches_once_then_verifies_after_rotation(
    issuer: OidcIssuer, timer: FakeTimer
) -> None:
    verifier = verifier_for(issuer, timer)
    verifier.verify(issuer.issue("alice", audience=AUDIENCE))
    assert issuer.requests[JWKS_PATH] == 1

    issuer.rotate(key=RSA_KEYS[1])
    rotated = issuer.issue("alice", audience=AUDIENCE)
    assert verifier.verify(rotated)["sub"] == "alice"
    assert issuer.requests[JWKS_PATH] == 2
    verifier.verify(issuer.issue("bob", audience=AUDIENCE))
    assert issuer.requests[JWKS_PATH] == 2


def test_unknown_kids_cannot_amplify_requests_to_the_issuer(issuer: OidcIssuer, timer: FakeTimer) -> None:
    verifier = verifier_for(issuer, timer)
    verifier.verify(issuer.issue("alice", audience=AUDIENCE))
    for attempt in range(25):
        assert reason(verifier, issuer.issue("x", audience=AUDIENCE, kid=f"ghost-{attempt}")) == "unknown key"
        timer.now += 0.1
    assert issuer.requests[JWKS_PATH] == 2  # the first fetch and one look for the unknown kids
    timer.now += 10
    assert reason(verifier, issuer.issue("x", audience=AUDIENCE, kid="ghost-late")) == "unknown key"
    assert issuer.requests[JWKS_PATH] == 3


def test_cache_expires(issuer: OidcIssuer, timer: FakeTimer) -> None:
    verifier = verifier_for(issuer, timer, cache_seconds=60)
    token = issuer.issue("alice", audience=AUDIENCE)
    verifier.verify(token)
    timer.now += 59
    verifier.verify(token)
    assert issuer.requests[JWKS_PATH] == 1
    timer.now += 2
    verifier.verify(token)
    assert issuer.requests[JWKS_PATH] == 2
    assert issuer.requests[DISCOVERY_PATH] == 1  # jwks_uri is remembered


def test_retired_key_is_refused_after_the_cache_expires(issuer: OidcIssuer, timer: FakeTimer) -> None:
    verifier = verifier_for(issuer, timer, cache_seconds=60)
    old_kid = issuer.current.kid
    old = issuer.issue("alice", audience=AUDIENCE)
    verifier.verify(old)
    issuer.rotate(key=RSA_KEYS[1])
    issuer.retire(old_kid)
    timer.now += 61
    assert reason(verifier, old) == "unknown key"


def test_cached_keys_survive_an_issuer_outage(issuer: OidcIssuer, timer: FakeTimer) -> None:
    verifier = verifier_for(issuer, timer, cache_seconds=60)
    token = issuer.issue("alice", audience=AUDIENCE)
    verifier.verify(token)
    issuer.failing = True
    timer.now += 61
    assert verifier.verify(token)["sub"] == "alice"
    assert verifier.verify(token)["sub"] == "alice"
    assert issuer.requests[JWKS_PATH] == 2  # one failed refresh, then no retry for a while


def test_issuer_answering_errors_is_unreachable(issuer: OidcIssuer, timer: FakeTimer) -> None:
    issuer.failing = True
    verifier = verifier_for(issuer, timer)
    token = issuer.issue("alice", audience=AUDIENCE)
    assert reason(verifier, token) == "issuer unreachable"
    assert reason(verifier, token) == "issuer unreachable"
    assert issuer.requests[DISCOVERY_PATH] == 1  # failures are not retried on every request
    issuer.failing = False
    timer.now += 10
    assert verifier.verify(token)["sub"] == "alice"


def test_issuer_unreachable() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    verifier = JwksJwtVerifier(f"http://127.0.0.1:{port}", AUDIENCE, http_timeout=0.5, http_client=HTTP)
    claims = {"iss": f"http://127.0.0.1:{port}", "aud": AUDIENCE, "exp": int(time.time()) + 60}
    token = sign_jws({"alg": "RS256", "kid": "k1"}, claims, RSA_KEYS[0])
    assert reason(verifier, token) == "issuer unreachable"


def test_discovery_must_name_the_configured_issuer(issuer: OidcIssuer) -> None:
    verifier = JwksJwtVerifier(issuer.url + "/", AUDIENCE, http_client=HTTP)
    token = issuer.issue("alice", audience=AUDIENCE, claims={"iss": issuer.url + "/"})
    assert reason(verifier, token) == "issuer unreachable"
