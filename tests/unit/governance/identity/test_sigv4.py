"""verify_sigv4 against requests signed by botocore itself, as an agent's SDK would sign them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.credentials import Credentials

from citegate.governance.identity.sigv4 import (
    LocalIamIdentity,
    SigV4Error,
    load_local_iam_credentials,
    verify_sigv4,
)

AK = "AKIACITEGATEAGENT01"
SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYAGENTKEY01"
ARN = "arn:aws:iam::123456789012:user/agents/research-bot"
REGION = "us-east-1"
HOST = "api.citegate.example"
CREDS = {AK: LocalIamIdentity(AK, SK, ARN, "123456789012")}


def sign(
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    params: list[tuple[str, str]] | None = None,
    key: str = AK,
    secret: str = SK,
    token: str | None = None,
    region: str = REGION,
    service: str = "execute-api",
    signer: type[SigV4Auth] = SigV4Auth,
    context: Mapping[str, Any] | None = None,
) -> AWSPreparedRequest:
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}), params=params or [])
    request.context.update(context or {})
    signer(Credentials(key, secret, token), service, region).add_auth(request)
    return request.prepare()


def signed_at(prepared: AWSPreparedRequest) -> datetime:
    return datetime.strptime(prepared.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def check(
    prepared: AWSPreparedRequest,
    *,
    method: str | None = None,
    path: str | None = None,
    query: str | None = None,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    body: bytes | None = None,
    now: datetime | None = None,
    **options: Any,
) -> LocalIamIdentity:
    """Verify a prepared request as the gateway would see it, with any part overridden."""
    raw = httpx.URL(prepared.url).raw_path.decode("ascii")
    raw_path, _, raw_query = raw.partition("?")
    if headers is None:
        headers = {"Host": HOST, **dict(prepared.headers.items())}
    sent_body = prepared.body or b""
    return verify_sigv4(
        method=method or prepared.method,
        path=raw_path if path is None else path,
        query_string=raw_query if query is None else query,
        headers=headers,
        body=(sent_body if isinstance(sent_body, bytes) else sent_body.encode()) if body is None else body,
        credentials=CREDS,
        region=REGION,
        now=now or signed_at(prepared),
        **options,
    )


def refused(prepared: AWSPreparedRequest, **overrides: Any) -> str:
    with pytest.raises(SigV4Error) as caught:
        check(prepared, **overrides)
    return caught.value.reason


# --- requests that verify ---------------------------------------------------------------------------


def test_get_with_repeated_unsorted_query_params() -> None:
    prepared = sign(
        "GET", f"https://{HOST}/v1/search", params=[("q", "café au lait"), ("b", "2"), ("a", "1"), ("a", "0")]
    )
    assert "q=caf%C3%A9+au+lait" in prepared.url  # sent form-encoded, signed as %20: both must agree
    identity = check(prepared)
    assert identity.arn == ARN
    assert identity.account_id == "123456789012"


def test_query_already_encoded_in_the_url() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search?z=%2Fetc&a=x%20y&a=&flag")
    assert check(prepared).access_key_id == AK


def test_post_with_json_body() -> None:
    body = json.dumps({"question": "What is the refund policy?", "top_k": 5}).encode()
    prepared = sign(
        "POST", f"https://{HOST}/v1/answer", body=body, headers={"Content-Type": "application/json"}
    )
    assert check(prepared).access_key_id == AK


@pytest.mark.parametrize(
    "path",
    [
        "/v1/kb/caf%C3%A9/docs",  # unicode
        "/v1/kb/my%20docs/report%202024.pdf",  # spaces
        "/v1/kb/a%2Fb/docs",  # an encoded slash inside a segment
        "/v1/kb/%E4%BA%BA%E5%B7%A5%E6%99%BA%E8%83%BD/~x",
    ],
)
def test_encoded_paths_are_used_as_sent(path: str) -> None:
    prepared = sign("GET", f"https://{HOST}{path}")
    assert check(prepared).access_key_id == AK


def test_a_decoded_path_is_encoded_like_the_client_sent_it() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/kb/caf%C3%A9%20cr%C3%A8me")
    assert check(prepared, path="/v1/kb/café crème").access_key_id == AK


def test_encoded_slash_is_not_a_slash() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/kb/a%2Fb")
    assert refused(prepared, path="/v1/kb/a/b") == "signature does not match"


def test_dot_segments_and_double_slashes_are_normalised_as_aws_does() -> None:
    """botocore (and AWS) sign the normalised path: the gateway must route on that same path."""
    prepared = sign("GET", f"https://{HOST}/v1/search")
    assert check(prepared, path="/v1/kb/../search").access_key_id == AK
    assert check(prepared, path="/v1//search").access_key_id == AK


def test_date_header_instead_of_x_amz_date() -> None:
    request = AWSRequest(method="GET", url=f"https://{HOST}/v1/health", headers={"Date": "placeholder"})
    SigV4Auth(Credentials(AK, SK), "execute-api", REGION).add_auth(request)
    prepared = request.prepare()
    assert "X-Amz-Date" not in prepared.headers
    timestamp = request.context["timestamp"]
    now = datetime.strptime(timestamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert check(prepared, now=now).access_key_id == AK


def test_session_token_signed_with_a_known_key_is_accepted() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search?q=x", token="FwoGZXIvYXdzEBYaDEXAMPLETOKEN")
    assert "x-amz-security-token" in prepared.headers["Authorization"]
    assert check(prepared).access_key_id == AK


def test_unsigned_payload() -> None:
    prepared = sign(
        "POST", f"https://{HOST}/v1/answer", body=b"{}", context={"payload_signing_enabled": False}
    )
    assert prepared.headers["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    assert check(prepared, body=b'{"changed": true}').access_key_id == AK  # as in AWS: the body is not signed
    assert refused(prepared, allow_unsigned_payload=False) == "unsigned payloads are not accepted"


def test_declared_payload_hash_must_match_the_body() -> None:
    body = b'{"q": "x"}'
    digest = hashlib.sha256(body).hexdigest()
    prepared = sign("POST", f"https://{HOST}/v1/answer", body=body, headers={"X-Amz-Content-Sha256": digest})
    assert check(prepared).access_key_id == AK
    assert refused(prepared, body=b'{"q": "y"}') == "x-amz-content-sha256 does not match the body"


def test_payload_hash_header_must_be_signed() -> None:
    prepared = sign("POST", f"https://{HOST}/v1/answer", body=b"{}")
    headers = {"Host": HOST, **dict(prepared.headers.items()), "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD"}
    assert refused(prepared, headers=headers, body=b"[]") == "the x-amz-content-sha256 header must be signed"


class SignEverything(SigV4Auth):  # type: ignore[misc]
    """A client that, unlike botocore, signs user-agent and x-amzn-trace-id too (the JS aws4 library does)."""

    def headers_to_sign(self, request: Any) -> Any:
        headers = super().headers_to_sign(request)
        for name in ("User-Agent", "X-Amzn-Trace-Id"):
            headers[name.lower()] = request.headers[name]
        return headers


def test_headers_botocore_would_skip_are_honoured_when_signed() -> None:
    extra = {"User-Agent": "research-bot/1.0", "X-Amzn-Trace-Id": "Root=1-abc"}
    prepared = sign("GET", f"https://{HOST}/v1/search?q=x", headers=extra, signer=SignEverything)
    assert "user-agent" in prepared.headers["Authorization"]
    assert check(prepared).access_key_id == AK
    tampered = {"Host": HOST, **dict(prepared.headers.items()), "User-Agent": "curl/8"}
    assert refused(prepared, headers=tampered) == "signature does not match"


def test_unsigned_headers_may_change() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search?q=x")
    headers = {"Host": HOST, **dict(prepared.headers.items()), "User-Agent": "anything", "X-Extra": "1"}
    assert check(prepared, headers=headers).access_key_id == AK


def test_repeated_signed_header_as_pairs() -> None:
    class SignsAccept(SigV4Auth):  # type: ignore[misc]
        def headers_to_sign(self, request: Any) -> Any:
            headers = super().headers_to_sign(request)
            del headers["accept"]
            headers["accept"] = "application/json"
            headers["accept"] = "text/plain"
            return headers

    prepared = sign("GET", f"https://{HOST}/v1/x", headers={"Accept": "application/json"}, signer=SignsAccept)
    pairs = [("host", HOST), *prepared.headers.items(), ("accept", "text/plain")]
    assert check(prepared, headers=pairs).access_key_id == AK


def test_exact_bytes_an_http_client_sends() -> None:
    """Signed by botocore, sent by httpx: lower-cased names, httpx's own Host, the raw request line."""
    body = json.dumps({"question": "Où est la politique ?"}, ensure_ascii=False).encode()
    url = f"https://{HOST}:8443/v1/kb/caf%C3%A9%20docs/a%2Fb/answer?lang=fr&b=2&b=1&q=%C3%A9t%C3%A9"
    prepared = sign("POST", url, body=body, headers={"Content-Type": "application/json; charset=utf-8"})
    request = httpx.Request(
        prepared.method, prepared.url, headers=dict(prepared.headers.items()), content=body
    )
    raw_path, _, raw_query = request.url.raw_path.decode("ascii").partition("?")
    wire_headers = list(request.headers.multi_items())  # what the server sees, names lower-cased
    assert ("host", f"{HOST}:8443") in wire_headers
    assert ("content-length", str(len(body))) in wire_headers  # added by httpx, not signed
    identity = verify_sigv4(
        method=request.method,
        path=raw_path,
        query_string=raw_query,
        headers=wire_headers,
        body=request.read(),
        credentials=CREDS,
        region=REGION,
        now=signed_at(prepared),
    )
    assert identity.access_key_id == AK
    upper = {k.upper(): v for k, v in wire_headers}
    assert (
        verify_sigv4(
            method="post",
            path=raw_path,
            query_string=raw_query,
            headers=upper,
            body=body,
            credentials=CREDS,
            region=REGION,
            now=signed_at(prepared),
        )
        == identity
    )


# --- requests that are refused ----------------------------------------------------------------------


def test_changed_body_byte() -> None:
    body = b'{"question": "What is the refund policy?"}'
    prepared = sign("POST", f"https://{HOST}/v1/answer", body=body)
    assert refused(prepared, body=body.replace(b"refund", b"refunD")) == "signature does not match"


@pytest.mark.parametrize(
    "override",
    [
        {"method": "DELETE"},
        {"path": "/v1/admin"},
        {"path": "/v1/search/"},
        {"query": "q=x&limit=1000"},
        {"query": "q=y"},
    ],
)
def test_changed_method_path_or_query(override: dict[str, str]) -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search?q=x")
    assert refused(prepared, **override) == "signature does not match"


def test_changed_signed_header() -> None:
    prepared = sign(
        "POST", f"https://{HOST}/v1/answer", body=b"{}", headers={"Content-Type": "application/json"}
    )
    headers = {"Host": HOST, **dict(prepared.headers.items()), "Content-Type": "text/plain"}
    assert refused(prepared, headers=headers) == "signature does not match"
    other_host = {**dict(prepared.headers.items()), "Host": "evil.example"}
    assert refused(prepared, headers=other_host) == "signature does not match"


@pytest.mark.parametrize("skew", [timedelta(minutes=6), timedelta(minutes=-6)])
def test_request_date_outside_the_window(skew: timedelta) -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search?q=x")
    assert refused(prepared, now=signed_at(prepared) + skew) == "request date is outside the allowed window"
    assert check(prepared, now=signed_at(prepared) + skew / 2).access_key_id == AK


def test_unknown_access_key() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search", key="AKIANOBODY000000000")
    assert refused(prepared) == "unknown access key"


def test_wrong_secret() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/search", secret="not-the-secret")
    assert refused(prepared) == "signature does not match"


def test_scope_for_another_region_or_service() -> None:
    assert refused(sign("GET", f"https://{HOST}/v1/x", region="eu-west-1")) == (
        "credential scope region/service mismatch"
    )
    assert (
        refused(sign("GET", f"https://{HOST}/v1/x", service="s3"))
        == "credential scope region/service mismatch"
    )


def _with_authorization(prepared: AWSPreparedRequest, value: str) -> dict[str, str]:
    return {"Host": HOST, **dict(prepared.headers.items()), "Authorization": value}


@pytest.mark.parametrize(
    "mangle",
    [
        lambda a: a.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"),
        lambda a: a.replace("Credential=", "Cred="),
        lambda a: a.replace("/aws4_request", "/aws5_request"),
        lambda a: a.replace("SignedHeaders=host;x-amz-date", "SignedHeaders=x-amz-date;host"),
        lambda a: a.replace("SignedHeaders=host;x-amz-date", "SignedHeaders=Host;x-amz-date"),
        lambda a: a.rsplit("Signature=", 1)[0] + "Signature=zz",
        lambda a: a + ", Signature=" + "0" * 64,
        lambda a: "Bearer abc",
        lambda a: "AWS4-HMAC-SHA256",
    ],
)
def test_malformed_authorization_header(mangle: Any) -> None:
    prepared = sign("GET", f"https://{HOST}/v1/x")
    headers = _with_authorization(prepared, mangle(prepared.headers["Authorization"]))
    assert refused(prepared, headers=headers) == "malformed Authorization header"


def test_host_must_be_signed() -> None:
    class WithoutHost(SigV4Auth):  # type: ignore[misc]
        def headers_to_sign(self, request: Any) -> Any:
            headers = super().headers_to_sign(request)
            del headers["host"]
            return headers

    prepared = sign("GET", f"https://{HOST}/v1/x", signer=WithoutHost)
    assert "SignedHeaders=x-amz-date," in prepared.headers["Authorization"]
    assert refused(prepared) == "the host header must be signed"


def test_missing_date_and_missing_authorization() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/x")
    headers = {k: v for k, v in prepared.headers.items() if k != "X-Amz-Date"}
    assert (
        refused(prepared, headers={"Host": HOST, **headers})
        == "signed header x-amz-date is missing from the request"
    )
    no_auth = {"Host": HOST, "X-Amz-Date": prepared.headers["X-Amz-Date"]}
    assert refused(prepared, headers=no_auth) == "missing Authorization header"


def test_missing_x_amz_date_when_it_was_not_signed() -> None:
    prepared = sign("GET", f"https://{HOST}/v1/x")
    auth = prepared.headers["Authorization"].replace("SignedHeaders=host;x-amz-date", "SignedHeaders=host")
    headers = {"Host": HOST, "Authorization": auth}
    assert refused(prepared, headers=headers) == "missing X-Amz-Date"


# --- the local credentials file ---------------------------------------------------------------------


def test_load_local_iam_credentials(tmp_path: Path) -> None:
    path = tmp_path / "iam.json"
    path.write_text(
        json.dumps(
            {
                "credentials": [
                    {"access_key_id": AK, "secret_access_key": SK, "arn": ARN},
                    {
                        "access_key_id": "AKIAOTHER",
                        "secret_access_key": "s2",
                        "arn": "arn:aws:sts::210987654321:assumed-role/ingest/session",
                    },
                ]
            }
        )
    )
    loaded = load_local_iam_credentials(path)
    assert loaded[AK] == CREDS[AK]
    assert loaded["AKIAOTHER"].account_id == "210987654321"
    assert SK not in repr(loaded)


@pytest.mark.parametrize(
    "document",
    [
        {"credentials": [{"access_key_id": AK, "secret_access_key": SK, "arn": "not-an-arn"}]},
        {"credentials": [{"access_key_id": AK, "arn": ARN}]},
        {"credentials": [{"access_key_id": AK, "secret_access_key": SK, "arn": ARN}] * 2},
        {"keys": []},
    ],
)
def test_load_local_iam_credentials_refuses_bad_files(tmp_path: Path, document: dict[str, Any]) -> None:
    path = tmp_path / "iam.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError) as caught:
        load_local_iam_credentials(path)
    assert SK not in str(caught.value)
