"""What the answers domain's functions use, as Protocols (see citegate.knowledge.ports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from citegate.governance.ports import Governing
from citegate.knowledge.ports import HasParents, Retrieving

if TYPE_CHECKING:
    from citegate.answers.base import Answerer


class HasAnswerer(Protocol):
    @property
    def answerer(self) -> Answerer: ...


class Asking(Retrieving, HasParents, HasAnswerer, Protocol):
    """What `ask.ask` reads: retrieval's index, embedder and settings, the parents for context,
    the answerer."""


class AnswerApi(Asking, Governing, Protocol):
    """What the Answer API (`answer_api.answer_question`) reads: `ask`'s, and the governed call's
    knowledge bases."""
