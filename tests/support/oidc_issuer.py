"""A test OIDC issuer on 127.0.0.1: discovery document, JWKS and token minting.

Tokens are signed here with ``cryptography`` directly, not with the JOSE library the verifier
uses, so a bug shared by signer and verifier cannot make the tests pass.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/jwks.json"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(value: int, length: int | None = None) -> str:
    size = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(size, "big"))


def public_jwk(key: PrivateKey, kid: str | None) -> dict[str, Any]:
    """The public half of a key as a JWK, with ``use: sig`` and ``alg`` set as real issuers publish them."""
    jwk: dict[str, Any]
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        jwk = {"kty": "RSA", "alg": "RS256", "n": _uint(numbers.n), "e": _uint(numbers.e)}
    else:
        point = key.public_key().public_numbers()
        jwk = {"kty": "EC", "alg": "ES256", "crv": "P-256", "x": _uint(point.x, 32), "y": _uint(point.y, 32)}
    jwk["use"] = "sig"
    if kid is not None:
        jwk["kid"] = kid
    return jwk


def algorithm_for(key: PrivateKey) -> str:
    return "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"


def sign_jws(header: Mapping[str, Any], claims: Mapping[str, Any], key: PrivateKey) -> str:
    """A compact JWS signed with RS256 or ES256, whatever ``header`` says (so tests can lie in it)."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        der = key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS wants raw r||s, not DER
    return f"{signing_input}.{b64url(signature)}"


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def new_ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@dataclass
class SigningKey:
    kid: str
    key: PrivateKey
    published: bool = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    issuer: OidcIssuer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        issuer = self.server.issuer
        path = self.path.split("?", 1)[0]
        with issuer.lock:
            issuer.requests[path] += 1
            failing = issuer.failing
        if failing:
            self._send(503, {"error": "unavailable"})
        elif path == DISCOVERY_PATH:
            self._send(200, issuer.discovery_document())
        elif path == JWKS_PATH:
            self._send(200, issuer.jwks())
        else:
            self._send(404, {"error": "not found"})

    def _send(self, status: int, document: Mapping[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


class OidcIssuer:
    """``with OidcIssuer() as issuer: token = issuer.issue("alice", audience="citegate")``.

    ``requests`` counts GETs per path; set ``failing = True`` to answer 503 to everything.
    """

    def __init__(self, *, key: PrivateKey | None = None) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.failing = False
        self.keys: list[SigningKey] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.rotate(key=key)

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> OidcIssuer:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.issuer = self
        self._server = server
        # A short poll interval keeps shutdown (and so each test) fast.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="oidc-issuer", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> OidcIssuer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- what it serves -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The issuer identifier (``iss``), also the base of its well-known URLs."""
        if self._server is None:
            raise RuntimeError("the issuer is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH

    def discovery_document(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.jwks_url,
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        }

    def jwks(self) -> dict[str, Any]:
        with self.lock:
            return {"keys": [public_jwk(k.key, k.kid) for k in self.keys if k.published]}

    @property
    def current(self) -> SigningKey:
        return self.keys[-1]

    def rotate(self, *, key: PrivateKey | None = None, kid: str | None = None, publish: bool = True) -> str:
        """Add a signing key (RSA unless one is given) and make it current; returns its kid."""
        signing = SigningKey(kid or f"key-{uuid.uuid4().hex[:12]}", key or new_rsa_key(), publish)
        with self.lock:
            self.keys.append(signing)
        return signing.kid

    def reset(self, *, key: PrivateKey | None = None) -> None:
        """Back to one fresh key, no failures and no counted requests: lets tests share one server."""
        with self.lock:
            self.keys.clear()
            self.requests.clear()
            self.failing = False
        self.rotate(key=key)

    def retire(self, kid: str) -> None:
        """Stop publishing a key (it can still sign, as a leaked or withdrawn key could)."""
        with self.lock:
            for signing in self.keys:
                if signing.kid == kid:
                    signing.published = False

    # --- tokens ---------------------------------------------------------------------------------------

    def claims_for(
        self,
        sub: str,
        *,
        audience: str | list[str],
        expires_in: int = 300,
        claims: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        now = int(time.time())
        standard: dict[str, Any] = {
            "iss": self.url,
            "sub": sub,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + expires_in,
            "jti": uuid.uuid4().hex,
        }
        return {**standard, **(claims or {})}

    def issue(
        self,
        sub: str,
        *,
        audience: str | list[str],
        expires_in: int = 300,
        claims: Mapping[str, Any] | None = None,
        kid: str | None = None,
        key: PrivateKey | None = None,
    ) -> str:
        """A signed JWT. ``claims`` override the standard ones (``iss``, ``exp``, ...).

        ``kid`` alone picks one of this issuer's keys (or names one it does not have, signed with the
        current key); ``key`` signs with any key, with ``kid`` as given (default: the current kid).
        """
        signing_key: PrivateKey
        if key is not None:
            signing_key, header_kid = key, kid if kid is not None else self.current.kid
        else:
            match = [k for k in self.keys if k.kid == kid] if kid is not None else [self.current]
            signing_key = (match[0] if match else self.current).key
            header_kid = kid if kid is not None else self.current.kid
        header = {"alg": algorithm_for(signing_key), "typ": "JWT", "kid": header_kid}
        return sign_jws(
            header, self.claims_for(sub, audience=audience, expires_in=expires_in, claims=claims), signing_key
        )
