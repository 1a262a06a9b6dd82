"""Evidence-bound answering (spec 004 `ask`): retrieve, answer from the candidates only, bind.

1. Retrieve candidates in the caller's scope.
2. Give the answerer the allowed refs (numbered) with at most `max_context_parents` parents as
   wider context.
3. Bind its draft to the candidate set (validate.bind): foreign refs and dangling markers go, and
   so do sentences left without a valid citation; with verification on, the model's own judge
   takes off citations it finds unsupported (verify.py).
4. Resolve the surviving refs into citations with the one rule resolve_refs uses
   (citations.citation_for), so what `ask` cites is what `resolve_refs` returns.
   No valid evidence: a plain no-answer with a reason.
5. Confidence from the evidence (confidence.py).
Later routes (Answer API, agent tools, /api/v2/query, chats) reuse this unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from citegate.answers.base import AnswererUnavailable, Draft, Evidence
from citegate.answers.confidence import Confidence, assess
from citegate.answers.specific import never_mentioned
from citegate.answers.validate import Bound, bind, with_answer_sentences
from citegate.answers.verify import Verifier, verify_bound
from citegate.knowledge.citations import citation_for
from citegate.knowledge.retrieval import Retrieval, Scope, retrieve
from citegate.knowledge.schemas.retrieval import AskCitation
from citegate.knowledge.search.base import Hit
from citegate.platform.errors import ModelUnavailable
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.answers.ports import Asking
    from citegate.knowledge.ports import HasParents

NO_ANSWER_TEXT = "I could not find an answer to this question in the knowledge base."
REASONS = {
    "no_evidence": "No passage in the knowledge base matches this question.",
    "weak_evidence": "The passages found do not answer this question.",
    "invalid_citations": "The answer could not be tied to any passage in the knowledge base, "
    "so it was withheld.",
    "forged_citations": "The answer cited passages that were not among those found, so it was withheld.",
    "unverified": "No sentence of the answer was found supported by the passage it cites, "
    "so it was withheld.",
}


@dataclass
class AskOutcome:
    answer: str
    used_refs: list[str]
    citations: list[AskCitation]  # resolve_refs's citations, with the answer sentences bound to each
    no_answer: bool
    no_answer_code: str | None
    no_answer_reason: str | None
    retrieval: Retrieval
    evidence: list[Evidence]
    bound: Bound | None
    draft: Draft | None
    stats: dict[str, Any] = field(default_factory=dict)
    confidence: Confidence = field(default_factory=Confidence.none)
    # Sentences taken out of the answer for want of a valid (or verified) citation.
    removed_sentences: list[str] = field(default_factory=list)

    def response(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "used_refs": self.used_refs,
            "citations": [c.model_dump() for c in self.citations],
            "no_answer": self.no_answer,
            "no_answer_reason": self.no_answer_reason,
            "stats": self.stats,
        }


def build_evidence(s: HasParents, hits: Sequence[Hit], max_context_parents: int) -> list[Evidence]:
    """Number the hits 1..n; the first `max_context_parents` distinct parents travel as context."""
    chosen: list[tuple[str, str, str]] = []
    for hit in hits:
        key = (hit.chunk.kb_id, hit.chunk.document_id, hit.chunk.parent_id)
        if key not in chosen and len(chosen) < max_context_parents:
            chosen.append(key)
    parents = s.parents.get_many(chosen) if chosen else {}
    chosen_ids = {k[2] for k in chosen}
    evidence = []
    for number, hit in enumerate(hits, start=1):
        chunk = hit.chunk
        parent = parents.get(chunk.parent_id) if chunk.parent_id in chosen_ids else None
        evidence.append(
            Evidence(
                number=number,
                ref_id=chunk.ref_id,
                text=chunk.text,
                # The engine's score, as tune_extractive fits the answerer on (hit.score is the
                # absolute relevance estimate since issue 21: citegate.knowledge.search.relevance).
                score=hit.fused_score if hit.fused_score is not None else hit.score,
                title=chunk.title,
                source_name=chunk.source_name,
                heading=chunk.heading,
                context=str(parent["text"]) if parent else "",
                lexical_score=hit.lexical_score,
                dense_score=hit.dense_score,
            )
        )
    return evidence


def ask(
    s: Asking,
    scope: Scope,
    question: str,
    *,
    top_k: int = 8,
    score_threshold: float | None = None,
    max_context_parents: int = 4,
    retrieval_query: str | None = None,
) -> AskOutcome:
    """`retrieval_query` lets a follow-up turn search with what earlier turns were about."""
    started = time.perf_counter()
    retrieval = retrieve(s, scope, retrieval_query or question, top_k=top_k, score_threshold=score_threshold)
    answerer = s.answerer
    stats: dict[str, Any] = {"retrieval": retrieval.stats, "answerer": answerer.name}

    def no_answer(
        code: str, evidence: list[Evidence], draft: Draft | None, bound: Bound | None
    ) -> AskOutcome:
        stats["timings_ms"] = {"total_ms": round((time.perf_counter() - started) * 1000, 2)}
        reason = (draft.reason if draft and draft.reason and code == "weak_evidence" else None) or REASONS[
            code
        ]
        return AskOutcome(
            NO_ANSWER_TEXT,
            [],
            [],
            True,
            code,
            reason,
            retrieval,
            evidence,
            bound,
            draft,
            stats,
            removed_sentences=list(bound.removed) if bound else [],
        )

    if not retrieval.hits:
        return no_answer("no_evidence", [], None, None)
    evidence = build_evidence(s, retrieval.hits, max_context_parents)
    answer_started = time.perf_counter()
    try:
        draft = answerer.answer(question, evidence, context=earlier_questions(question, retrieval_query))
    except AnswererUnavailable as error:
        # Its message says what kind of failure it was, never where (hosts, upstream bodies).
        logger.warning("the answerer failed", exc_info=True, extra={"answerer": answerer.name})
        raise ModelUnavailable(str(error), details={"answerer": answerer.name}) from error
    stats["answer_ms"] = round((time.perf_counter() - answer_started) * 1000, 2)
    if draft.model:
        stats["model"] = draft.model
    if draft.support_score is not None:
        stats["support_score"] = round(draft.support_score, 4)
    # A question naming an identifier that no document in scope holds is not answered from
    # passages about something else, whatever the answerer made of them.
    best_relevance = max((hit.score for hit in retrieval.hits), default=None)
    unknown = never_mentioned(s.index, scope.to_filter(), question, evidence, best_relevance)
    if unknown:
        draft = replace(draft, declined=True, reason=unknown, answer="", used_refs=())
    if draft.declined:
        return no_answer("weak_evidence", evidence, draft, None)
    bound = bind(draft, evidence)
    stats["dropped_refs"] = bound.dropped_refs
    stats["dropped_markers"] = bound.dropped_markers
    stats["removed_sentences"] = len(bound.removed)
    if bound.forged:
        return no_answer("forged_citations", evidence, draft, bound)
    if bound.empty:
        return no_answer("invalid_citations", evidence, draft, bound)
    verified: bool | None = None
    if isinstance(answerer, Verifier) and answerer.verify_citations:
        try:
            checked = verify_bound(question, bound, evidence, answerer)
        except AnswererUnavailable as error:
            logger.warning("the verifier failed", exc_info=True, extra={"answerer": answerer.name})
            raise ModelUnavailable(str(error), details={"answerer": answerer.name}) from error
        stats["verification"] = checked.verdicts
        bound = checked.bound
        stats["removed_sentences"] = len(bound.removed)
        if bound.empty:
            return no_answer("unverified", evidence, draft, bound)
        verified = True
    chunks = {e.ref_id: hit.chunk for e, hit in zip(evidence, retrieval.hits, strict=True)}
    citations = with_answer_sentences([citation_for(chunks[r]) for r in bound.used_refs], bound.answer)
    confidence = assess(
        draft, bound, [h for h in retrieval.hits if h.chunk.ref_id in bound.used_refs], verified
    )
    stats["confidence"] = confidence.stats()
    stats["timings_ms"] = {"total_ms": round((time.perf_counter() - started) * 1000, 2)}
    return AskOutcome(
        bound.answer,
        bound.used_refs,
        citations,
        False,
        None,
        None,
        retrieval,
        evidence,
        bound,
        draft,
        stats,
        confidence,
        list(bound.removed),
    )


def earlier_questions(question: str, retrieval_query: str | None) -> str | None:
    """What a follow-up's retrieval query adds to its question: the earlier turns' questions
    (citegate.answers.sessions.follow_up_query puts them first). None for a question that stands alone."""
    if not retrieval_query or retrieval_query.strip() == question.strip():
        return None
    earlier = retrieval_query.strip()
    if earlier.endswith(question.strip()):
        earlier = earlier[: -len(question.strip())].strip()
    return earlier or None
