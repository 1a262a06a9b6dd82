"""Spec 000's Answer API and Agent Access, on the same engine as spec 004's `ask`.

Questions span every knowledge base the caller may read (approved ones, plus working ones when
granted and asked for), filtered by the effective scope. The AnswerResult adds what spec 000
asks for on top of `ask`: citations in its shape, per-sentence grounding, a confidence computed
from the evidence, the no-answer reason and actions, related pages and the audit block.

Confidence is the ask path's (citegate.answers.confidence: calibrated on dev, documented there
and in docs/api.md); a sentence removed here for want of a citation caps it at medium, and no
answer is always low. Citations are the ask path's, which are exactly what resolve_refs returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from citegate.answers.ask import AskOutcome, ask
from citegate.answers.base import AnswererUnavailable
from citegate.answers.schemas.answer import (
    Action,
    AnswerAudit,
    AnswerCitation,
    AnswerResult,
    GroundedSentence,
)
from citegate.answers.validate import join_sentences, split_answer
from citegate.governance.calls import Authorized, current_call, note_answered, readable_kbs
from citegate.governance.signals import QuestionOutcome
from citegate.knowledge.retrieval import Scope
from citegate.knowledge.schemas.retrieval import Citation
from citegate.platform.errors import DatasetNotAllowed, ModelUnavailable
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.answers.ports import AnswerApi

_MARKER = re.compile(r"\[(\d+)\]")
NO_READABLE_KB = (
    "No knowledge base you may read is available for this scope. Knowledge bases are created "
    "'working', and questions read approved ones: approve one (PATCH /v1/kb/{kb_id} "
    '{"status": "approved"}), or, when your policy grants working docs, ask with '
    "scope.includeWorkingDocs=true."
)


def to_answer_citation(citation: Citation) -> AnswerCitation:
    return AnswerCitation(
        path=citation.path,
        url=citation.url,
        title=citation.title or citation.source_name,
        anchor=citation.anchor,
        chunkId=citation.ref_id,
        sourceProject=citation.project,
        version=citation.version,
        snippet=citation.snippet,
        kbId=citation.kb_id,
        page=citation.page_hint,
    )


split_sentences = split_answer


def ground(
    answer: str, citation_count: int, removed_before: Sequence[str] = ()
) -> tuple[str, list[GroundedSentence], int]:
    """Per sentence, the citations that support it. Unsupported sentences are removed from the
    answer (and reported, `supported: false`), as are those the ask path already removed
    (`removed_before`: every citation they carried was invalid or found unsupported); returns the
    kept answer, the grounding and how many sentences were removed."""
    grounding: list[GroundedSentence] = [
        GroundedSentence(sentence=s, citations=[], supported=False) for s in removed_before
    ]
    kept: list[str] = []
    removed = len(removed_before)
    for sentence in split_sentences(answer):
        numbers = sorted({int(n) for n in _MARKER.findall(sentence) if 1 <= int(n) <= citation_count})
        if numbers:
            kept.append(sentence)
            grounding.append(GroundedSentence(sentence=sentence, citations=numbers, supported=True))
        else:
            removed += 1
            grounding.append(GroundedSentence(sentence=sentence, citations=[], supported=False))
    return join_sentences(kept), grounding, removed


class Reported(NamedTuple):
    answer: str
    grounding: list[GroundedSentence]
    removed: int  # sentences removed for want of a valid citation
    confidence: str
    score: float


def reported(outcome: AskOutcome) -> Reported:
    """What the Answer API reports of an `ask` outcome: the grounded answer, its grounding, how many
    sentences were removed, the confidence and its score. An answer left without a cited sentence
    becomes a no-answer (`invalid_citations`, set on the outcome). `make eval` reports confidence
    through this too."""
    answer, grounding, removed = (
        ground(outcome.answer, len(outcome.citations), outcome.removed_sentences)
        if not outcome.no_answer
        else (outcome.answer, [], 0)
    )
    if not outcome.no_answer and not answer:
        outcome.no_answer, outcome.no_answer_code = True, "invalid_citations"
        outcome.no_answer_reason = "No sentence of the answer could be tied to a cited passage."
    confidence, score = confidence_of(outcome, removed)
    return Reported(answer, grounding, removed, confidence, score)


def confidence_of(outcome: AskOutcome, removed: int) -> tuple[str, float]:
    if outcome.no_answer:
        return "low", 0.0
    level, score = outcome.confidence.level, outcome.confidence.score
    if removed and level == "high":
        level = "medium"
    return level, score


def related_pages(outcome: AskOutcome, cited: set[str], limit: int = 5) -> list[dict[str, Any]]:
    """Documents among the retrieved passages that the answer did not cite."""
    pages: dict[str, dict[str, Any]] = {}
    for hit in outcome.retrieval.hits:
        chunk = hit.chunk
        if chunk.ref_id in cited or chunk.document_id in pages:
            continue
        pages[chunk.document_id] = {
            "path": chunk.path,
            "url": chunk.url,
            "title": chunk.title or chunk.source_name,
            "sourceProject": chunk.project,
            "version": chunk.version,
            "score": round(hit.score, 4),
        }
    return list(pages.values())[:limit]


def summary_of(answer: str) -> str:
    first = split_sentences(answer)[0] if answer else ""
    text = _MARKER.sub("", first).strip()
    return text if len(text) <= 200 else text[:197].rstrip() + "…"


def actions_for(
    call: Authorized, question: str, requested_scope: dict[str, Any] | None, paths: list[str], no_answer: bool
) -> list[Action]:
    """The feedback actions, keyed exactly as the tools will key a report of this result: the
    scope as the caller sent it and the citation paths the result returned."""
    from citegate.answers.feedback import dedupe_key

    feedback_event = "qa_no_answer" if no_answer else "qa_feedback"
    actions = [
        Action(
            type="create_feedback",
            enabled=call.policy.allows_write("feedback") and call.policy.allows_tool("create_feedback"),
            eventType=feedback_event,
            dedupeKey=dedupe_key(feedback_event, question, requested_scope, paths),
        )
    ]
    if no_answer:
        actions.append(
            Action(
                type="create_improvement_task",
                enabled=call.policy.allows_write("improvement_task")
                and call.policy.allows_tool("create_improvement_task"),
                eventType="knowledge_gap",
                dedupeKey=dedupe_key("knowledge_gap", question, requested_scope, paths),
            )
        )
    return actions


ENGINE_UNAVAILABLE = (
    "the answering engine is unreachable or gave no usable reply, so nothing was answered "
    "(the request id finds the cause in the service's logs)"
)


def engine_unavailable(error: Exception, answerer: str) -> ModelUnavailable:
    """What a caller is told when the model fails: the code, never the failure's own text (hosts,
    ports, the model server's reply), which goes to the log."""
    logger.warning("answering engine unavailable", extra={"answerer": answerer, "reason": str(error)})
    return ModelUnavailable(ENGINE_UNAVAILABLE, details={"answerer": answerer})


@dataclass
class Asked:
    result: AnswerResult
    outcome: AskOutcome


def answer_question(
    s: AnswerApi,
    call: Authorized,
    question: str,
    *,
    top_k: int = 8,
    retrieval_query: str | None = None,
    require_citations: bool = True,
    kb_ids: frozenset[str] | None = None,
) -> Asked:
    """`kb_ids`: the knowledge bases to read, already granted to the caller (a route that names
    one); by default every knowledge base the caller may read in its scope."""
    record = current_call()
    if not call.policy.knowledge_bases:
        raise DatasetNotAllowed("no knowledge base is granted to the caller")
    if kb_ids is None:
        kbs = readable_kbs(s, call, include_working=call.scope.include_working_docs)
        kb_ids = frozenset(kb.kb_id for kb in kbs)
    record.note(knowledge_bases=sorted(kb_ids), query=question)
    diagnostics: dict[str, Any] = {}
    if not require_citations:
        # Only a policy that allows model knowledge may drop citations; nothing here invents an
        # uncited answer when the policy does not.
        diagnostics["requireCitations"] = (
            "granted" if call.policy.model_fallback else "not granted: citations required"
        )
    try:
        outcome = _ask(s, kb_ids, call, question, top_k, retrieval_query)
    except ModelUnavailable as error:  # 503 ragflow_unavailable, without the engine's own words
        raise engine_unavailable(error, s.answerer.name) from error
    citations = [to_answer_citation(c) for c in outcome.citations]
    answer, grounding, removed, confidence, score = reported(outcome)
    diagnostics.update(
        {
            "confidenceScore": round(score, 4),
            "removedUnsupportedSentences": removed,
            "retrieval": outcome.stats.get("retrieval"),
            "answerer": outcome.stats.get("answerer"),
        }
    )
    if not kb_ids:
        diagnostics["knowledgeBases"] = NO_READABLE_KB
    paths = [c.path for c in citations if c.path]
    cited = {c.chunkId for c in citations}
    result = AnswerResult(
        answer=answer if not outcome.no_answer else "",
        summary=summary_of(answer) if not outcome.no_answer else (outcome.no_answer_reason or ""),
        citations=citations if not outcome.no_answer else [],
        confidence=confidence,
        grounding=grounding,
        noAnswerReason={"code": "no_answer", "reason": outcome.no_answer_reason or NO_READABLE_KB}
        if outcome.no_answer
        else None,
        relatedPages=related_pages(outcome, cited),
        actions=actions_for(
            call, question, record.requested_scope, [] if outcome.no_answer else paths, outcome.no_answer
        ),
        audit=AnswerAudit(requestId=record.request_id, caller=call.principal.id, scope=call.scope.label()),
        diagnostics=diagnostics,
    )
    if outcome.no_answer and not require_citations and call.policy.model_fallback:
        fallback = getattr(s.answerer, "answer_from_model", None)
        if fallback is not None:
            try:
                result.answer = fallback(question)
            except AnswererUnavailable as error:  # 503 ragflow_unavailable: nothing is invented
                raise engine_unavailable(error, s.answerer.name) from error
            result.answerSource = "model"
            result.summary = "Not from the knowledge base: the model's own knowledge, without citations."
    record.note(
        result_count=len(outcome.retrieval.hits),
        retrieved=[h.chunk.ref_id for h in outcome.retrieval.hits],
        cited=sorted(cited),
    )
    note_answered(question, kb_ids, question_outcome(outcome, confidence))
    return Asked(result, outcome)


def question_outcome(outcome: AskOutcome, confidence: str) -> QuestionOutcome:
    """What the audit record keeps of a question's outcome (and its insights signal is made of):
    answered or declined and why, the confidence, the pages cited (a page's path, else its source
    name) and the best pages found."""
    return QuestionOutcome.of(
        declined=outcome.no_answer,
        reason=outcome.no_answer_code,
        confidence=confidence,
        cited=[c.path or c.source_name for c in outcome.citations],
        found=[h.chunk.path or h.chunk.source_name for h in outcome.retrieval.hits],
    )


def _ask(
    s: AnswerApi,
    kb_ids: frozenset[str],
    call: Authorized,
    question: str,
    top_k: int,
    retrieval_query: str | None,
) -> AskOutcome:
    if not kb_ids:
        from citegate.knowledge.retrieval import Retrieval

        return AskOutcome(
            "", [], [], True, "no_evidence", NO_READABLE_KB, Retrieval([], {}), [], None, None, {}
        )
    scope: Scope = call.search_scope(kb_ids)
    return ask(s, scope, question, top_k=top_k, retrieval_query=retrieval_query)
