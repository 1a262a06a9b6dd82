"""Issue 18: bad input never gives a 5xx. Each kind of bad input the acceptance test sent, through
the gateway on the in-process stack, answered with a 4xx in the route family's JSON error shape
(or, for a model that answers garbage, the family's documented "model unavailable" answer).

The connection staying usable after each of them is checked over a real socket in
tests/e2e/test_fuzz_openapi.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.agents.models import ModelRegistry, ModelSpec
from citegate.answers.openai_chat import OpenAIChatAnswerer
from citegate.runtime.gateway import create_app
from tests.fakes.chat_stream_server import StreamingOpenAIServer
from tests.fakes.openai_server import GARBAGE
from tests.integration.conftest import ingest

pytestmark = pytest.mark.integration

CHATS = "/api/v1/agent/chats"
FACT = (
    "Olympus Mons on Mars is the tallest volcano in the solar system. "
    "It rises about 22 km above the surrounding plains."
)
QUESTION = "How high is Olympus Mons?"

# One body route of each family: (path, family); the path's {kb} is a knowledge base that exists.
FAMILY_ROUTES = [
    ("/v1/kb/{kb}/ask", "v1"),
    ("/v1/kb/{kb}/documents", "v1"),
    ("/api/v1/knowledge/query", "v1"),
    ("/answer/ask", "answer"),
    ("/agent/tools/search", "answer"),
    ("/api/v1/agent/chats", "chat"),
    ("/api/v2/query", "chat"),
]
INVALID = {"v1": "invalid_request", "answer": "invalid_request", "chat": "INVALID_REQUEST"}


def assert_error_shape(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "message", "requestId", "details"}, body
    assert body["error"] == code and body["message"] and body["requestId"]


@pytest.fixture(scope="module")
def facts(client: TestClient) -> str:
    kb = client.post("/v1/kb", json={"name": "bad input " + uuid.uuid4().hex[:6], "status": "approved"})
    kb_id = str(kb.json()["kb_id"])
    ingest(client, kb_id, text=f"# Mars\n\n{FACT}", source_name="mars.md")
    return kb_id


# -- the request body ------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "family"), FAMILY_ROUTES)
def test_a_body_that_is_not_utf8_is_a_400_in_the_family_shape(
    client: TestClient, facts: str, path: str, family: str
) -> None:
    body = b'{"question": "\xff\xfe", "query": "\xc3\x28", "name": "\xe2\x82"}'
    response = client.post(
        path.format(kb=facts), content=body, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert_error_shape(response, 400, INVALID[family])


@pytest.mark.parametrize(("path", "family"), FAMILY_ROUTES)
@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_json_nested_10000_levels_is_a_400_in_the_family_shape(
    client: TestClient, facts: str, path: str, family: str, opener: str
) -> None:
    closer = "]" if opener == "[" else "}"
    body = opener * 10_000 + ("" if opener == "[" else "1") + closer * 10_000
    response = client.post(path.format(kb=facts), content=body, headers={"Content-Type": "application/json"})
    assert_error_shape(response, 400, INVALID[family])


def test_mcp_refuses_bad_bodies_as_json_rpc_parse_errors(client: TestClient) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for body in (b'{"jsonrpc": "2.0", "method": "\xff"}', b"[" * 10_000 + b"]" * 10_000):
        response = client.post("/mcp", content=body, headers=headers)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == -32700


def test_metadata_nested_too_deeply_is_a_400(client: TestClient, kb: str) -> None:
    deep: Any = "leaf"
    for _ in range(400):  # parses (under the decoder's recursion limit), but no store takes it
        deep = {"a": deep}
    response = client.post(
        f"/v1/kb/{kb}/documents", json={"text": "hi", "source_name": "deep.md", "metadata": {"x": deep}}
    )
    assert_error_shape(response, 400, "invalid_request")
    assert "metadata" in response.json()["message"]


# -- file_path -------------------------------------------------------------------------------------


def test_a_nul_in_file_path_is_a_400(client: TestClient, kb: str, local_env: dict[str, Any]) -> None:
    (local_env["ingest_root"] / "notes.md").write_text("# Notes\n\nPlain notes.")
    response = client.post(f"/v1/kb/{kb}/documents", json={"file_path": "notes.md\x00.txt"})
    assert_error_shape(response, 400, "invalid_request")
    assert response.json()["details"]["fields"][0]["field"] == "file_path"


@pytest.mark.parametrize("file_path", ["x" * 300, "a/" + "y" * 300 + "/b.md"])
def test_a_file_path_the_system_cannot_name_is_a_400(client: TestClient, kb: str, file_path: str) -> None:
    response = client.post(f"/v1/kb/{kb}/documents", json={"file_path": file_path})
    assert_error_shape(response, 400, "invalid_request")
    assert response.json()["details"] == {"field": "file_path"}


# -- a model endpoint that answers 200 with garbage ------------------------------------------------


@pytest.fixture(scope="module")
def garbage_server() -> Iterator[StreamingOpenAIServer]:
    with StreamingOpenAIServer() as server:
        yield server


@pytest.fixture
def garbage_models(
    stack: Any, monkeypatch: pytest.MonkeyPatch, garbage_server: StreamingOpenAIServer
) -> StreamingOpenAIServer:
    """Every garbage behaviour as a chat model (and tool-calling planner) beside the offline one."""
    specs = [
        ModelSpec(id=name, label=name, model=name, base_url=garbage_server.url, api_key="k")
        for name in GARBAGE
    ]
    registry = ModelRegistry(specs, default_id="citegate-offline")
    monkeypatch.setitem(stack.services.__dict__, "chat_models", registry)
    return garbage_server


def use_answerer(stack: Any, monkeypatch: pytest.MonkeyPatch, url: str, model: str) -> None:
    answerer = OpenAIChatAnswerer(base_url=url, api_key="k", model=model, timeout=5)
    monkeypatch.setitem(stack.services.__dict__, "answerer", answerer)


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_a_garbage_answering_model_is_model_unavailable_on_v1_ask(
    client: TestClient,
    facts: str,
    stack: Any,
    monkeypatch: pytest.MonkeyPatch,
    garbage_server: StreamingOpenAIServer,
    garbage: str,
) -> None:
    use_answerer(stack, monkeypatch, garbage_server.url, garbage)
    response = client.post(f"/v1/kb/{facts}/ask", json={"question": QUESTION})
    assert_error_shape(response, 503, "model_unavailable")


@pytest.mark.parametrize("garbage", ["garbage-html", "garbage-json", "garbage-content"])
@pytest.mark.parametrize("path", ["/answer/ask", "/agent/tools/ask"])
def test_a_garbage_answering_model_is_ragflow_unavailable_on_the_answer_api(
    client: TestClient,
    facts: str,
    stack: Any,
    monkeypatch: pytest.MonkeyPatch,
    garbage_server: StreamingOpenAIServer,
    garbage: str,
    path: str,
) -> None:
    use_answerer(stack, monkeypatch, garbage_server.url, garbage)
    response = client.post(path, json={"question": QUESTION})
    assert_error_shape(response, 503, "ragflow_unavailable")


@pytest.mark.parametrize("garbage", ["garbage-html", "garbage-shape", "garbage-content"])
def test_garbage_model_knowledge_is_unavailable_not_an_empty_answer(
    garbage_server: StreamingOpenAIServer, garbage: str
) -> None:
    from citegate.answers.base import AnswererUnavailable

    answerer = OpenAIChatAnswerer(base_url=garbage_server.url, api_key="k", model=garbage, timeout=5)
    with pytest.raises(AnswererUnavailable):
        answerer.answer_from_model("What is the boiling point of tungsten?")  # type: ignore[attr-defined]


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_a_garbage_chat_model_is_model_not_available_never_an_empty_reply(
    client: TestClient, facts: str, garbage_models: StreamingOpenAIServer, garbage: str
) -> None:
    chat_id = client.post(CHATS, json={}).json()["id"]
    body = {"content": QUESTION, "model_id": garbage}
    response = client.post(f"{CHATS}/{chat_id}/messages", json=body)
    assert_error_shape(response, 400, "MODEL_NOT_AVAILABLE")  # spec 001 7.2's status for the code

    events = []
    with client.stream("POST", f"{CHATS}/{chat_id}/messages", json={**body, "stream": True}) as streamed:
        assert streamed.status_code == 200
        for line in streamed.iter_lines():
            if line:
                events.append(json.loads(line.removeprefix("data: ")))
    assert [e["type"] for e in events] == ["start", "error", "end"], events
    assert events[1]["error"] == "MODEL_NOT_AVAILABLE" and events[1]["message"]
    messages = client.get(f"{CHATS}/{chat_id}").json()["messages"]
    assert all(m["status"] == "failed" for m in messages if m["type"] == "assistant")


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_a_garbage_agent_model_ends_the_v2_stream_with_22(
    client: TestClient, facts: str, garbage_models: StreamingOpenAIServer, garbage: str
) -> None:
    agent_id = "garbage-" + uuid.uuid4().hex[:8]
    policy = {"tools": ["query_v2"], "knowledge_bases": [facts]}
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    reader = TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})
    with reader.stream("POST", "/api/v2/query", json={"query": QUESTION, "model_id": garbage}) as response:
        assert response.status_code == 200
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    types = [e["message_type"] for e in events]
    assert types[-2:] == [22, 0], events
    assert "chat completion" in events[-2]["content"], events[-2]
    assert 1 not in types, "no summary text was invented"
