"""Spec 001 section 3.1 / 5.1: agent chats, their messages, and the models a caller may pick.

Requests ignore unknown fields, as the spec 001 web requests do: the chat front end is an
existing client and may send fields this service does not use. Replies keep the spec's field names
and add a few (`parts`, `source` on content, `id` on sources) that label each part of an answer by
where it came from (PRODUCT.md: knowledge base, model knowledge, web).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citegate.web.schemas import WebSearchResultItem

MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 8000

PartSource = Literal["knowledge_base", "model", "web", "notice"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ChatCreateBody(_Request):
    title: str | None = Field(None, max_length=MAX_TITLE_CHARS, description="default: from the first message")


class ChatRenameBody(_Request):
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)


class MessageBody(_Request):
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    model_id: str | None = Field(None, max_length=200, description="a model from GET /api/v1/agent/models")
    web_search_enabled: bool = Field(
        False, description="also search the web, where the caller's policy allows it"
    )
    stream: bool = Field(False, description="server-sent events instead of one JSON reply")


class Chat(BaseModel):
    id: str
    title: str
    created: str
    updated: str


class ChatList(BaseModel):
    items: list[Chat]


class ChatSource(BaseModel):
    """A knowledge-base passage behind the answer (spec 001 3.1.3); `id` is its `[n]` marker."""

    id: int
    collection_id: str
    collection_name: str
    score: float
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    cited: bool = False


class ReplyPart(BaseModel):
    """One labelled part of an assistant message, in the order it was streamed."""

    source: PartSource
    content: str


class ChatMessage(BaseModel):
    id: str
    type: Literal["user", "assistant"]
    content: str
    web_search_enabled: bool = False
    model_used: str
    timestamp: str
    sources: list[ChatSource] | None = None
    web_search_results: list[WebSearchResultItem] | None = None
    parts: list[ReplyPart] | None = None
    status: Literal["complete", "failed", "interrupted"] | None = None
    error: str | None = None


class ChatDetail(Chat):
    messages: list[ChatMessage]


class MessageReply(BaseModel):
    """The non-streamed reply of spec 001 3.1.4."""

    id: str
    content: str
    sources: list[ChatSource]
    web_search_results: list[WebSearchResultItem] | None = None
    model_used: str
    created: str
    parts: list[ReplyPart] = Field(default_factory=list)


class ChatEvent(BaseModel):
    """One `data:` line of a streamed reply (spec 001 3.1.4)."""

    type: Literal["start", "content", "sources", "end", "error"]
    message_id: str | None = None
    content: str | None = None
    source: PartSource | None = Field(None, description="on content events: where this part comes from")
    sources: list[ChatSource] | None = None
    web_search_results: list[WebSearchResultItem] | None = None
    error: str | None = None
    message: str | None = None


class ChatModelInfo(BaseModel):
    id: str
    label: str
    offline: bool
    tool_calling: bool
    model_knowledge: bool = Field(description="the model may answer from its own knowledge for this caller")
    default: bool = False


class ChatModelList(BaseModel):
    items: list[ChatModelInfo]
    default_model_id: str
    web_search_allowed: bool
