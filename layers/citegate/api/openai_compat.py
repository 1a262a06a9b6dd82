"""The OpenAI Chat Completions protocol, translated to and from citegate's answers.

`GET /v1/models` lists what a caller may ask (citegate.answers.conversation.askable_models);
`POST /v1/chat/completions` answers the conversation's last user message with citations:

- request: `model`, `messages`, `stream`, `stream_options.include_usage`, `temperature`,
  `max_tokens`, `user`, `metadata` are read; every other field is accepted and ignored, as
  OpenAI's clients expect of a compatible server. `temperature` and `max_tokens` change nothing:
  an answer is the passages' sentences bound to their citations, and cutting it short would cut
  the citations off. `user` is audited as the call's end user.
- reply: a `chat.completion` whose content keeps the `[n]` markers; `message.annotations` holds
  one `url_citation` per cited passage (the passage's URL with its anchor, its title, and the
  `start_index`/`end_index` of the first sentence carrying its marker, in code points of the
  content); `citations` holds resolve_refs's citation objects (the n-th is `[n]`), and `citegate`
  says whether it is an answer (`no_answer`, `reason`, `code`, `confidence`, `request_id`).
- `stream: true`: `chat.completion.chunk` events: the role, content deltas, then a last chunk
  with `finish_reason`, the annotations (in its `delta`), `citations` and `citegate`, a `usage`
  chunk when `stream_options.include_usage` asks for one, and `data: [DONE]`. The answer is bound
  to its evidence before its first word is sent: nothing is streamed that is later withdrawn.
- errors: OpenAI's `{"error": {"message", "type", "param", "code"}}` (citegate.platform.errors,
  family "openai"), also as a stream's last event when it fails midway (no `[DONE]` then).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citegate.answers.conversation import AskableModel
from citegate.platform.errors import InvalidRequest, openai_error

if TYPE_CHECKING:
    from citegate.answers.answer_api import Asked
    from citegate.answers.ports import AnswerApi
    from citegate.governance.calls import Authorized
    from citegate.governance.ports import Governing

OWNER = "citegate"
_MARKER = re.compile(r"\[(\d+)\]")
# A content delta: a few words at a time, as a model streams them.
_DELTA = re.compile(r"\S+\s*")
WORDS_PER_DELTA = 4
NO_ANSWER_LEAD = "I could not answer this from the knowledge base you may ask"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text: its string, or its text parts joined (images and files are not read)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content or [] if p.type == "text" and p.text)


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatCompletionRequest(_Lenient):
    model: str = Field(min_length=1, max_length=300)
    messages: list[ChatMessage] = Field(min_length=1, max_length=500)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None


class ChatCompletionChunk(BaseModel):
    """One `data:` event of a streamed completion (the stream ends with `data: [DONE]`)."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[dict[str, Any]]
    usage: dict[str, int] | None = None
    citations: list[dict[str, Any]] | None = None
    citegate: dict[str, Any] | None = None


class Conversation(BaseModel):
    question: str
    earlier_questions: list[str]
    instruction: str | None


MAX_QUESTION_CHARS = 4000


def conversation_of(messages: Sequence[ChatMessage]) -> Conversation:
    """The last user message is the question, the user messages before it the conversation a
    follow-up is read in, and the system (or developer) messages the caller's instruction."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise InvalidRequest("messages: a user message is required (the last one is the question)")
    question = messages[users[-1]].text().strip()
    if not question:
        raise InvalidRequest("messages: the last user message has no text")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidRequest(f"messages: the question is longer than {MAX_QUESTION_CHARS} characters")
    earlier = [messages[i].text().strip() for i in users[:-1]]
    instruction = "\n".join(
        m.text().strip() for m in messages if m.role in ("system", "developer") and m.text().strip()
    )
    return Conversation(
        question=question, earlier_questions=[q for q in earlier if q], instruction=instruction or None
    )


def _epoch(iso: str) -> int:
    try:
        return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def model_list(models: Sequence[AskableModel]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": m.id,
                "object": "model",
                "created": _epoch(m.created_at),
                "owned_by": OWNER,
                "name": m.name,
                "description": m.description,
                "knowledge_base": m.kb_id,
                "scope": m.scope or None,
            }
            for m in models
        ],
    }


def models_reply(s: Governing, call: Authorized) -> dict[str, Any]:
    """GET /v1/models: served by its own function and, in AWS, by the chat completions' streaming
    twin too (routes.Route.stream_twin), so both share one base URL."""
    from citegate.answers.conversation import askable_models

    return model_list(askable_models(s, call))


def base_url_of(headers: Mapping[str, str]) -> str:
    """This API's own address as the caller reached it (links to documents that have no URL)."""
    host = headers.get("x-forwarded-host") or headers.get("host") or "localhost"
    local = host.startswith(("127.", "localhost", "[::1]"))
    proto = headers.get("x-forwarded-proto") or ("http" if local else "https")
    return f"{proto}://{host}"


def citation_url(citation: dict[str, Any], base_url: str) -> str:
    """The passage's page with its anchor; for a document without a URL, the document on this API."""
    url = str(citation.get("url") or "")
    if not url:
        url = f"{base_url}/v1/kb/{citation['kb_id']}/documents/{citation['document_id']}"
    anchor = str(citation.get("anchor") or "").lstrip("#")
    return f"{url}#{anchor}" if anchor and "#" not in url else url


def sentence_spans(content: str) -> list[tuple[int, int]]:
    """Where each sentence of the answer lies in `content` (start, end), in code points."""
    from citegate.answers.validate import split_answer

    spans, position = [], 0
    for sentence in split_answer(content):
        start = content.find(sentence, position)
        if start < 0:
            continue
        spans.append((start, start + len(sentence)))
        position = start + len(sentence)
    return spans


def url_citations(content: str, citations: Sequence[dict[str, Any]], base_url: str) -> list[dict[str, Any]]:
    """One `url_citation` per cited passage, on the first sentence that carries its `[n]`."""
    first: dict[int, tuple[int, int]] = {}
    for start, end in sentence_spans(content):
        for number in _MARKER.findall(content[start:end]):
            first.setdefault(int(number), (start, end))
    found = []
    for number, citation in enumerate(citations, start=1):
        if number not in first:
            continue
        start, end = first[number]
        title = citation.get("title") or citation.get("heading") or citation.get("source_name") or ""
        found.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": citation_url(citation, base_url),
                    "title": str(title),
                    "start_index": start,
                    "end_index": end,
                },
            }
        )
    return found


class Reply:
    """An answer as the protocol shows it: content, citations, annotations and citegate's field."""

    def __init__(self, asked: Asked, request_id: str, base_url: str) -> None:
        from citegate.knowledge.schemas.retrieval import Citation

        outcome, result = asked.outcome, asked.result
        self.no_answer = outcome.no_answer
        if self.no_answer:
            reason = (result.noAnswerReason or {}).get("reason") or outcome.no_answer_reason or ""
            self.content = f"{NO_ANSWER_LEAD}: {reason}" if reason else f"{NO_ANSWER_LEAD}."
            self.citations: list[dict[str, Any]] = []
            self.citegate: dict[str, Any] = {
                "no_answer": True,
                "reason": reason,
                "code": outcome.no_answer_code or "no_answer",
            }
        else:
            self.content = result.answer
            # resolve_refs's objects: an `ask` citation without the sentences bound to it.
            self.citations = [
                Citation.model_validate(c.model_dump(exclude={"answer_sentences"})).model_dump()
                for c in outcome.citations
            ]
            self.citegate = {"no_answer": False}
        self.citegate.update(confidence=result.confidence, request_id=request_id)
        self.annotations = url_citations(self.content, self.citations, base_url)


def usage(prompt_texts: Sequence[str], content: str) -> dict[str, int]:
    """Token counts as the daily budget estimates them (citegate.governance.calls.estimate_tokens)."""
    from citegate.governance.calls import estimate_tokens

    prompt, completion = estimate_tokens(*prompt_texts), estimate_tokens(content)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(
    reply: Reply, *, completion_id: str, model: str, created: int, usage: dict[str, int]
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.content,
                    "refusal": None,
                    "annotations": reply.annotations,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
        "citations": reply.citations,
        "citegate": reply.citegate,
    }


def deltas(content: str, words: int = WORDS_PER_DELTA) -> Iterator[str]:
    pieces = _DELTA.findall(content)
    lead = content[: len(content) - len(content.lstrip())]
    if lead and pieces:
        pieces[0] = lead + pieces[0]
    for i in range(0, len(pieces), words):
        yield "".join(pieces[i : i + words])


def failure_events(code: str, message: str) -> list[dict[str, Any] | str]:
    """A stream that fails midway ends with OpenAI's error object, as OpenAI's do (no [DONE]): the
    SDK raises it and hangs up, so it is the last frame, sent once the call is audited."""
    return [{"error": openai_error(code, message)}]


class Exchange:
    """One chat completion request, answered whole or as a stream of chunks."""

    def __init__(
        self,
        s: AnswerApi,
        call: Authorized,
        request: ChatCompletionRequest,
        *,
        request_id: str,
        base_url: str,
    ) -> None:
        from citegate.answers.conversation import kb_of_model

        self.s, self.request = s, request
        self.request_id, self.base_url = request_id, base_url
        self.conversation = conversation_of(request.messages)
        # The model's knowledge bases and answer scope are checked before anything is answered or
        # streamed; the call is narrowed to that scope (never widened).
        self.kb_ids, self.call = kb_of_model(s, call, request.model)
        self.id = f"chatcmpl-{request_id or int(time.time() * 1000)}"
        self.created = int(time.time())

    def _answer(self) -> tuple[Reply, dict[str, int]]:
        from citegate.answers.conversation import answer_conversation
        from citegate.governance.calls import charge_tokens, current_call

        conversation = self.conversation
        if self.request.user:
            current_call().note(user_id=self.request.user)
        asked = answer_conversation(
            self.s,
            self.call,
            conversation.question,
            conversation.earlier_questions,
            kb_ids=self.kb_ids,
            instruction=conversation.instruction,
        )
        reply = Reply(asked, self.request_id, self.base_url)
        counted = usage([m.text() for m in self.request.messages], reply.content)
        evidence = "".join(e.context or e.text for e in asked.outcome.evidence)
        from citegate.governance.calls import estimate_tokens

        charge_tokens(self.s, self.call.principal, counted["total_tokens"] + estimate_tokens(evidence))
        return reply, counted

    def completion(self) -> dict[str, Any]:
        reply, counted = self._answer()
        return completion(
            reply, completion_id=self.id, model=self.request.model, created=self.created, usage=counted
        )

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self._include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    @property
    def _include_usage(self) -> bool:
        return bool(self.request.stream_options and self.request.stream_options.include_usage)

    def chunks(self) -> Iterator[dict[str, Any] | str]:
        """The stream's events. Closing it early writes nothing (citegate.api.streaming)."""
        yield self._chunk({"role": "assistant", "content": "", "refusal": None})
        reply, counted = self._answer()
        for piece in deltas(reply.content):
            yield self._chunk({"content": piece})
        yield self._chunk(
            {"annotations": reply.annotations}, "stop", citations=reply.citations, citegate=reply.citegate
        )
        if self._include_usage:
            yield {**self._chunk({}), "choices": [], "usage": counted}
        yield "[DONE]"
