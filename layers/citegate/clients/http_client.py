"""A small HTTP client for citegate's API, shared by the CLI and the MCP adapter.

Both speak to the same routes with the caller's own credentials, so the principal, its policy and
the audit trail are exactly those of a direct HTTP call: either a bearer token or a SigV4 signature
(botocore's credential chain, service `execute-api`), as API Gateway IAM authorization expects.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8099"
SIGV4_SERVICE = "execute-api"


class ApiError(Exception):
    """A non-2xx answer: `status` and the server's JSON error body (`error`, `message`, `details`)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        super().__init__(describe_error(status, body))

    @property
    def code(self) -> str:
        return str(self.body.get("error") or "http_error")


class Unavailable(Exception):
    """The server could not be reached (connection refused, DNS, timeout)."""


def describe_error(status: int, body: dict[str, Any]) -> str:
    code = str(body.get("error") or "http_error")
    reason = (body.get("details") or {}).get("reason") if isinstance(body.get("details"), dict) else None
    text = f"HTTP {status} {code}"
    if reason:
        text += f" ({reason})"
    message = body.get("message")
    return f"{text}: {message}" if message else text


@dataclass(frozen=True)
class Credentials:
    """Who the caller is: a bearer token, SigV4 signing, or nobody (the anonymous principal)."""

    token: str | None = field(default=None, repr=False)
    sigv4: bool = False
    region: str | None = None

    def headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        if self.sigv4:
            return sigv4_headers(method, url, body, self.region)
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        return {}


# docs/cli.md's table: `--token`, else the first of these that is set.
TOKEN_VARIABLES = ("RAG_API_TOKEN", "CITEGATE_TOKEN")


def base_url(url: str | None = None) -> str:
    """`--url`, else $CITEGATE_URL, else the local default."""
    return (url or os.environ.get("CITEGATE_URL") or DEFAULT_URL).rstrip("/")


def credentials_for(token: str | None = None, *, sigv4: bool = False) -> Credentials:
    """Who every command (the MCP server over stdio too) calls as, by docs/cli.md's table: SigV4
    with `--sigv4`; else `--token`; else $RAG_API_TOKEN, then $CITEGATE_TOKEN; else nobody."""
    if sigv4:
        return Credentials(sigv4=True)
    for candidate in (token, *(os.environ.get(name) for name in TOKEN_VARIABLES)):
        if candidate:
            return Credentials(token=candidate)
    return Credentials()


def sigv4_headers(method: str, url: str, body: bytes, region: str | None = None) -> dict[str, str]:
    """Sign with botocore exactly as an AWS SDK would; credentials come from the standard chain."""
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        raise Unauthenticated("--sigv4: no AWS credentials found in the standard credential chain")
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials.get_frozen_credentials(), SIGV4_SERVICE, region).add_auth(request)
    return {k: v for k, v in request.headers.items() if k.lower() != "content-length"}


class Unauthenticated(Exception):
    """Credentials could not be produced locally (no token, no AWS credentials)."""


def parse_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except (json.JSONDecodeError, ValueError):
        return {"error": "http_error", "message": response.text[:500]}
    return body if isinstance(body, dict) else {"value": body}


def encode(body: dict[str, Any] | None) -> bytes:
    return json.dumps(body).encode() if body is not None else b""


class CitegateClient:
    """Synchronous client for the CLI. Raises ApiError for non-2xx answers, Unavailable when down."""

    def __init__(self, url: str, credentials: Credentials, timeout: float = 120) -> None:
        self.url = url.rstrip("/")
        self.credentials = credentials
        self._http = httpx.Client(timeout=timeout)

    def __enter__(self) -> CitegateClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.url}{path}"
        content = encode(body)
        headers = {"Content-Type": "application/json", **self.credentials.headers(method, url, content)}
        try:
            response = self._http.request(method, url, content=content, headers=headers)
        except httpx.TransportError as error:
            raise Unavailable(f"{self.url} is unreachable: {error}") from error
        parsed = parse_body(response)
        if response.status_code >= 400:
            raise ApiError(response.status_code, parsed)
        return parsed

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body)

    def put_presigned(self, url: str, headers: dict[str, str], data: bytes) -> None:
        """Upload to a presigned URL (large files); the URL itself is the credential."""
        try:
            response = self._http.put(url, content=data, headers=headers)
        except httpx.TransportError as error:
            raise Unavailable(f"upload to {url.split('?')[0]} failed: {error}") from error
        if response.status_code >= 400:
            raise ApiError(response.status_code, {"error": "upload_failed", "message": response.text[:300]})
