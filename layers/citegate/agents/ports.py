"""What the agents domain's functions use, as Protocols (see citegate.knowledge.ports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from citegate.answers.ports import AnswerApi
from citegate.knowledge.ports import HasDocuments

if TYPE_CHECKING:
    from citegate.agents.chats.store import ChatStore
    from citegate.agents.models import ModelRegistry
    from citegate.web.service import WebService


class AgentTools(AnswerApi, HasDocuments, Protocol):
    """What the agent tools, spec 003's query and the governed knowledge entry read: the Answer
    API's stores and engines, and the document records."""


class Chatting(AgentTools, Protocol):
    """What spec 001's chats read besides: the chat store, the model registry, the web."""

    @property
    def chats(self) -> ChatStore: ...

    @property
    def chat_models(self) -> ModelRegistry: ...

    @property
    def web(self) -> WebService: ...
