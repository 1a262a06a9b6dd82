"""Real SigV4 signatures and real JWTs on the wire, against `citegate serve` over loopback HTTP."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.oidc_issuer import OidcIssuer

ACCESS_KEY, SECRET = "AKIACITEGATETEST0001", "local-secret-for-the-e2e-test"
AGENT_ARN = "arn:aws:iam::123456789012:user/research-bot"


def _signed(
    server: Any,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    *,
    secret: str = SECRET,
    at: dt.datetime | None = None,
) -> httpx.Request:
    data = json.dumps(body).encode() if body is not None else b""
    request = AWSRequest(
        method=method, url=f"{server.url}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    signer = SigV4Auth(Credentials(ACCESS_KEY, secret), "execute-api", "us-east-1")
    if at is None:
        signer.add_auth(request)
    else:
        with mock.patch("botocore.auth.get_current_datetime", return_value=at):
            signer.add_auth(request)
    prepared = request.prepare()
    return httpx.Request(method, prepared.url, headers=dict(prepared.headers), content=data)


@pytest.fixture
def server(server_factory: Any, tmp_path: Path) -> Any:
    credentials = tmp_path / "iam.json"
    credentials.write_text(
        json.dumps(
            {"credentials": [{"access_key_id": ACCESS_KEY, "secret_access_key": SECRET, "arn": AGENT_ARN}]}
        )
    )
    with OidcIssuer() as issuer:
        running = server_factory(
            {
                "CITEGATE_EMBEDDER": "hashing",
                "CITEGATE_LOCAL_IAM_CREDENTIALS": str(credentials),
                "CITEGATE_OIDC_ISSUER": issuer.url,
                "CITEGATE_OIDC_AUDIENCE": "citegate",
            }
        ).start()
        running.issuer = issuer
        with running.client() as admin:
            admin.post(
                "/v1/kb", json={"kb_id": "pub", "name": "Published", "status": "approved"}
            ).raise_for_status()
            task = admin.post(
                "/v1/kb/pub/documents",
                json={
                    "text": "The kettle boils water in 2 minutes. " * 8,
                    "source_name": "kettle.txt",
                    "metadata": {"path": "appliances/kettle.md", "project": "home", "version": "main"},
                },
            ).json()["task_id"]
            while admin.get(f"/v1/tasks/{task}").json()["status"] not in ("succeeded", "failed"):
                time.sleep(0.1)
            admin.put(
                "/admin/policies/agent:research-bot",
                json={
                    "tools": ["rag_retrieve", "search", "ask"],
                    "knowledge_bases": ["pub"],
                    "iam_arns": [AGENT_ARN],
                    "scope": {"path_prefixes": ["appliances"]},
                },
            ).raise_for_status()
        yield running


def test_a_botocore_signed_request_is_an_agent(server: Any) -> None:
    with httpx.Client(timeout=60) as http:
        ok = http.send(_signed(server, "POST", "/v1/kb/pub/retrieve", {"query": "kettle"}))
        assert ok.status_code == 200, ok.text
        assert "kettle" in ok.json()["results"][0]["chunk_text"]

        tampered = _signed(server, "POST", "/v1/kb/pub/retrieve", {"query": "kettle"})
        tampered = httpx.Request(
            "POST",
            tampered.url,
            headers=tampered.headers,
            content=tampered.content.replace(b"kettle", b"kettlf"),
        )
        assert http.send(tampered).status_code == 401

        stale = _signed(
            server,
            "POST",
            "/v1/kb/pub/retrieve",
            {"query": "kettle"},
            at=dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(minutes=10),
        )
        assert http.send(stale).status_code == 401
        wrong_key = _signed(
            server, "POST", "/v1/kb/pub/retrieve", {"query": "kettle"}, secret="not-the-secret"
        )
        refused = http.send(wrong_key)
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"

        not_granted = http.send(_signed(server, "POST", "/v1/kb/pub/ask", {"question": "kettle?"}))
        assert not_granted.status_code == 403 and not_granted.json()["details"]["reason"] == "forbidden_tool"


def test_a_jwt_from_the_oidc_provider_is_a_person(server: Any) -> None:
    issuer = server.issuer
    good = issuer.issue("alice", audience="citegate")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        asked = http.post(
            "/api/v1/knowledge/query", json={"query": "kettle"}, headers={"Authorization": f"Bearer {good}"}
        )
        assert asked.status_code == 200, asked.text
        assert asked.json()["results"][0]["source"] == "kettle.txt"
        for bad in (
            issuer.issue("alice", audience="someone-else"),
            issuer.issue("alice", audience="citegate", expires_in=-120),
        ):
            refused = http.post(
                "/api/v1/knowledge/query",
                json={"query": "kettle"},
                headers={"Authorization": f"Bearer {bad}"},
            )
            assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        # People may not operate knowledge bases through the spec 004 routes.
        assert http.get("/v1/kb", headers={"Authorization": f"Bearer {good}"}).status_code == 403


def test_spec_000_routes_with_sigv4_agents_and_jwt_people(server: Any) -> None:
    """Section 10 over the wire: a person asks from the page with a JWT; a SigV4 agent uses the
    tools, and reaching outside its paths or for an ungranted tool is refused with spec 000's codes."""
    person = server.issuer.issue("alice", audience="citegate")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        asked = http.post(
            "/answer/ask",
            json={"question": "How long does the kettle take to boil water?"},
            headers={"Authorization": f"Bearer {person}"},
        )
        assert asked.status_code == 200, asked.text
        result = asked.json()
        assert (
            result["citations"][0]["path"] == "appliances/kettle.md" and result["audit"]["caller"] == "alice"
        )
        expired = server.issuer.issue("alice", audience="citegate", expires_in=-120)
        refused = http.post(
            "/answer/ask", json={"question": "kettle?"}, headers={"Authorization": f"Bearer {expired}"}
        )
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"

    with httpx.Client(timeout=60) as http:
        found = http.send(_signed(server, "POST", "/agent/tools/search", {"query": "kettle boils"}))
        assert found.status_code == 200, found.text
        assert found.json()["results"][0]["citation"]["path"] == "appliances/kettle.md"
        answer = http.send(
            _signed(server, "POST", "/agent/tools/ask", {"question": "How long does the kettle take?"})
        )
        assert answer.status_code == 200 and answer.json()["audit"]["caller"] == "research-bot"
        outside = http.send(
            _signed(
                server, "POST", "/agent/tools/ask", {"question": "kettle?", "scope": {"paths": ["garage"]}}
            )
        )
        assert outside.status_code == 403 and outside.json()["error"] == "forbidden_scope"
        tool = http.send(_signed(server, "POST", "/agent/tools/get_context", {"task": "kettle"}))
        assert tool.status_code == 403 and tool.json()["error"] == "forbidden_tool"
        tampered = _signed(server, "POST", "/agent/tools/search", {"query": "kettle"})
        tampered = httpx.Request(
            "POST", tampered.url, headers=tampered.headers, content=b'{"query": "kettlf"}'
        )
        assert http.send(tampered).status_code == 401


class _SigV4(httpx.Auth):
    """Signs each request the `openai` SDK sends (its own Authorization header replaced)."""

    requires_request_body = True

    def auth_flow(self, request: httpx.Request) -> Any:
        signed = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={"Content-Type": "application/json"},
        )
        SigV4Auth(Credentials(ACCESS_KEY, SECRET), "execute-api", "us-east-1").add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request


def test_the_openai_sdk_with_sigv4_is_the_agent(server: Any) -> None:
    """Issue 30: the OpenAI-compatible routes take a SigV4 signature as the API key."""
    import openai

    with httpx.Client(auth=_SigV4(), timeout=60) as http:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", http_client=http, max_retries=0)
        # The agent's policy grants the path prefix `appliances`: an answer scope, listed as a model.
        assert [m.id for m in client.models.list()] == [
            "citegate",
            "citegate@path=appliances",
            "citegate/pub",
            "citegate/pub@path=appliances",
        ]
        reply = client.chat.completions.create(
            model="citegate/pub",
            messages=[{"role": "user", "content": "How long does the kettle take to boil water?"}],
        )
        citations = (reply.model_extra or {})["citations"]
        assert "[1]" in (reply.choices[0].message.content or "")
        assert citations and citations[0]["source_name"] == "kettle.txt"
        annotations = reply.choices[0].message.annotations or []
        assert annotations and annotations[0].url_citation.title
    unsigned = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        unsigned.models.list()
