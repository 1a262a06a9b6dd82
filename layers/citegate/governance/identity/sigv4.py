"""Verify AWS Signature Version 4 on the local gateway, as API Gateway IAM authorization does in AWS.

In AWS, API Gateway checks the signature before the request reaches us. On one machine the local
gateway has to do it itself, against a small file of local IAM credentials, so that an agent
signing with botocore (or any SigV4 client) works unchanged against both.

The canonical request, string to sign and signature come from botocore's own ``SigV4Auth`` (the
code every AWS SDK for Python signs with), not a re-implementation. What this module adds is the
server side: parsing the Authorization header, the date window, the credential scope, and feeding
botocore exactly what the client signed:

* ``headers_to_sign`` is overridden to return exactly the SignedHeaders list. Stock botocore skips
  ``user-agent``, ``x-amzn-trace-id``, ``expect``, ``connection`` and a few others
  (``SIGNED_HEADERS_BLACKLIST``), and adds ``host`` from the URL when absent; other clients do sign
  some of those.
* The path is the raw, still percent-encoded path from the request line. botocore removes dot
  segments and empty segments, then percent-encodes it once more: the "encode twice" canonical URI
  every service but S3 uses. ``%2F`` therefore stays distinct from ``/``.
* The query string is decoded (``+`` as a space, as the application will read it) and handed to
  botocore as parameters, which it re-encodes strictly (RFC 3986, ``%20``) and sorts by key, then
  value. That matches botocore clients signing ``params=`` (sent ``+``, signed ``%20``) and clients
  signing an already strictly encoded URL.
* ``X-Amz-Content-Sha256`` must be signed when sent; a hex value must equal the body's hash (the
  signature only covers the header), and ``UNSIGNED-PAYLOAD`` leaves the body unsigned, as in AWS.

Temporary credentials: ``X-Amz-Security-Token`` may be present and signed. The local credentials
file has long-term keys only, so the token is not checked; the request is accepted when the access
key is known and the signature verifies with its secret. Presigned URLs (``X-Amz-Signature`` in the
query) and chunked ``STREAMING-*`` payloads are not supported.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")
_ARN = re.compile(r"arn:aws[a-zA-Z-]*:(iam|sts)::(\d{12}):.+")
# Everything RFC 3986 allows in a path, plus "%" so an already encoded path passes unchanged.
_PATH_SAFE = "/%-._~!$&'()*+,;=:@"
_MAX_QUERY_FIELDS = 1000


class SigV4Error(Exception):
    """A request whose SigV4 signature was refused; ``reason`` is short and safe to show the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LocalIamIdentity:
    access_key_id: str
    secret_access_key: str = field(repr=False)  # never in logs or tracebacks
    arn: str
    account_id: str


def load_local_iam_credentials(path: Path) -> dict[str, LocalIamIdentity]:
    """Read ``{"credentials": [{"access_key_id", "secret_access_key", "arn"}]}``, keyed by access key."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read local IAM credentials from {path}: {exc}") from exc
    entries = document.get("credentials") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected an object with a 'credentials' list")
    identities: dict[str, LocalIamIdentity] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: credentials[{index}] must be an object")
        values = {name: entry.get(name) for name in ("access_key_id", "secret_access_key", "arn")}
        missing = [name for name, value in values.items() if not isinstance(value, str) or not value]
        if missing:
            raise ValueError(f"{path}: credentials[{index}] needs non-empty {', '.join(missing)}")
        access_key_id, secret, arn = (str(values[n]) for n in ("access_key_id", "secret_access_key", "arn"))
        match = _ARN.fullmatch(arn)
        if not match:
            raise ValueError(f"{path}: credentials[{index}].arn is not an IAM or STS ARN: {arn!r}")
        if access_key_id in identities:
            raise ValueError(f"{path}: access key {access_key_id!r} is listed twice")
        identities[access_key_id] = LocalIamIdentity(access_key_id, secret, arn, match.group(2))
    return identities


@dataclass(frozen=True)
class _Authorization:
    access_key_id: str
    scope_date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signed_headers_text: str
    signature: str


def _parse_authorization(value: str) -> _Authorization:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SigV4Error("malformed Authorization header")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        name, sep, part = item.strip().partition("=")
        if not sep or name in parts:
            raise SigV4Error("malformed Authorization header")
        parts[name] = part.strip()
    if set(parts) != {"Credential", "SignedHeaders", "Signature"}:
        raise SigV4Error("malformed Authorization header")
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or not all(scope) or scope[4] != "aws4_request":
        raise SigV4Error("malformed Authorization header")
    names = parts["SignedHeaders"].split(";")
    # The list is part of the canonical request, so it must already be canonical: lowercase, sorted, unique.
    if not all(_HEADER_NAME.fullmatch(n) for n in names) or names != sorted(set(names)):
        raise SigV4Error("malformed Authorization header")
    if not _SIGNATURE.fullmatch(parts["Signature"]):
        raise SigV4Error("malformed Authorization header")
    return _Authorization(
        access_key_id=scope[0],
        scope_date=scope[1],
        region=scope[2],
        service=scope[3],
        signed_headers=tuple(names),
        signed_headers_text=parts["SignedHeaders"],
        signature=parts["Signature"],
    )


def _collect_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Lower-cased name -> values in arrival order. Pairs keep repeated headers apart, as AWS signs them."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    collected: dict[str, list[str]] = {}
    for name, value in pairs:
        collected.setdefault(name.strip().lower(), []).append(value)
    return collected


def _request_timestamp(headers: dict[str, list[str]]) -> tuple[str, str, datetime]:
    """(header used, X-Amz-Date-format timestamp, instant). X-Amz-Date wins over Date, as in AWS."""
    if "x-amz-date" in headers:
        raw = headers["x-amz-date"][0].strip()
        try:
            instant = datetime.strptime(raw, _AMZ_DATE_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise SigV4Error("malformed X-Amz-Date") from None
        return "x-amz-date", raw, instant
    if "date" in headers:
        try:
            instant = parsedate_to_datetime(headers["date"][0].strip())
        except (TypeError, ValueError):
            raise SigV4Error("malformed Date header") from None
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        instant = instant.astimezone(UTC)
        return "date", instant.strftime(_AMZ_DATE_FORMAT), instant
    raise SigV4Error("missing X-Amz-Date")


def _wire_path(path: str) -> str:
    # The raw path passes unchanged; a decoded one (spaces, unicode) is encoded as a client would send it.
    return quote(path, safe=_PATH_SAFE)


def _query_params(query_string: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(
            query_string,
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=_MAX_QUERY_FIELDS,
        )
    except ValueError:  # UnicodeDecodeError included: invalid UTF-8 would make the canonical form ambiguous
        raise SigV4Error("malformed query string") from None


class _ExactHeadersSigV4(SigV4Auth):  # type: ignore[misc]  # botocore ships no type hints
    """botocore's signer, told exactly which headers the client signed."""

    def __init__(self, credentials: Any, service: str, region: str, signed: HTTPHeaders) -> None:
        super().__init__(credentials, service, region)
        self._signed = signed

    def headers_to_sign(self, request: Any) -> HTTPHeaders:
        return self._signed


def verify_sigv4(
    *,
    method: str,
    path: str,
    query_string: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes,
    credentials: Mapping[str, LocalIamIdentity],
    region: str,
    service: str = "execute-api",
    now: datetime | None = None,
    max_skew_seconds: int = 300,
    allow_unsigned_payload: bool = True,
) -> LocalIamIdentity:
    """Return the identity whose secret signed this request, or raise SigV4Error.

    ``path`` and ``query_string`` are as sent on the request line (ASGI ``raw_path`` and
    ``query_string``), without the ``?``. ``headers`` is a mapping with any name case, or
    (name, value) pairs when a signed header may repeat. Header values are str (ASGI bytes
    decoded as latin-1).
    """
    collected = _collect_headers(headers)
    authorization_values = collected.get("authorization")
    if not authorization_values:
        raise SigV4Error("missing Authorization header")
    if len(authorization_values) > 1:
        raise SigV4Error("malformed Authorization header")
    auth = _parse_authorization(authorization_values[0])

    if "host" not in auth.signed_headers:
        raise SigV4Error("the host header must be signed")
    for name in auth.signed_headers:
        if name not in collected:
            raise SigV4Error(f"signed header {name} is missing from the request")
    date_header, timestamp, instant = _request_timestamp(collected)
    if date_header not in auth.signed_headers:
        raise SigV4Error(f"the {date_header} header must be signed")

    current = now or datetime.now(UTC)
    if current.tzinfo is None:
        current = current.replace(tzinfo=UTC)
    if abs((current - instant).total_seconds()) > max_skew_seconds:
        raise SigV4Error("request date is outside the allowed window")
    if auth.scope_date != timestamp[:8]:
        raise SigV4Error("credential scope date does not match the request date")
    if auth.region != region or auth.service != service:
        raise SigV4Error("credential scope region/service mismatch")

    identity = credentials.get(auth.access_key_id)
    if identity is None:
        raise SigV4Error("unknown access key")

    payload_hash = collected.get("x-amz-content-sha256")
    if payload_hash is not None:
        if "x-amz-content-sha256" not in auth.signed_headers:
            raise SigV4Error("the x-amz-content-sha256 header must be signed")
        declared = payload_hash[0].strip()
        if declared == UNSIGNED_PAYLOAD:
            if not allow_unsigned_payload:
                raise SigV4Error("unsigned payloads are not accepted")
        elif not _HEX64.fullmatch(declared):
            raise SigV4Error("unsupported x-amz-content-sha256 value")
        # The signature covers the declared hash, not the body: the body must match it.
        elif not hmac.compare_digest(declared.lower(), hashlib.sha256(body).hexdigest()):
            raise SigV4Error("x-amz-content-sha256 does not match the body")

    signed = HTTPHeaders()
    for name in auth.signed_headers:
        for value in collected[name]:
            signed[name] = value  # HTTPHeaders appends: a repeated header keeps every value

    wire_path = _wire_path(path or "/")
    if not wire_path.startswith("/"):
        raise SigV4Error("malformed request path")
    # The host in the URL is never used: host comes from the signed headers, path and query from here.
    request = AWSRequest(
        method=method,
        url=f"https://sigv4.invalid{wire_path}",
        headers=None,
        data=body,
        params=_query_params(query_string),
    )
    for name, value in signed.items():
        request.headers[name] = value
    request.context["timestamp"] = timestamp

    signer = _ExactHeadersSigV4(
        Credentials(identity.access_key_id, identity.secret_access_key), service, region, signed
    )
    canonical_request: str = signer.canonical_request(request)
    # The list botocore put in the canonical request must be the one the client declared.
    if signer.signed_headers(signed) != auth.signed_headers_text:
        raise SigV4Error("malformed Authorization header")
    string_to_sign: str = signer.string_to_sign(request, canonical_request)
    expected: str = signer.signature(string_to_sign, request)
    if not hmac.compare_digest(expected.encode("ascii"), auth.signature.encode("ascii")):
        raise SigV4Error("signature does not match")
    return identity
