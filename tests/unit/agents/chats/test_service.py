"""A chat turn with fakes: labelled parts in source order, JSON and SSE agreeing, history within the
budget, failures and disconnects stored as such, the web and model knowledge only where allowed."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from citegate.agents.chats import service
from citegate.agents.chats.service import Turn, history_for_model, retrieval_query
from citegate.agents.chats.store import TurnStart
from citegate.agents.models import ModelSpec
from citegate.agents.schemas.chats import MessageBody
from citegate.governance.calls import Authorized
from citegate.governance.policy.model import EffectiveScope, Policy, WebGrant
from citegate.knowledge.schemas.kb import KnowledgeBase
from citegate.knowledge.search.base import ChunkRecord, Hit
from citegate.platform.errors import ModelUnavailable, RateLimited
from citegate.platform.principal import Principal
from citegate.platform.settings import Settings
from citegate.web import WebSearchFailed
from citegate.web.schemas import WebSearchResponse, WebSearchResult, WebSearchResultItem

ONLINE = ModelSpec("fake-model", "fake", model="fake", base_url="http://127.0.0.1:9/v1")
ANSWER = ["Zorvath Ridge rises", " about 31 km [", "1] and [", "7] more."]


class FakeModel:
    def __init__(self, spec: ModelSpec, deltas: list[str], fail_after: int | None = None) -> None:
        self.spec, self.deltas, self.fail_after = spec, deltas, fail_after
        self.calls: list[list[dict[str, Any]]] = []

    def stream(self, messages: list[dict[str, Any]], *, temperature: float = 0.3) -> Iterator[str]:
        self.calls.append(messages)
        for n, delta in enumerate(self.deltas):
            if self.fail_after is not None and n == self.fail_after:
                raise ModelUnavailable("the model is unreachable")
            yield delta


class FakeStore:
    def __init__(self) -> None:
        self.finished: list[dict[str, Any]] = []

    def finish_turn(
        self, chat: dict[str, Any], message: dict[str, Any], *, guard_sk: str | None = None
    ) -> bool:
        self.finished.append(message)
        return True


class FakeWeb:
    def __init__(self, outcome: WebSearchResponse | Exception) -> None:
        self.outcome = outcome

    def search(self, *args: Any) -> WebSearchResponse:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def chunk(ref: str, text: str) -> ChunkRecord:
    return ChunkRecord(ref, "kb1", "t", "doc-" + ref, "p-" + ref, ref + ".md", text, title=ref.title())


HITS = [Hit(chunk("ridge", "Zorvath Ridge rises about 31 km."), 0.9), Hit(chunk("vossk", "Vossk."), 0.4)]


def turn(
    monkeypatch: pytest.MonkeyPatch,
    *,
    model: FakeModel | None = None,
    hits: list[Hit] = HITS,
    policy: dict[str, Any] | None = None,
    web: WebSearchResponse | Exception | None = None,
    history: list[dict[str, Any]] | None = None,
    answered: dict[str, Any] | None = None,
    **body: Any,
) -> tuple[Turn, SimpleNamespace]:
    model = model or FakeModel(ONLINE, ANSWER)
    monkeypatch.setattr(service, "retrieve", lambda *a, **k: SimpleNamespace(hits=list(hits)))
    kb = KnowledgeBase(
        kb_id="kb1", tenant_id="t", name="Atlas", status="approved", created_at="", updated_at=""
    )
    s = SimpleNamespace(
        settings=Settings.model_validate({"chat_history_tokens": 200}),
        chats=FakeStore(),
        chat_models=SimpleNamespace(client=lambda spec, timeout: model),
        kbs=SimpleNamespace(list=lambda tenant: [kb]),
        counters=SimpleNamespace(add=lambda *a: None),
        web=FakeWeb(web if web is not None else WebSearchFailed("x", details={"reason": "not_configured"})),
        model=model,
    )
    principal = Principal(type="human", id="alice", tenant_id="t")
    grant = Policy(
        principal_key="human:alice", tenant_id="t", tools=["chat"], knowledge_bases=["*"], **(policy or {})
    )
    call = Authorized(principal, grant, EffectiveScope())
    chat = {"owner_key": "human:t:alice", "chat_id": "chat_1"}
    message = MessageBody.model_validate({"content": "How tall is Zorvath Ridge?", **body})
    start = TurnStart({"message_id": "msg_u", "sk": "msg#chat_1#1#msg_u"}, None, answered)
    return Turn(s, call, chat, model.spec, message, start, history or []), s  # type: ignore[arg-type]


def test_json_and_stream_agree_and_dangling_markers_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    streamed, s1 = turn(monkeypatch)
    events = list(streamed.events())
    replied, s2 = turn(monkeypatch)
    reply = replied.reply()
    assert [e["type"] for e in events] == ["start", *["content"] * (len(events) - 3), "sources", "end"]
    text = "".join(e["content"] for e in events if e["type"] == "content")
    assert text == reply.content == "Zorvath Ridge rises about 31 km [1] and  more."
    assert events[-2]["sources"] == [source.model_dump() for source in reply.sources]
    assert [(x.id, x.cited, x.collection_name) for x in reply.sources] == [
        (1, True, "Atlas"),
        (2, False, "Atlas"),
    ]
    assert [p.source for p in reply.parts] == ["knowledge_base"]
    assert s1.chats.finished[0]["status"] == s2.chats.finished[0]["status"] == "complete"
    assert s1.chats.finished[0]["content"] == text


def test_a_client_that_disconnects_leaves_an_interrupted_message(monkeypatch: pytest.MonkeyPatch) -> None:
    t, s = turn(monkeypatch)
    events = t.events()
    shown = [next(events), next(events)]
    events.close()
    assert s.chats.finished == []  # closing the events writes nothing: it may happen in a finalizer
    t.interrupted()  # what the stream's reader calls, on the request's own path
    t.interrupted()
    assert shown[0]["type"] == "start"
    [stored] = s.chats.finished
    assert stored["status"] == "interrupted" and stored["content"] == shown[1]["content"]


def test_a_completed_reply_is_not_marked_interrupted_by_a_late_hang_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t, s = turn(monkeypatch)
    list(t.events())
    t.interrupted()
    assert [m["status"] for m in s.chats.finished] == ["complete"]


def test_a_model_failing_midway_is_stored_as_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    t, s = turn(monkeypatch, model=FakeModel(ONLINE, ANSWER, fail_after=2))
    events = t.events()
    kinds = []
    with pytest.raises(ModelUnavailable):
        for event in events:
            kinds.append(event["type"])
    assert kinds == ["start", "content", "content"]
    stored = s.chats.finished[-1]
    assert stored["status"] == "failed" and stored["error"] == "MODEL_NOT_AVAILABLE"
    assert stored["content"] == "Zorvath Ridge rises about 31 km "
    frames = t.failure_frames("MODEL_NOT_AVAILABLE", "the model is unreachable")
    assert [f["type"] for f in frames] == ["error", "end"] and frames[0]["error"] == "MODEL_NOT_AVAILABLE"


def test_model_knowledge_only_when_the_knowledge_base_has_nothing_and_the_policy_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    general = ["Tungsten boils at", " 5,900 °C [1]."]
    strict, _ = turn(monkeypatch, model=FakeModel(ONLINE, general), hits=[])
    reply = strict.reply()
    assert [p.source for p in reply.parts] == ["notice"] and reply.sources == []
    allowed, s = turn(monkeypatch, model=FakeModel(ONLINE, general), hits=[], policy={"model_fallback": True})
    reply = allowed.reply()
    assert [p.source for p in reply.parts] == ["notice", "model"]
    assert reply.parts[1].content.endswith("Tungsten boils at 5,900 °C .") and "[1]" not in reply.content
    assert s.model.calls[-1][-1] == {"role": "user", "content": "How tall is Zorvath Ridge?"}
    cited, _ = turn(monkeypatch, policy={"model_fallback": True})
    assert [p.source for p in cited.reply().parts] == ["knowledge_base"], "a cited answer needs no fallback"


def test_web_parts_by_policy_and_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = {"web": WebGrant(enabled=True)}
    refused, _ = turn(monkeypatch, web_search_enabled=True)
    reply = refused.reply()
    assert [p.source for p in reply.parts] == [
        "knowledge_base",
        "notice",
    ] and reply.web_search_results is None
    assert "does not allow the web" in reply.parts[1].content

    unconfigured, _ = turn(monkeypatch, policy=allowed, web_search_enabled=True)
    assert "no web search provider" in unconfigured.reply().parts[1].content

    quota, _ = turn(monkeypatch, policy=allowed, web=RateLimited("slow down"), web_search_enabled=True)
    assert "Web search failed: slow down" in quota.reply().parts[1].content

    item = WebSearchResultItem(
        rank=1, title="Ridge", url="https://e.example/r", snippet="tall", domain="e.example"
    )
    found = WebSearchResponse(  # the route's results; a chat keeps spec 3.2.1's fields of each
        query="q",
        results=[WebSearchResult(**item.model_dump())],
        search_engine="google",
        total_results=1,
        search_time=0.1,
    )
    searched, s = turn(monkeypatch, policy=allowed, web=found, web_search_enabled=True)
    reply = searched.reply()
    assert [p.source for p in reply.parts] == ["knowledge_base", "web"]
    assert "https://e.example/r" in reply.parts[1].content and reply.web_search_results == [item]
    assert s.chats.finished[-1]["web_search_results"][0]["url"] == "https://e.example/r"

    not_asked, _ = turn(monkeypatch, policy=allowed, web=found)
    assert not_asked.reply().web_search_results is None


def test_a_retried_send_replays_the_stored_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = {
        "message_id": "msg_a",
        "content": "A. [1]",
        "parts": [{"source": "knowledge_base", "content": "A. [1]"}],
        "sources": [],
        "web_search_results": None,
        "model_used": "fake-model",
        "timestamp": "2030-01-01T00:00:00Z",
    }
    t, s = turn(monkeypatch, answered=stored)
    events = list(t.events())
    assert events[0] == {"type": "start", "message_id": "msg_a"} and events[1]["content"] == "A. [1]"
    assert t.reply().id == "msg_a" and s.chats.finished == [] and s.model.calls == []


def test_history_within_the_budget() -> None:
    messages = [
        {"type": "user", "content": "old question " * 100},
        {"type": "assistant", "content": "old answer"},
        {"type": "user", "content": "How tall is Zorvath Ridge?"},
        {"type": "assistant", "content": "About 31 km. [1][2]"},
        {"type": "user", "content": "broken turn"},
        {"type": "assistant", "content": "partial", "status": "failed"},
    ]
    assert history_for_model(messages, 200) == [
        {"role": "user", "content": "How tall is Zorvath Ridge?"},
        {"role": "assistant", "content": "About 31 km."},
        {"role": "user", "content": "broken turn"},
    ]
    assert history_for_model(messages, 0) == []
    assert (
        retrieval_query(messages, "Which planet?", 200)
        == "How tall is Zorvath Ridge? broken turn Which planet?"
    )
    assert retrieval_query(messages, "Which planet?", 5) == "Which planet?"
