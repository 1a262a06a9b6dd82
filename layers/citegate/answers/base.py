"""The answerer interface: evidence in, a draft answer bound to the evidence it used out.

An answerer sees only the candidate passages, each under a number (`[1]`, `[2]`, ...) and its
ref id. Whatever it returns is checked by the server afterwards (citegate.answers.validate):
refs outside the candidate set and markers that point nowhere are dropped, and an answer left
without valid evidence becomes a plain "no answer".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Evidence:
    """One candidate passage, numbered from 1 in the order it is shown to the answerer."""

    number: int
    ref_id: str
    text: str
    score: float
    title: str = ""
    source_name: str = ""
    heading: str = ""
    # The enclosing parent chunk, when the answerer is given it as wider context.
    context: str = ""
    lexical_score: float | None = None
    dense_score: float | None = None


@dataclass(frozen=True)
class Draft:
    """What an answerer proposes. `answer` may carry `[n]` markers that refer to Evidence.number."""

    answer: str
    used_refs: tuple[str, ...]
    declined: bool = False
    reason: str | None = None
    # Per sentence of the answer, the ref ids it rests on (the extractive answerer knows exactly).
    support: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The answerer's own estimate that the evidence answers the question, in [0, 1].
    support_score: float | None = None
    model: str = ""
    diagnostics: dict[str, object] = field(default_factory=dict)


class AnswererUnavailable(Exception):
    """The answering model cannot be reached, timed out, or keeps returning unusable output."""


class Answerer(Protocol):
    name: str

    def answer(self, question: str, evidence: Sequence[Evidence], context: str | None = None) -> Draft:
        """Answer from `evidence` only, or decline. Never raises for weak evidence: declines.
        `context`: what the conversation's earlier turns asked, for a follow-up whose "it" or
        "they" points back at them (None: the question stands alone)."""


# The caller's own instruction for this answer (an OpenAI-compatible system message). A model
# answerer may follow it for form (language, length, tone); it never adds a source or a scope:
# the passages were chosen before it is read, and whatever it asks, the draft is bound to them.
_instruction: ContextVar[str | None] = ContextVar("citegate_caller_instruction", default=None)


@contextlib.contextmanager
def caller_instruction(text: str | None) -> Iterator[None]:
    token = _instruction.set(text.strip() if text and text.strip() else None)
    try:
        yield
    finally:
        _instruction.reset(token)


def current_instruction() -> str | None:
    return _instruction.get()
