"""Spec 001's agent chats through the local gateway: ownership, model switching, SSE and JSON
replies, history, a model failing midway, the web by policy, cookie authentication and CSRF.

Everything runs on the in-process stack (embedded AWS, hashing embedder, offline answerer); chat
models are the streaming fake OpenAI server on loopback, registered for the test's duration.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.agents.models import ModelRegistry, ModelSpec
from citegate.runtime.gateway import create_app
from tests.fakes.chat_stream_server import StreamingOpenAIServer
from tests.integration.conftest import TOKEN, ingest

pytestmark = pytest.mark.integration

CHATS = "/api/v1/agent/chats"
RIDGE = (
    "Zorvath Ridge is the tallest mountain range on the planet Quellar. "
    "Zorvath Ridge rises about 31 kilometres above the Quellar plains. "
    "The ridge was first mapped by the Brennik survey in 2091."
)
PLANETS = (
    "Which planet is the largest in the Tarsine system? The largest planet is Vossk. "
    "Vossk is a gas giant and the planet has forty moons."
)


@pytest.fixture(scope="module")
def chat_kb(client: TestClient) -> str:
    """An approved knowledge base with a fact and a distractor (chats read approved ones)."""
    kb = client.post("/v1/kb", json={"name": "Quellar atlas", "status": "approved"}).json()["kb_id"]
    ingest(client, kb, text=RIDGE, source_name="zorvath.md", title="Zorvath Ridge")
    ingest(client, kb, text=PLANETS, source_name="tarsine.md", title="Tarsine planets")
    return kb


@pytest.fixture
def models(stack: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[StreamingOpenAIServer]:
    """Chat models on the fake server, beside the offline one, for this test only."""
    with StreamingOpenAIServer() as server:
        specs = [
            ModelSpec(id=name, label=name, model=name, base_url=server.url, api_key="k")
            for name in ("chat-stream", "chat-stream-nocite", "chat-stream-error", "chat-stream-cut")
        ]
        monkeypatch.setitem(
            stack.services.__dict__, "chat_models", ModelRegistry(specs, default_id="citegate-offline")
        )
        yield server


def agent(client: TestClient, **policy: Any) -> TestClient:
    """A client acting as a new agent with its own token and policy (chat granted)."""
    agent_id = "chat-" + uuid.uuid4().hex[:8]
    grant = {"tools": ["chat"], "knowledge_bases": ["*"], **policy}
    assert client.put(f"/admin/policies/agent:{agent_id}", json=grant).status_code == 200
    issued = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"})
    assert issued.status_code == 201, issued.text
    return TestClient(create_app(), headers={"Authorization": f"Bearer {issued.json()['secret']}"})


def new_chat(caller: TestClient, title: str | None = None) -> str:
    response = caller.post(CHATS, json={"title": title} if title else {})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def send(caller: TestClient, chat_id: str, content: str, **options: Any) -> dict[str, Any]:
    response = caller.post(f"{CHATS}/{chat_id}/messages", json={"content": content, **options})
    assert response.status_code == 200, response.text
    return dict(response.json())


def stream(caller: TestClient, chat_id: str, content: str, **options: Any) -> list[dict[str, Any]]:
    """The events of a streamed reply, read line by line as a client reads them."""
    body = {"content": content, "stream": True, **options}
    events = []
    with caller.stream("POST", f"{CHATS}/{chat_id}/messages", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line:
                assert line.startswith("data: "), line
                events.append(json.loads(line[len("data: ") :]))
    return events


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["content"] for e in events if e["type"] == "content")


# -- chats: create, list, get, rename, delete, ownership -----------------------------------------


def test_create_list_get_rename_delete(client: TestClient) -> None:
    created = client.post(CHATS, json={"title": "技术问题讨论"})
    assert created.status_code == 201
    chat = created.json()
    assert set(chat) == {"id", "title", "created", "updated"} and chat["id"].startswith("chat_")
    assert chat["title"] == "技术问题讨论" and chat["created"] == chat["updated"]
    other = new_chat(client)

    listed = client.get(CHATS).json()["items"]
    ids = [item["id"] for item in listed]
    assert ids.index(other) < ids.index(chat["id"]), "most recently updated first"

    renamed = client.patch(f"{CHATS}/{chat['id']}", json={"title": "Renamed"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Renamed"
    assert renamed.json()["updated"] > chat["updated"]
    ids = [item["id"] for item in client.get(CHATS).json()["items"]]
    assert ids.index(chat["id"]) < ids.index(other), "a rename moves the chat up"

    detail = client.get(f"{CHATS}/{chat['id']}").json()
    assert detail == {**renamed.json(), "messages": []}

    assert client.delete(f"{CHATS}/{chat['id']}").json() == {"id": chat["id"], "deleted": True}
    gone = client.get(f"{CHATS}/{chat['id']}")
    assert gone.status_code == 404 and gone.json()["error"] == "CHAT_NOT_FOUND"
    assert chat["id"] not in [item["id"] for item in client.get(CHATS).json()["items"]]
    assert client.delete(f"{CHATS}/{chat['id']}").json()["error"] == "CHAT_NOT_FOUND"


def test_delete_removes_every_message(client: TestClient, chat_kb: str, stack: Any) -> None:
    chat_id = new_chat(client)
    send(client, chat_id, "How tall is Zorvath Ridge?")
    owner = f"service:{stack.services.settings.default_tenant}:{stack.services.settings.service_principal_id}"
    assert len(stack.services.chats.messages(owner, chat_id)) == 2
    assert client.delete(f"{CHATS}/{chat_id}").status_code == 200
    assert stack.services.chats.messages(owner, chat_id) == []


def test_another_caller_gets_chat_not_found(client: TestClient) -> None:
    chat_id = new_chat(client, "mine")
    with agent(client) as stranger:
        for response in (
            stranger.get(f"{CHATS}/{chat_id}"),
            stranger.patch(f"{CHATS}/{chat_id}", json={"title": "taken"}),
            stranger.delete(f"{CHATS}/{chat_id}"),
            stranger.post(f"{CHATS}/{chat_id}/messages", json={"content": "hello"}),
            stranger.post(f"{CHATS}/{chat_id}/messages", json={"content": "hello", "stream": True}),
        ):
            assert response.status_code == 404 and response.json()["error"] == "CHAT_NOT_FOUND"
        unknown = stranger.get(f"{CHATS}/chat_{uuid.uuid4().hex}").json()
        assert unknown["error"] == "CHAT_NOT_FOUND"
        assert chat_id not in [item["id"] for item in stranger.get(CHATS).json()["items"]]
    assert client.get(f"{CHATS}/{chat_id}").json()["title"] == "mine", "untouched"


def test_anonymous_callers_are_refused() -> None:
    with TestClient(create_app()) as anonymous:
        for response in (
            anonymous.get(CHATS),
            anonymous.post(CHATS, json={}),
            anonymous.get("/api/v1/agent/models"),
        ):
            assert response.status_code == 401 and response.json()["error"] == "UNAUTHORIZED"


def test_a_retried_create_or_send_does_not_duplicate(client: TestClient, chat_kb: str) -> None:
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = client.post(CHATS, json={"title": "once"}, headers=key).json()
    again = client.post(CHATS, json={"title": "once"}, headers=key).json()
    assert first == again
    assert [item["id"] for item in client.get(CHATS).json()["items"]].count(first["id"]) == 1

    key = {"Idempotency-Key": uuid.uuid4().hex}
    url = f"{CHATS}/{first['id']}/messages"
    reply = client.post(url, json={"content": "How tall is Zorvath Ridge?"}, headers=key).json()
    retried = client.post(url, json={"content": "How tall is Zorvath Ridge?"}, headers=key).json()
    assert retried == reply
    streamed_retry = stream_with_headers(client, url, "How tall is Zorvath Ridge?", key)
    assert streamed_retry[0] == {"type": "start", "message_id": reply["id"]}
    assert text_of(streamed_retry) == reply["content"]
    messages = client.get(f"{CHATS}/{first['id']}").json()["messages"]
    assert [m["type"] for m in messages] == ["user", "assistant"]


def test_a_retry_after_a_failure_is_answered_without_a_second_user_message(
    client: TestClient, chat_kb: str, models: StreamingOpenAIServer
) -> None:
    chat_id, key = new_chat(client), {"Idempotency-Key": uuid.uuid4().hex}
    url, question = f"{CHATS}/{chat_id}/messages", "How tall is Zorvath Ridge?"
    failed = client.post(url, json={"content": question, "model_id": "chat-stream-error"}, headers=key)
    assert failed.status_code == 400 and failed.json()["error"] == "MODEL_NOT_AVAILABLE"
    retried = client.post(url, json={"content": question}, headers=key)
    assert retried.status_code == 200 and "31 kilometres" in retried.json()["content"]
    messages = client.get(f"{CHATS}/{chat_id}").json()["messages"]
    assert [(m["type"], m.get("status")) for m in messages] == [
        ("user", None),
        ("assistant", "failed"),
        ("assistant", None),
    ]
    assert client.post(url, json={"content": question}, headers=key).json() == retried.json()


def stream_with_headers(caller: TestClient, url: str, content: str, headers: dict[str, str]) -> list[Any]:
    body = {"content": content, "stream": True}
    with caller.stream("POST", url, json=body, headers=headers) as response:
        return [json.loads(line[6:]) for line in response.iter_lines() if line]


# -- replies: JSON and SSE, sources, history --------------------------------------------------------


def test_json_reply_cites_the_knowledge_base_and_is_stored(client: TestClient, chat_kb: str) -> None:
    chat_id = new_chat(client)
    reply = send(client, chat_id, "How tall is Zorvath Ridge?")
    assert set(reply) == {"id", "content", "sources", "web_search_results", "model_used", "created", "parts"}
    assert reply["id"].startswith("msg_") and reply["model_used"] == "citegate-offline"
    assert "31 kilometres" in reply["content"] and "[1]" in reply["content"]
    assert reply["web_search_results"] is None
    assert [p["source"] for p in reply["parts"]] == ["knowledge_base"]
    top = reply["sources"][0]
    assert {"collection_id", "collection_name", "score", "text", "metadata"} <= set(top)
    assert top["id"] == 1 and top["cited"] is True and top["collection_id"] == chat_kb
    assert top["collection_name"] == "Quellar atlas" and top["metadata"]["source"] == "Zorvath Ridge"
    assert "Zorvath" in top["text"]

    detail = client.get(f"{CHATS}/{chat_id}").json()
    user, assistant = detail["messages"]
    assert user["type"] == "user" and user["content"] == "How tall is Zorvath Ridge?"
    assert set(user) == {"id", "type", "content", "web_search_enabled", "model_used", "timestamp"}
    assert assistant["id"] == reply["id"] and assistant["content"] == reply["content"]
    assert assistant["sources"] == reply["sources"] and assistant["timestamp"] == reply["created"]
    assert detail["title"] == "How tall is Zorvath Ridge?", "the first message titles an untitled chat"
    assert detail["updated"] >= reply["created"]


def test_stream_sends_start_deltas_sources_end_and_agrees_with_json(client: TestClient, chat_kb: str) -> None:
    events = stream(client, new_chat(client), "How tall is Zorvath Ridge?")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-2:] == ["sources", "end"]
    assert set(kinds[1:-2]) == {"content"} and len(kinds) - 3 > 1, "several deltas"
    assert events[0]["message_id"] == events[-1]["message_id"]
    deltas = [e["content"] for e in events if e["type"] == "content"]
    assert all(e["source"] == "knowledge_base" for e in events if e["type"] == "content")
    assert not any(deltas[i].startswith(deltas[i - 1]) for i in range(1, len(deltas))), "deltas, not totals"

    reply = send(client, new_chat(client), "How tall is Zorvath Ridge?")
    assert text_of(events) == reply["content"]
    assert events[-2]["sources"] == reply["sources"] and events[-2]["web_search_results"] is None


def test_history_informs_a_follow_up(client: TestClient, chat_kb: str) -> None:
    question = "Which planet is it on?"
    alone = send(client, new_chat(client), question)
    assert "Zorvath" not in alone["sources"][0]["text"], "the question alone finds the distractor first"

    chat_id = new_chat(client)
    send(client, chat_id, "How tall is Zorvath Ridge?")
    follow_up = send(client, chat_id, question)
    assert "Zorvath" in follow_up["sources"][0]["text"]


def test_a_model_gets_the_history_and_its_dangling_markers_are_dropped(
    client: TestClient, chat_kb: str, models: StreamingOpenAIServer
) -> None:
    chat_id = new_chat(client)
    first = stream(client, chat_id, "How tall is Zorvath Ridge?", model_id="chat-stream")
    answer = text_of(first)
    assert "[1]" in answer and "[9]" not in answer, "[9] points at no source"
    assert first[-2]["sources"][0]["cited"] is True
    send(client, chat_id, "When was it first mapped?", model_id="chat-stream")
    messages = models.requests[-1]["messages"]
    assert messages[0]["role"] == "system"
    assert messages[1] == {"role": "user", "content": "How tall is Zorvath Ridge?"}
    assert messages[2]["role"] == "assistant" and "[1]" not in messages[2]["content"]
    assert messages[-1]["content"].startswith("When was it first mapped?")
    stored = client.get(f"{CHATS}/{chat_id}").json()["messages"]
    assert [m["model_used"] for m in stored] == ["chat-stream"] * 4


# -- models ------------------------------------------------------------------------------------------


def test_models_list_and_unknown_model(client: TestClient, models: StreamingOpenAIServer) -> None:
    listed = client.get("/api/v1/agent/models").json()
    by_id = {item["id"]: item for item in listed["items"]}
    assert listed["default_model_id"] == "citegate-offline" and by_id["citegate-offline"]["default"]
    assert by_id["citegate-offline"]["offline"] and not by_id["citegate-offline"]["model_knowledge"]
    assert by_id["chat-stream"]["tool_calling"] and not by_id["chat-stream"]["offline"]
    # The service principal's policy grants every tool, so the web too, but not model knowledge.
    assert not by_id["chat-stream"]["model_knowledge"] and listed["web_search_allowed"] is True

    chat_id = new_chat(client)
    for body in (
        {"content": "hi", "model_id": "gpt-nope"},
        {"content": "hi", "model_id": "x", "stream": True},
    ):
        refused = client.post(f"{CHATS}/{chat_id}/messages", json=body)
        assert refused.status_code == 400 and refused.json()["error"] == "MODEL_NOT_AVAILABLE"
        assert "citegate-offline" in refused.json()["details"]["available"]
        assert refused.json()["details"]["reason"] == "model_not_available"
    assert client.get(f"{CHATS}/{chat_id}").json()["messages"] == [], "nothing stored for a refused model"


def test_switching_models_within_a_chat(
    client: TestClient, chat_kb: str, models: StreamingOpenAIServer
) -> None:
    chat_id = new_chat(client)
    offline = send(client, chat_id, "How tall is Zorvath Ridge?")
    online = send(client, chat_id, "How tall is Zorvath Ridge?", model_id="chat-stream")
    assert offline["model_used"] == "citegate-offline" and online["model_used"] == "chat-stream"
    assert online["content"] != offline["content"] and "[1]" in online["content"]


def test_a_model_failing_midway_ends_the_stream_with_an_error(
    client: TestClient, chat_kb: str, models: StreamingOpenAIServer
) -> None:
    for model in ("chat-stream-error", "chat-stream-cut"):
        chat_id = new_chat(client)
        events = stream(client, chat_id, "How tall is Zorvath Ridge?", model_id=model)
        kinds = [e["type"] for e in events]
        assert kinds[0] == "start" and "content" in kinds and kinds[-2:] == ["error", "end"], (model, kinds)
        assert events[-2]["error"] == "MODEL_NOT_AVAILABLE" and events[-2]["message"]
        assert "sources" not in kinds
        assistant = client.get(f"{CHATS}/{chat_id}").json()["messages"][-1]
        assert assistant["status"] == "failed" and assistant["error"] == "MODEL_NOT_AVAILABLE"
        assert assistant["content"] == text_of(events), "what the client saw is what is kept"

    failed = client.post(
        f"{CHATS}/{new_chat(client)}/messages",
        json={"content": "How tall is Zorvath Ridge?", "model_id": "chat-stream-error"},
    )
    # Spec 001 7.2's table: MODEL_NOT_AVAILABLE is 400, whether the model is unknown or failed;
    # details.reason tells the two apart.
    assert failed.status_code == 400 and failed.json()["error"] == "MODEL_NOT_AVAILABLE"
    assert failed.json()["details"]["reason"] == "model_unavailable"


# -- source priority: knowledge base, model knowledge, web --------------------------------------------


@pytest.fixture(scope="module")
def empty_kb(client: TestClient) -> str:
    return str(client.post("/v1/kb", json={"name": "empty shelf", "status": "approved"}).json()["kb_id"])


def test_an_empty_knowledge_base_declines_and_model_knowledge_only_where_allowed(
    client: TestClient, empty_kb: str, models: StreamingOpenAIServer
) -> None:
    question = {"content": "At what temperature does tungsten boil?", "model_id": "chat-stream"}
    with agent(client, knowledge_bases=[empty_kb]) as strict:
        declined = send(strict, new_chat(strict), **question)
    assert declined["sources"] == [] and [p["source"] for p in declined["parts"]] == ["notice"]
    assert "could not find" in declined["content"] and "tungsten" not in declined["content"]

    with agent(client, knowledge_bases=[empty_kb], model_fallback=True) as allowed:
        events = stream(allowed, new_chat(allowed), **question)
    labels = [e["source"] for e in events if e["type"] == "content"]
    assert labels[0] == "notice" and set(labels[1:]) == {"model"}
    model_part = "".join(e["content"] for e in events if e.get("source") == "model")
    assert model_part.lstrip().startswith("Not from the knowledge base") and "tungsten" in model_part
    assert "[1]" not in model_part, "no citation marker without a source"
    assert events[-2]["sources"] == []


def test_an_uncited_model_summary_falls_back_to_labelled_model_knowledge(
    client: TestClient, chat_kb: str, models: StreamingOpenAIServer
) -> None:
    with agent(client, model_fallback=True) as allowed:
        reply = send(allowed, new_chat(allowed), "How tall is Zorvath Ridge?", model_id="chat-stream-nocite")
    assert [p["source"] for p in reply["parts"]] == ["knowledge_base", "model"]
    assert "cites none of the references" in reply["parts"][0]["content"]
    assert not any(source["cited"] for source in reply["sources"])


def test_web_asked_for_but_not_allowed_by_policy(client: TestClient, chat_kb: str) -> None:
    with agent(client) as caller:  # tools ["chat"] and no web grant (the service token's "*" has it)
        reply = send(caller, new_chat(caller), "How tall is Zorvath Ridge?", web_search_enabled=True)
    assert [p["source"] for p in reply["parts"]] == ["knowledge_base", "notice"]
    assert "policy does not allow the web" in reply["parts"][1]["content"]
    assert reply["web_search_results"] is None and reply["sources"][0]["cited"]


def test_web_allowed_without_a_provider_says_so(client: TestClient, chat_kb: str) -> None:
    with agent(client, web={"enabled": True}) as caller:
        reply = send(caller, new_chat(caller), "How tall is Zorvath Ridge?", web_search_enabled=True)
    assert [p["source"] for p in reply["parts"]] == ["knowledge_base", "notice"]
    assert "no web search provider is configured" in reply["parts"][1]["content"]


def test_web_results_come_after_the_knowledge_base_labelled(
    client: TestClient, chat_kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.web.search import SearxngSearch
    from citegate.web.service import WebConfig, WebService
    from tests.unit.web.pages import serve

    with serve() as (base, _):
        s = stack.services
        web = WebService(WebConfig(), counters=s.counters, provider=SearxngSearch(f"{base}/searxng"))
        monkeypatch.setitem(s.__dict__, "web", web)
        with agent(client, web={"enabled": True, "domains": ["docs.example.com"]}) as caller:
            chat_id = new_chat(caller)
            events = stream(caller, chat_id, "How tall is Zorvath Ridge?", web_search_enabled=True)
            stored = caller.get(f"{CHATS}/{chat_id}").json()["messages"][-1]
    labels = [e["source"] for e in events if e["type"] == "content"]
    assert (
        labels[0] == "knowledge_base" and labels[-1] == "web" and "web" not in labels[: labels.index("web")]
    )
    results = events[-2]["web_search_results"]
    assert [r["domain"] for r in results] == ["docs.example.com"] * 3, "the policy's domains hold"
    assert "https://docs.example.com/1" in text_of(events)
    assert stored["web_search_results"] == results and stored["web_search_enabled"] is True


# -- cookie authentication and CSRF ----------------------------------------------------------------------


def test_cookie_authentication_with_csrf_protection(client: TestClient) -> None:
    cookie = {"Cookie": f"citegate_token={TOKEN}"}
    with TestClient(create_app()) as browser:
        assert browser.get(CHATS, headers=cookie).status_code == 200, "a read needs no Origin"
        own = browser.post(CHATS, json={}, headers={**cookie, "Origin": "http://testserver"})
        assert own.status_code == 201, own.text
        assert client.get(f"{CHATS}/{own.json()['id']}").status_code == 200, "the same owner as the token"

        for refused in (
            browser.post(CHATS, json={}, headers={**cookie, "Origin": "https://evil.example"}),
            browser.post(CHATS, json={}, headers=cookie),  # no Origin, no Referer
            browser.delete(f"{CHATS}/{own.json()['id']}", headers={**cookie, "Origin": "null"}),
        ):
            assert refused.status_code == 403 and refused.json()["error"] == "FORBIDDEN", refused.text
        referer = browser.post(CHATS, json={}, headers={**cookie, "Referer": "http://testserver/chat"})
        assert referer.status_code == 201
        bad = browser.get(CHATS, headers={"Cookie": "citegate_token=wrong"})
        assert bad.status_code == 401 and bad.json()["error"] == "UNAUTHORIZED"
