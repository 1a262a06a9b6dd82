"""A conversation's last question answered with its citations: what the OpenAI-compatible routes
(citegate.api.openai_compat) ask of the answers domain, on the Answer API's engine.

- The knowledge bases: the one a model names (`citegate/<kb_id>`, checked as a path's knowledge
  base is: 404 when the tenant has none, 403 when the policy does not grant it), or every one the
  caller may read in its scope (`citegate`).
- The answer scope (spec 000 section 4: projects, paths, version): a model id may end in
  `@project=<p>`, `@path=<prefix>` or `@version=<v>` (several may follow each other), which narrows
  the caller's effective scope as a scoped body does (citegate.governance.calls.narrow: a request,
  never a grant). A scope outside the policy's grant is a model the caller does not have: 404
  model_not_found. /v1/models lists one such model per project, path prefix and version the
  policy's scope names, for `citegate` and for each knowledge base; a policy unrestricted on an
  axis names none there, and any narrower scope may still be asked by id.
- The conversation: the earlier user messages inform the retrieval of a follow-up, as a session's
  earlier turns do (citegate.answers.sessions.follow_up_of).
- The caller's instruction (a system message) reaches a model answerer for the answer's form; it
  never names sources: the knowledge bases and scope above are settled before it is read, and the
  draft is bound to the passages found (citegate.answers.validate), whatever it asks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from citegate.answers.answer_api import Asked, answer_question
from citegate.answers.base import caller_instruction
from citegate.answers.sessions import follow_up_of
from citegate.governance.calls import Authorized, grant_kb, nameable_kbs, narrow, readable_kbs
from citegate.governance.policy.model import InvalidPath, RequestedScope, ScopeGrant, normalize_path
from citegate.platform.errors import DatasetNotAllowed, ForbiddenScope, KbNotFound, ModelNotFound

if TYPE_CHECKING:
    from citegate.answers.ports import AnswerApi
    from citegate.governance.ports import Governing

# `citegate`: every knowledge base the caller's policy lets it read; `citegate/<kb_id>`: one.
EVERY_KB_MODEL = "citegate"
MODEL_PREFIX = EVERY_KB_MODEL + "/"


# The answer-scope axes a model id may name after `@`, as spec 000's requested scope names them.
SCOPE_AXES = ("project", "path", "version")
_SCOPE_PART = re.compile(r"@(project|path|version)=")


@dataclass(frozen=True)
class AskableModel:
    id: str
    kb_id: str | None
    name: str
    description: str
    created_at: str = ""  # ISO 8601, the knowledge base's
    scope: dict[str, str] = field(default_factory=dict)  # {axis: value} of an answer-scope model


def named_scopes(grant: ScopeGrant) -> list[tuple[str, str]]:
    """The answer scopes a policy's scope grant names, one (axis, value) each, in the grant's order."""
    paths = []
    for prefix in grant.path_prefixes or []:
        try:
            path = normalize_path(prefix)
        except InvalidPath:
            continue  # a grant no document can be within; nothing to offer
        if path:
            paths.append(path)
    named = [("project", p) for p in grant.projects or []] + [("path", p) for p in paths]
    named += [("version", v) for v in grant.versions or []]
    return list(dict.fromkeys((axis, value) for axis, value in named if value))


def scope_suffix(axis: str, value: str) -> str:
    return f"@{axis}={value}"


def askable_models(s: Governing, call: Authorized) -> list[AskableModel]:
    """The models a caller may ask: `citegate` when its policy grants any knowledge base, and
    `citegate/<kb_id>` for each knowledge base it may name; each followed by its answer scopes
    (one per project, path prefix and version the policy's scope names)."""
    models = []
    scopes = named_scopes(call.policy.scope)

    def scoped(base: AskableModel, label: str) -> list[AskableModel]:
        return [
            AskableModel(
                base.id + scope_suffix(axis, value),
                base.kb_id,
                f"{label}, {axis} {value}",
                f"{base.description} (answers only from {axis} {value!r})".strip(),
                base.created_at,
                {axis: value},
            )
            for axis, value in scopes
        ]

    if call.policy.knowledge_bases:
        every = readable_kbs(s, call, include_working=call.scope.include_working_docs)
        label = "Every knowledge base your policy allows"
        base = AskableModel(
            EVERY_KB_MODEL,
            None,
            label,
            f"{len(every)} knowledge base(s) now: " + ", ".join(kb.kb_id for kb in every),
        )
        models += [base, *scoped(base, label)]
    for kb in nameable_kbs(s, call):
        base = AskableModel(MODEL_PREFIX + kb.kb_id, kb.kb_id, kb.name, kb.description or "", kb.created_at)
        models += [base, *scoped(base, kb.name)]
    return models


def _not_found(model: str, why: str = "") -> ModelNotFound:
    message = f"the model {model!r} does not exist or you do not have access to it"
    return ModelNotFound(f"{message}: {why}" if why else message, details={"model": model})


def requested_scope(model: str) -> tuple[str, RequestedScope | None]:
    """A model id split into its knowledge-base part and the answer scope after `@`, if any:
    `citegate/docs@project=a@version=main` -> (`citegate/docs`, projects [a], version main)."""
    base, at, rest = model.partition("@")
    if not at:
        return model, None
    parts = _SCOPE_PART.split(at + rest)
    if parts[0] or len(parts) < 3:
        raise _not_found(model, "a scope is '@project=<p>', '@path=<prefix>' or '@version=<v>'")
    projects: list[str] = []
    paths: list[str] = []
    versions: list[str] = []
    for axis, value in zip(parts[1::2], parts[2::2], strict=True):
        if not value:
            raise _not_found(model, f"the {axis} is empty")
        {"project": projects, "path": paths, "version": versions}[axis].append(value)
    if len(versions) > 1:
        raise _not_found(model, "a scope has one version")
    return base, RequestedScope(
        projects=projects or None, paths=paths or None, version=versions[0] if versions else None
    )


def kb_of_model(s: Governing, call: Authorized, model: str) -> tuple[frozenset[str] | None, Authorized]:
    """The knowledge bases a model names, granted to the caller (None: every readable one), and
    the call narrowed to the model's answer scope (the call itself when it names none)."""
    if not call.policy.knowledge_bases:
        raise DatasetNotAllowed("no knowledge base is granted to the caller", details={"model": model})
    base, requested = requested_scope(model)
    kb_ids: frozenset[str] | None = None
    if base != EVERY_KB_MODEL:
        kb_id = base.removeprefix(MODEL_PREFIX) if base.startswith(MODEL_PREFIX) else ""
        if not kb_id:
            raise ModelNotFound(
                f"the model {model!r} does not exist: ask {EVERY_KB_MODEL!r} or "
                f"'{MODEL_PREFIX}<kb_id>', optionally followed by '@project=<p>', '@path=<prefix>' "
                "or '@version=<v>' (GET /v1/models lists yours)",
                details={"model": model},
            )
        try:
            grant_kb(s, call, kb_id)
        except KbNotFound as error:
            raise _not_found(model) from error
        kb_ids = frozenset({kb_id})
    if requested is None:
        return kb_ids, call
    try:
        return kb_ids, narrow(s, call, requested)
    except ForbiddenScope as error:  # a scope the policy does not grant: a model the caller lacks
        raise _not_found(model, error.message) from error


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
