"""Spec 001's agent chats: create, list, read, rename, delete, and a turn of conversation.

A turn answers in labelled parts, in PRODUCT.md's order of sources:
  knowledge_base  the knowledge bases the caller may read, searched with the question (and, for a
                  follow-up, the previous questions); the chosen model summarises the numbered
                  passages with `[n]` markers, or the offline model answers extractively. A marker
                  that points at no passage never reaches the client. `sources` are the passages.
  model           only when the knowledge base gave no cited answer, the caller's policy allows
                  model knowledge (`model_fallback`) and the model is not the offline one.
  web             only when `web_search_enabled` is asked for and the policy allows the web;
                  `web_search_results` are the results. No provider configured: a notice says so.
  notice          what the caller should know about the answer (declined, web not allowed, ...).
Earlier turns inform a new one within `chat_history_tokens`: as chat history for a model, and as
retrieval context for a follow-up question.

The same production feeds the streamed events and the JSON reply, so the two agree. The user's
message is stored before any work starts, the assistant's when it is complete; a failure midway
stores what was produced, marked failed (or interrupted, when the client went away).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citegate.agents.chats.store import TurnStart, new_id
from citegate.agents.documents import DocumentManager, Found
from citegate.agents.markers import MarkerGate
from citegate.agents.models import ChatModel, ModelSpec
from citegate.agents.query_v2 import searchable_kbs
from citegate.agents.schemas.chats import (
    Chat,
    ChatDetail,
    ChatList,
    ChatMessage,
    ChatModelInfo,
    ChatModelList,
    ChatSource,
    MessageBody,
    MessageReply,
    PartSource,
    ReplyPart,
)
from citegate.agents.summary import (
    NO_ANSWER,
    Summary,
    chinese,
    summarize_offline,
    summarize_with_model,
    summary_outcome,
    text_for,
)
from citegate.governance.calls import Authorized, charge_tokens, current_call, estimate_tokens, note_answered
from citegate.knowledge.retrieval import retrieve
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import CitegateError, InvalidRequest, error_code
from citegate.platform.observability import logger
from citegate.platform.principal import Principal
from citegate.web.schemas import WebSearchRequest, WebSearchResultItem

if TYPE_CHECKING:
    from citegate.agents.ports import Chatting

Event = dict[str, Any]

TOP_K = 8
HISTORY_MESSAGES = 40  # read back at most, then trimmed by the token budget
FOLLOW_UP_QUESTIONS = 2  # previous questions added to a follow-up's retrieval query
WEB_RESULTS = 5

MODEL_KNOWLEDGE_PROMPT = """Answer the user's question from your own general knowledge, briefly.
- No documents are given: do not cite anything and do not use [n] markers.
- If you do not know, say so plainly.
- Answer in the language of the question."""

MODEL_HEADER = (
    "\n\nNot from the knowledge base; the model's own knowledge, without citations:\n",
    "\n\n以下内容不是来自知识库，而是模型自身的知识，没有引用：\n",
)
WEB_HEADER = (
    "\n\nFrom the web (not checked against the knowledge base):\n",
    "\n\n来自网络（未经知识库核实）：\n",
)
WEB_NOT_ALLOWED = (
    "\n\n(Web search was not used: this caller's policy does not allow the web.)",
    "\n\n（未进行网络搜索：当前调用者的策略不允许访问网络。）",
)
WEB_NOT_CONFIGURED = (
    "\n\n(Web search was not used: no web search provider is configured on this server.)",
    "\n\n（未进行网络搜索：服务器没有配置网络搜索服务。）",
)
WEB_NOTHING = ("\n\n(The web search found nothing.)", "\n\n（网络搜索没有找到结果。）")
WEB_FAILED = ("\n\n(Web search failed: {reason})", "\n\n（网络搜索失败：{reason}）")

_MARKERS = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")

# A client may send this header with a create or a send: a retry with the same key changes nothing
# twice and gets the first result (a chat id, or the stored answer).
IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY = 255
MAX_LIST = 1000


def idempotency_key(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    if len(value) > MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest(
            f"the {IDEMPOTENCY_HEADER} header is limited to {MAX_IDEMPOTENCY_KEY} characters"
        )
    return value.strip()


def list_limit(value: str | None, default: int = 100) -> int:
    if value is None:
        return default
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIST:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIST}", details={"limit": value})
    return limit


def owner_key(principal: Principal) -> str:
    return f"{principal.type}:{principal.tenant_id}:{principal.id}"


# -- chats ----------------------------------------------------------------------------------------


def chat_view(item: dict[str, Any]) -> Chat:
    return Chat(id=item["chat_id"], title=item["title"], created=item["created"], updated=item["updated"])


def message_view(item: dict[str, Any]) -> dict[str, Any]:
    """A stored message as spec 001 3.1.3 shows it (user messages carry no sources)."""
    message = ChatMessage(
        id=item["message_id"],
        type=item["type"],
        content=item.get("content", ""),
        web_search_enabled=bool(item.get("web_search_enabled", False)),
        model_used=item.get("model_used", ""),
        timestamp=item["timestamp"],
        sources=[ChatSource.model_validate(source) for source in item.get("sources") or []],
        web_search_results=item.get("web_search_results"),
        parts=[ReplyPart.model_validate(part) for part in item.get("parts") or []],
        status=item.get("status"),
        error=item.get("error"),
    )
    shown = message.model_dump()
    if message.type == "user":
        for name in ("sources", "web_search_results", "parts", "status", "error"):
            shown.pop(name)
    elif message.status == "complete":
        shown.pop("status")
        shown.pop("error")
    return shown


def create_chat(
    s: Chatting, principal: Principal, title: str | None, idempotency_key: str | None = None
) -> Chat:
    chat, _ = s.chats.create(owner_key(principal), title, idempotency_key=idempotency_key)
    current_call().note(session_id=chat["chat_id"])
    return chat_view(chat)


def list_chats(s: Chatting, principal: Principal, limit: int = 100) -> ChatList:
    return ChatList(items=[chat_view(item) for item in s.chats.list_chats(owner_key(principal), limit)])


def chat_detail(s: Chatting, principal: Principal, chat_id: str) -> dict[str, Any]:
    owner = owner_key(principal)
    chat = s.chats.require(owner, chat_id)
    current_call().note(session_id=chat_id)
    detail = ChatDetail(**chat_view(chat).model_dump(), messages=[])
    shown = detail.model_dump()
    shown["messages"] = [message_view(item) for item in s.chats.messages(owner, chat_id)]
    return shown


def rename_chat(s: Chatting, principal: Principal, chat_id: str, title: str) -> Chat:
    current_call().note(session_id=chat_id)
    return chat_view(s.chats.rename(owner_key(principal), chat_id, title))


def delete_chat(s: Chatting, principal: Principal, chat_id: str) -> None:
    current_call().note(session_id=chat_id)
    s.chats.delete(owner_key(principal), chat_id)


def list_models(s: Chatting, call: Authorized) -> ChatModelList:
    registry = s.chat_models
    items = []
    for spec in registry.models():
        described = spec.describe()
        # Model knowledge is the model's capability and the caller's grant together.
        described["model_knowledge"] = bool(described["model_knowledge"] and call.policy.model_fallback)
        items.append(ChatModelInfo(**described, default=spec.id == registry.default_id))
    return ChatModelList(
        items=items, default_model_id=registry.default_id, web_search_allowed=call.policy.web.enabled
    )


# -- a turn ---------------------------------------------------------------------------------------


def history_for_model(messages: list[dict[str, Any]], budget: int) -> list[dict[str, str]]:
    """Earlier complete messages as chat history, newest kept first within the token budget.
    Old `[n]` markers are dropped: they numbered another turn's passages."""
    kept: list[dict[str, str]] = []
    used = 0
    for item in reversed(messages):
        if item.get("status") not in (None, "complete"):
            continue
        text = _MARKERS.sub("", str(item.get("content") or "")).strip()
        cost = estimate_tokens(text)
        if not text or used + cost > budget:
            break
        kept.append({"role": "user" if item["type"] == "user" else "assistant", "content": text})
        used += cost
    kept.reverse()
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return kept


def retrieval_query(messages: list[dict[str, Any]], question: str, budget: int) -> str:
    """The question, preceded by the previous questions that fit the budget (a follow-up such as
    "where is it?" is searched with what "it" was)."""
    previous: list[str] = []
    used = estimate_tokens(question)
    for item in reversed([m for m in messages if m["type"] == "user"][-FOLLOW_UP_QUESTIONS:]):
        cost = estimate_tokens(item["content"])
        if used + cost > budget:
            break
        previous.insert(0, item["content"])
        used += cost
    return " ".join([*previous, question])


def source_of(found: Found, names: dict[str, str], cited: list[int]) -> ChatSource:
    chunk = found.hit.chunk
    metadata: dict[str, Any] = {
        "source": chunk.title or chunk.source_name,
        "source_name": chunk.source_name,
        "document_id": chunk.document_id,
        "chunk_id": chunk.ref_id,
    }
    for name in ("title", "url", "path", "project", "version", "page"):
        value = getattr(chunk, name)
        if value not in (None, ""):
            metadata[name] = value
    return ChatSource(
        id=found.index,
        collection_id=chunk.kb_id,
        collection_name=names.get(chunk.kb_id, chunk.kb_id),
        score=round(found.score, 4),
        text=chunk.text,
        metadata=metadata,
        cited=found.index in cited,
    )


@dataclass
class Outcome:
    """What a turn produced besides its text."""

    parts: list[ReplyPart] = field(default_factory=list)
    sources: list[ChatSource] = field(default_factory=list)
    web_search_results: list[WebSearchResultItem] | None = None

    def add(self, source: PartSource, delta: str) -> None:
        if self.parts and self.parts[-1].source == source:
            self.parts[-1].content += delta
        else:
            self.parts.append(ReplyPart(source=source, content=delta))

    @property
    def content(self) -> str:
        return "".join(part.content for part in self.parts)


class Turn:
    """One message sent to a chat: the user's message is stored; `events()` (streamed) or
    `reply()` (JSON) produce and store the answer. A retried keyed send that was answered
    replays the stored answer."""

    def __init__(
        self,
        s: Chatting,
        call: Authorized,
        chat: dict[str, Any],
        spec: ModelSpec,
        body: MessageBody,
        start: TurnStart,
        history: list[dict[str, Any]],
    ) -> None:
        self.s = s
        self.call = call
        self.chat = chat
        self.spec = spec
        self.body = body
        self.start = start
        self.history = history
        self.message_id = str(start.answered["message_id"]) if start.answered else new_id("msg")
        self.outcome = Outcome()
        self.zh = chinese(body.content)
        self.settled = start.answered is not None  # stored (complete, failed or interrupted)

    # -- the two ways out -------------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        if self.start.answered is not None:
            yield from self._replay(self.start.answered)
            return
        yield {"type": "start", "message_id": self.message_id}
        try:
            for source, delta in self._produce():
                yield {"type": "content", "content": delta, "source": source}
            self._store()
        except Exception as error:
            self._abandon("failed", error)
            raise
        yield self._sources_event()
        yield {"type": "end", "message_id": self.message_id}

    def interrupted(self) -> None:
        """The client went away mid-stream: keep what it was shown. Called on the request's own
        path by the stream's reader (citegate.api.streaming), never from the generator's cleanup."""
        if not self.settled:
            self._abandon("interrupted", None)

    def reply(self) -> MessageReply:
        if self.start.answered is not None:
            return self._reply_from(self.start.answered)
        try:
            for _ in self._produce():
                pass
            stored = self._store()
        except Exception as error:
            self._abandon("failed", error)
            raise
        return self._reply_from(stored)

    def failure_frames(self, code: str, message: str) -> list[Event]:
        """A failure midway: an error event, then the end of the stream."""
        return [
            {"type": "error", "error": code, "message": message, "message_id": self.message_id},
            {"type": "end", "message_id": self.message_id},
        ]

    # -- production ---------------------------------------------------------------------------

    def _produce(self) -> Iterator[tuple[PartSource, str]]:
        s, call, question = self.s, self.call, self.body.content
        record = current_call()
        budget = s.settings.chat_history_tokens
        kbs = searchable_kbs(s, call)  # approved ones; working ones too where the policy grants them
        names = {kb.kb_id: kb.name for kb in kbs}
        record.note(knowledge_bases=sorted(names), query=question, session_id=self.chat["chat_id"])

        ranked: list[Found] = []
        if names:
            query = retrieval_query(self.history, question, budget)
            hits = retrieve(s, call.search_scope(frozenset(names)), query, top_k=TOP_K).hits
            documents = DocumentManager()
            documents.add(hits, 1)
            ranked = documents.sorted()

        model = None if self.spec.offline else s.chat_models.client(self.spec, s.settings.llm_timeout_seconds)
        history = history_for_model(self.history, budget) if model is not None else []
        summary = self._summary(model, ranked, history)
        kb_label: PartSource = "notice" if summary.declined else "knowledge_base"
        for delta in summary.deltas:
            self.outcome.add(kb_label, delta)
            yield kb_label, delta
        answered = not summary.declined and (model is None or bool(summary.cited))
        shown = [] if summary.declined else ranked[: summary.shown]
        self.outcome.sources = [source_of(found, names, summary.cited) for found in shown]

        if not answered and model is not None and call.policy.model_fallback:
            yield from self._labelled("model", self._model_knowledge(model, history))
        if self.body.web_search_enabled:
            yield from self._web()

        if model is not None:
            spent = estimate_tokens(
                question,
                self.outcome.content,
                *(source.text for source in self.outcome.sources),
                *(item["content"] for item in history),
            )
            charge_tokens(s, call.principal, spent)
        record.note(
            result_count=len(ranked),
            retrieved=[found.chunk_id for found in ranked],
            cited=[found.chunk_id for found in shown if found.index in summary.cited],
        )
        note_answered(question, names, summary_outcome(summary, ranked))

    def _summary(
        self, model: ChatModel | None, ranked: list[Found], history: list[dict[str, str]]
    ) -> Summary:
        question = self.body.content
        if model is None:
            return summarize_offline(self.s, question, ranked)
        if not ranked:  # nothing to summarise: no model call, the same plain decline
            gate = MarkerGate(lambda n: False)
            return Summary(iter([text_for(self.zh, *NO_ANSWER)]), gate, declined=True, reason="no_evidence")
        return summarize_with_model(model, question, ranked, history)

    def _model_knowledge(self, model: ChatModel, history: list[dict[str, str]]) -> Iterator[str]:
        yield text_for(self.zh, *MODEL_HEADER)
        messages: list[dict[str, Any]] = [{"role": "system", "content": MODEL_KNOWLEDGE_PROMPT}, *history]
        messages.append({"role": "user", "content": self.body.content})
        # No passages here, so no marker may survive: a "[1]" would pass for a citation.
        yield from MarkerGate(lambda n: False).filter(model.stream(messages))

    def _labelled(self, source: PartSource, deltas: Iterator[str]) -> Iterator[tuple[PartSource, str]]:
        for delta in deltas:
            self.outcome.add(source, delta)
            yield source, delta

    def _web(self) -> Iterator[tuple[PartSource, str]]:
        from citegate.web import WebSearchFailed

        policy, zh = self.call.policy, self.zh
        if not policy.web.enabled:
            yield from self._labelled("notice", iter([text_for(zh, *WEB_NOT_ALLOWED)]))
            return
        request = WebSearchRequest(query=self.body.content[:1000], max_results=WEB_RESULTS)
        try:
            found = self.s.web.search(self.call.principal, policy, request, current_call().source_ip)
        except WebSearchFailed as error:
            if error.details.get("reason") == "not_configured":
                yield from self._labelled("notice", iter([text_for(zh, *WEB_NOT_CONFIGURED)]))
            else:
                notice = text_for(zh, *WEB_FAILED).format(reason=error.message)
                yield from self._labelled("notice", iter([notice]))
            return
        except CitegateError as error:  # a quota or provider failure: the answer so far stands
            notice = text_for(zh, *WEB_FAILED).format(reason=error.message)
            yield from self._labelled("notice", iter([notice]))
            return
        # Spec 3.2.1's items: a chat never reads the pages (include_content), so they carry no page fields.
        fields = set(WebSearchResultItem.model_fields)
        self.outcome.web_search_results = [
            WebSearchResultItem.model_validate(r.model_dump(include=fields)) for r in found.results
        ]
        if not found.results:
            yield from self._labelled("notice", iter([text_for(zh, *WEB_NOTHING)]))
            return
        lines = [text_for(zh, *WEB_HEADER)]
        lines += [f"{item.rank}. {item.title} ({item.url}): {item.snippet}\n" for item in found.results]
        yield from self._labelled("web", iter(lines))

    # -- storing and replaying ------------------------------------------------------------------

    def _message(self, status: str, error: str | None) -> dict[str, Any]:
        web = self.outcome.web_search_results
        return {
            "message_id": self.message_id,
            "chat_id": self.chat["chat_id"],
            "type": "assistant",
            "content": self.outcome.content,
            "web_search_enabled": self.body.web_search_enabled,
            "model_used": self.spec.id,
            "timestamp": utc_now(),
            "sources": [source.model_dump() for source in self.outcome.sources],
            "web_search_results": [item.model_dump() for item in web] if web is not None else None,
            "parts": [part.model_dump() for part in self.outcome.parts],
            "status": status,
            "error": error,
        }

    def _store(self) -> dict[str, Any]:
        self.settled = True
        message = self._message("complete", None)
        self.s.chats.finish_turn(self.chat, message, guard_sk=self.start.guard_sk)
        return message

    def _abandon(self, status: str, error: BaseException | None) -> None:
        """Keep what was produced, marked; never let this hide the original failure."""
        self.settled = True
        code = None
        if error is not None:
            code = error_code(error, "chat") if isinstance(error, CitegateError) else "INTERNAL_ERROR"
        try:
            # Not attached to the send's guard: a retry of the same send may still be answered.
            self.s.chats.finish_turn(self.chat, self._message(status, code))
        except Exception:
            logger.warning("could not store an unfinished chat reply", extra={"status": status})

    def _sources_event(self) -> Event:
        web = self.outcome.web_search_results
        return {
            "type": "sources",
            "sources": [source.model_dump() for source in self.outcome.sources],
            "web_search_results": [item.model_dump() for item in web] if web is not None else None,
        }

    def _replay(self, stored: dict[str, Any]) -> Iterator[Event]:
        yield {"type": "start", "message_id": stored["message_id"]}
        for part in stored.get("parts") or []:
            yield {"type": "content", "content": part["content"], "source": part["source"]}
        yield {
            "type": "sources",
            "sources": stored.get("sources") or [],
            "web_search_results": stored.get("web_search_results"),
        }
        yield {"type": "end", "message_id": stored["message_id"]}

    def _reply_from(self, stored: dict[str, Any]) -> MessageReply:
        return MessageReply(
            id=stored["message_id"],
            content=stored.get("content", ""),
            sources=[ChatSource.model_validate(source) for source in stored.get("sources") or []],
            web_search_results=stored.get("web_search_results"),
            model_used=stored.get("model_used", ""),
            created=stored["timestamp"],
            parts=[ReplyPart.model_validate(part) for part in stored.get("parts") or []],
        )


def start_turn(
    s: Chatting, call: Authorized, chat_id: str, body: MessageBody, idempotency_key: str | None = None
) -> Turn:
    """Check the model and the chat, store the user's message; the answer comes from the Turn.
    Everything refused here is refused before a stream starts (a plain JSON error)."""
    spec = s.chat_models.get(body.model_id)  # MODEL_NOT_AVAILABLE (400)
    owner = owner_key(call.principal)
    chat = s.chats.require(owner, chat_id)  # CHAT_NOT_FOUND (404), another owner's chat included
    current_call().note(session_id=chat_id, query=body.content)
    user = {
        "message_id": new_id(
            "msg", f"{owner}\0{chat_id}\0{idempotency_key}\0user" if idempotency_key else None
        ),
        "chat_id": chat_id,
        "type": "user",
        "content": body.content,
        "web_search_enabled": body.web_search_enabled,
        "model_used": spec.id,
        "timestamp": utc_now(),
    }
    start = s.chats.begin_turn(chat, user, idempotency_key=idempotency_key)
    history: list[dict[str, Any]] = []
    if start.answered is None and s.settings.chat_history_tokens > 0:
        recent = s.chats.recent_messages(owner, chat_id, HISTORY_MESSAGES + 1)
        history = [item for item in recent if item["sk"] < start.user["sk"]]
    return Turn(s, call, chat, spec, body, start, history)
