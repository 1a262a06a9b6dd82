"""A conversation's last question answered with its citations: what the OpenAI-compatible routes
(citegate.api.openai_compat) ask of the answers domain, on the Answer API's engine.

- The knowledge bases: the one a model names (`citegate/<kb_id>`, checked as a path's knowledge
  base is: 404 when the tenant has none, 403 when the policy does not grant it), or every one the
  caller may read in its scope (`citegate`).
- The conversation: the earlier user messages inform the retrieval of a follow-up, as a session's
  earlier turns do (citegate.answers.sessions.follow_up_of).
- The caller's instruction (a system message) reaches a model answerer for the answer's form; it
  never names sources: the knowledge bases and scope above are settled before it is read, and the
  draft is bound to the passages found (citegate.answers.validate), whatever it asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from citegate.answers.answer_api import Asked, answer_question
from citegate.answers.base import caller_instruction
from citegate.answers.sessions import follow_up_of
from citegate.governance.calls import Authorized, grant_kb, nameable_kbs, readable_kbs
from citegate.platform.errors import DatasetNotAllowed, KbNotFound, ModelNotFound

if TYPE_CHECKING:
    from citegate.answers.ports import AnswerApi
    from citegate.governance.ports import Governing

# `citegate`: every knowledge base the caller's policy lets it read; `citegate/<kb_id>`: one.
EVERY_KB_MODEL = "citegate"
MODEL_PREFIX = EVERY_KB_MODEL + "/"


@dataclass(frozen=True)
class AskableModel:
    id: str
    kb_id: str | None
    name: str
    description: str
    created_at: str = ""  # ISO 8601, the knowledge base's


def askable_models(s: Governing, call: Authorized) -> list[AskableModel]:
    """The models a caller may ask: `citegate` when its policy grants any knowledge base, and
    `citegate/<kb_id>` for each knowledge base it may name."""
    models = []
    if call.policy.knowledge_bases:
        every = readable_kbs(s, call, include_working=call.scope.include_working_docs)
        models.append(
            AskableModel(
                EVERY_KB_MODEL,
                None,
                "Every knowledge base your policy allows",
                f"{len(every)} knowledge base(s) now: " + ", ".join(kb.kb_id for kb in every),
            )
        )
    for kb in nameable_kbs(s, call):
        models.append(
            AskableModel(MODEL_PREFIX + kb.kb_id, kb.kb_id, kb.name, kb.description or "", kb.created_at)
        )
    return models


def kb_of_model(s: Governing, call: Authorized, model: str) -> frozenset[str] | None:
    """The knowledge bases a model names, granted to the caller (None: every readable one)."""
    if not call.policy.knowledge_bases:
        raise DatasetNotAllowed("no knowledge base is granted to the caller", details={"model": model})
    if model == EVERY_KB_MODEL:
        return None
    kb_id = model.removeprefix(MODEL_PREFIX) if model.startswith(MODEL_PREFIX) else ""
    if not kb_id:
        raise ModelNotFound(
            f"the model {model!r} does not exist: ask {EVERY_KB_MODEL!r} or "
            f"'{MODEL_PREFIX}<kb_id>' (GET /v1/models lists yours)",
            details={"model": model},
        )
    try:
        grant_kb(s, call, kb_id)
    except KbNotFound as error:
        raise ModelNotFound(
            f"the model {model!r} does not exist or you do not have access to it", details={"model": model}
        ) from error
    return frozenset({kb_id})


def answer_conversation(
    s: AnswerApi,
    call: Authorized,
    question: str,
    earlier_questions: Sequence[str] = (),
    *,
    kb_ids: frozenset[str] | None = None,
    instruction: str | None = None,
) -> Asked:
    """The answer to `question` (the conversation's last user message), citations required."""
    with caller_instruction(instruction):
        return answer_question(
            s,
            call,
            question,
            retrieval_query=follow_up_of(list(earlier_questions), question),
            require_citations=True,
            kb_ids=kb_ids,
        )
