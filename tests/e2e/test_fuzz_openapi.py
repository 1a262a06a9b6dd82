"""Schema fuzzing (issue 18): schemathesis generates requests from docs/openapi.json and sends them
to the real server (`citegate serve`) over loopback HTTP. No response may be a 5xx, and every error
response must be in the route family's JSON error shape.

Bounded and deterministic: a fixed number of examples per operation and generation mode, a fixed
seed, no shrinking, no example database. Each operation is fuzzed
- as the service (the spec 004 token), with valid and with schema-violating requests (negative
  mode also sends bodies that are not UTF-8 and headers of the wrong shape), once with random path
  parameters and once with the path parameters of resources that exist (a knowledge base with a
  document, a chat, an answer session), so requests reach past the lookups;
- with no credentials, and with forged ones (a JWT-shaped bearer token, an agent token and a
  caller agent key that were never issued).

The check looks at every response and reports all problems at once. Then a second test sends the
acceptance test's bad inputs on one keep-alive connection and checks that it stays usable.

Install: `uv sync --group fuzz` (schemathesis is in its own dependency group).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from citegate.api import routes
from citegate.governance.policy.model import PolicyUpdate
from tests.e2e.conftest import ROOT, TOKEN, Server

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402

pytestmark = pytest.mark.e2e

DOCUMENT = ROOT / "docs" / "openapi.json"
SCHEMA = schemathesis.openapi.from_path(DOCUMENT)
# Deletions last, so the resources the other operations are fuzzed against still exist.
LABELS = sorted(
    (op.ok().label for op in SCHEMA.get_all_operations()),
    key=lambda label: (label.startswith("DELETE"), label),
)
SEED = int(os.environ.get("CITEGATE_FUZZ_SEED", "18"))  # 18: the number
# Per operation, generation mode and path parameters, as the service. A longer exploration:
# CITEGATE_FUZZ_EXAMPLES=50 CITEGATE_FUZZ_SEED=1 pytest tests/e2e/test_fuzz_openapi.py
EXAMPLES = int(os.environ.get("CITEGATE_FUZZ_EXAMPLES", "3"))
ERROR_KEYS = {"error", "message", "requestId", "details"}
FORGED = [
    {"Authorization": "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImZvcmdlZCJ9.eyJzdWIiOiJtYWxsb3J5In0.c2ln"},
    {"Authorization": "Bearer cgat_forged0123456789abcdef"},
    {"X-Caller-Agent-Key": "cgak_forged0123456789abcdef"},
]
# A fuzzed policy must not give anyone the web (no network beyond loopback) or lock out the service.
PROTECTED_PRINCIPALS = ("anonymous", "service:", "human:")


@dataclass
class Stack:
    server: Server
    session: Any  # requests.Session: one keep-alive connection pool for every fuzzed request
    known: dict[str, str] = field(default_factory=dict)  # path parameters of resources that exist
    headers: dict[str, str] = field(default_factory=dict)  # per known resource (the session token)
    problems: list[str] = field(default_factory=list)
    responses: int = 0


def _seed_resources(client: Any) -> tuple[dict[str, str], dict[str, str]]:
    kb = client.post("/v1/kb", json={"kb_id": "fuzz", "name": "Fuzz", "status": "approved"})
    assert kb.status_code == 201, kb.text
    text = "# Mars\n\nOlympus Mons on Mars is the tallest volcano in the solar system, about 22 km high."
    accepted = client.post("/v1/kb/fuzz/documents", json={"text": text, "source_name": "mars.md"}).json()
    deadline = time.monotonic() + 60
    while client.get(f"/v1/tasks/{accepted['task_id']}").json()["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "the seed document was not ingested in time"
        time.sleep(0.1)
    # The service token's policy grants the web ("*"): take it away, so no fuzzed URL is fetched.
    policy = client.get("/admin/policies/service:rag-service").json()
    no_web = {k: v for k, v in policy.items() if k in PolicyUpdate.model_fields} | {"web": {"enabled": False}}
    updated = client.put("/admin/policies/service:rag-service", json=no_web)
    assert updated.status_code == 200 and not updated.json()["web"]["enabled"], updated.text
    chat = client.post("/api/v1/agent/chats", json={"title": "fuzz"}).json()
    session = client.post("/answer/sessions", json={}).json()
    issued = client.post("/admin/agents/fuzz-agent/credentials", json={"kind": "token"}).json()
    # An S3 source whose bucket does not exist: a fuzzed sync records a failed run, reads nothing.
    source = client.post(
        "/v1/kb/fuzz/sources",
        json={"name": "fuzz", "settings": {"kind": "s3", "bucket": "fuzz-no-such-bucket"}},
    )
    assert source.status_code == 201, source.text
    run = client.post(f"/v1/kb/fuzz/sources/{source.json()['source_id']}/sync")
    assert run.status_code == 202, run.text
    known = {
        "kb_id": "fuzz",
        "document_id": accepted["document_id"],
        "task_id": accepted["task_id"],
        "chat_id": chat["id"],
        "sessionId": session["sessionId"],
        "agent_id": "fuzz-agent",
        "credential_id": issued["credential_id"],
        "principal_key": "agent:fuzz-agent",
        "record_id": "none",
        "source_id": source.json()["source_id"],
        "run_id": run.json()["run_id"],
        "group_id": "none",
    }
    return known, {"X-Session-Token": session["sessionToken"]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    import requests

    root = tmp_path_factory.mktemp("fuzz")
    ingest_root = root / "ingest"
    ingest_root.mkdir()
    (ingest_root / "notes.md").write_text("# Notes\n\nPlain notes.")
    env = {
        "CITEGATE_EMBEDDER": "hashing",
        "CITEGATE_LOCAL_INGEST_ROOT": str(ingest_root),
        # Every request comes from 127.0.0.1: the per-address limit would turn most into 429s.
        "CITEGATE_IP_RATE_LIMIT": "1000000",
        # The fuzz sends hundreds of calls a minute with the service token: its limit is not tested here.
        "CITEGATE_DEFAULT_RATE_LIMIT": "1000000",
        "CITEGATE_WEB_BROWSER": "none",
    }
    server = Server(root / "data", env).start()
    try:
        with server.client() as client:
            known, headers = _seed_resources(client)
        session = requests.Session()
        session.trust_env = False  # loopback only, whatever proxies the environment names
        yield Stack(server, session, known, headers)
        session.close()
    finally:
        server.stop()


def header(response: Any, name: str) -> str:
    """A response header (schemathesis keeps each as a list of values)."""
    for key, values in response.headers.items():
        if key.lower() == name:
            return str(values[0] if isinstance(values, list) else values)
    return ""


def problem_with(label: str, response: Any) -> str | None:
    """Why a response breaks the rule, or None."""
    status = response.status_code
    if status >= 500:
        return f"{status}: {response.text[:300]}"
    if status < 400:
        return None
    if not header(response, "content-type").startswith("application/json"):
        return f"{status} is not JSON ({header(response, 'content-type')}): {response.text[:200]}"
    try:
        body = response.json()
    except ValueError:
        return f"{status} body is not JSON: {response.text[:200]}"
    if label == "POST /mcp" and isinstance(body, dict) and body.get("jsonrpc") == "2.0":
        # MCP's own protocol errors are JSON-RPC error objects (a parse error, a bad request).
        error = body.get("error")
        ok = isinstance(error, dict) and isinstance(error.get("code"), int)
        return None if ok else f"{status} JSON-RPC answer without an error object: {body}"
    if routes.family_of_path(label.split(" ", 1)[1]) == "openai":
        return openai_problem(status, body)
    if not isinstance(body, dict) or set(body) != ERROR_KEYS:
        return f"{status} not in the error shape: {str(body)[:300]}"
    code, message, request_id, details = (body[k] for k in ("error", "message", "requestId", "details"))
    if not (isinstance(code, str) and code and isinstance(message, str) and message):
        return f"{status} error/message empty or not text: {body}"
    if not isinstance(details, dict):
        return f"{status} details is not an object: {body}"
    if not request_id or request_id != header(response, "apigw-requestid"):
        return f"{status} requestId {request_id!r} is not the request's id"
    if status != 429 and routes.family_of_path(label.split(" ", 1)[1]) == "chat" and code != code.upper():
        return f"{status} spec 001 route answered a lower-case code {code!r}"
    return None


def openai_problem(status: int, body: Any) -> str | None:
    """The OpenAI-compatible routes' errors: OpenAI's `{"error": {message, type, param, code}}`."""
    error = body.get("error") if isinstance(body, dict) and set(body) == {"error"} else None
    if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"}:
        return f"{status} not in OpenAI's error shape: {str(body)[:300]}"
    if not all(isinstance(error[k], str) and error[k] for k in ("message", "type", "code")):
        return f"{status} OpenAI error with an empty message, type or code: {body}"
    return None


def conformance_problems(case: Any, response: Any) -> list[str]:
    """What schemathesis's response checks find: every status, content type, body and documented
    header must be what docs/openapi.json says for the operation (issue 19)."""
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )
    from schemathesis.core.failures import Failure, FailureGroup

    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]
    try:
        case.validate_response(response, checks=checks)
    except FailureGroup as group:
        return [
            f"{response.status_code} {failure.title}: {failure.message[:600]}" for failure in group.exceptions
        ]
    except Failure as failure:
        return [f"{response.status_code} {failure.title}: {failure.message[:600]}"]
    return []


def fuzz(
    stack: Stack,
    label: str,
    mode: Any,
    examples: int,
    headers: dict[str, str],
    *,
    drop: tuple[str, ...] = (),  # headers the generated case may carry that this caller must not
    path_parameters: dict[str, str] | None = None,
) -> None:
    operation = SCHEMA.find_operation_by_label(label)
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

    @seed(SEED)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(strategy)
    def send(case: Any) -> None:
        key = str((case.path_parameters or {}).get("principal_key", ""))
        if case.method.upper() == "PUT" and key.startswith(PROTECTED_PRINCIPALS):
            return
        for name in drop:
            (case.headers or {}).pop(name, None)
        response = case.call(base_url=stack.server.url, session=stack.session, headers=headers, timeout=30)
        stack.responses += 1
        problems = [problem_with(label, response), *conformance_problems(case, response)]
        for problem in filter(None, problems):
            sent = {"path": case.formatted_path, "query": case.query, "body": case.body}
            stack.problems.append(f"{label} [{mode.value}] {problem}\n    sent: {str(sent)[:400]}")

    with contextlib.suppress(Unsatisfiable):  # nothing to violate in this schema (negative mode)
        send()


@pytest.mark.parametrize("label", LABELS)
def test_no_5xx_and_every_error_in_the_json_shape(stack: Stack, label: str) -> None:
    from schemathesis import GenerationMode

    stack.problems.clear()
    service = {"Authorization": f"Bearer {TOKEN}"}
    params = [p.name for p in SCHEMA.find_operation_by_label(label).path_parameters]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        fuzz(stack, label, mode, EXAMPLES, service)
    if params:
        existing = {name: stack.known[name] for name in params}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(stack, label, mode, EXAMPLES, {**service, **stack.headers}, path_parameters=existing)
    credentials = ("Authorization", "X-Caller-Agent-Key", "X-Session-Token")
    for forged in ({}, *FORGED):  # no credentials, then each forged one: one request each
        fuzz(stack, label, GenerationMode.POSITIVE, 1, forged, drop=credentials)
    assert not stack.problems, "\n".join(stack.problems)


# -- the acceptance test's bad inputs, on one keep-alive connection -----------------------------------


def _send(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    assert response.getheader("connection", "").lower() != "close", (path, data[:200])
    return response.status, json.loads(data) if data else None


@pytest.mark.parametrize(
    ("name", "path", "body"),
    [
        ("not utf-8", "/v1/kb/fuzz/ask", b'{"question": "\xff\xfe\xc3\x28"}'),
        ("not utf-8 (chat)", "/api/v1/agent/chats", b'{"title": "\xe2\x82"}'),
        ("not utf-8 (answer)", "/answer/ask", b'{"question": "\xff"}'),
        ("nested 10,000 levels", "/v1/kb/fuzz/retrieve", b"[" * 10_000 + b"]" * 10_000),
        ("nested 10,000 levels (v2)", "/api/v2/query", b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
        ("NUL in file_path", "/v1/kb/fuzz/documents", json.dumps({"file_path": "notes.md\x00"}).encode()),
    ],
)
def test_bad_input_is_a_4xx_and_the_connection_stays_usable(
    stack: Stack, name: str, path: str, body: bytes
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", stack.server.port, timeout=30)
    try:
        status, error = _send(conn, "POST", path, body)
        assert 400 <= status < 500, (name, status, error)
        assert set(error) == ERROR_KEYS and error["error"].lower() == "invalid_request", (name, error)
        sock = conn.sock
        assert _send(conn, "GET", "/healthz", None)[0] == 200
        assert conn.sock is sock, "the server closed the connection after the bad request"
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/kb/a%0Ab"),  # a newline inside a path parameter
        ("POST", "/api/v1/agent/chats/%0Ax/messages"),
        ("TRACE", "/v1/kb"),  # methods no route takes
        ("PROPFIND", "/healthz"),
    ],
)
def test_what_the_router_refuses_is_json_too(stack: Stack, method: str, path: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", stack.server.port, timeout=30)
    try:
        conn.request(method, path, body=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        body = response.read()
        assert 400 <= response.status < 500, (response.status, body[:200])
        assert response.getheader("content-type", "").startswith("application/json"), body[:200]
        assert set(json.loads(body)) == ERROR_KEYS
    finally:
        conn.close()


def test_the_document_is_current() -> None:
    from citegate.api import openapi

    assert Path(DOCUMENT).read_text() == openapi.render(openapi.build_openapi()), (
        "docs/openapi.json is stale: run `python -m citegate.api.openapi`"
    )
