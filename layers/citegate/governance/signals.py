"""Question signals: what became of every question asked, derived from its audit record.

One item per answered call (answers, declines) and per feedback or improvement-task report, in the
insights table under `{tenant}#signal`, sorted by time, with the audit record's own TTL: a signal
never outlives the record it was derived from, and holds nothing the audit record does not (the
question, the knowledge bases and scope, the outcome, the caller's type, the pages). No caller id,
no address, no user id. citegate.insights groups the gaps among them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from citegate.platform.dynamo import to_item

if TYPE_CHECKING:
    from citegate.governance.audit import AuditRecord

GapKind = Literal["declined", "low_confidence", "not_helpful"]
GAP_KINDS: tuple[GapKind, ...] = ("declined", "low_confidence", "not_helpful")
OUTCOMES = ("answered", "declined", "feedback", "improvement_task")
QUESTION_LIMIT = 2000  # characters kept of a question (the audit's query is bounded by the routes)


@dataclass(frozen=True)
class QuestionOutcome:
    """What became of a question, as every route that answers one reports it (through
    citegate.governance.calls.note_answered, onto the call's audit record, whence its signal)."""

    outcome: Literal["answered", "declined"]
    no_answer_code: str | None = None
    confidence: str | None = None  # high | medium | low
    cited_paths: list[str] = field(default_factory=list)
    nearby_paths: list[str] = field(default_factory=list)  # the best pages found, cited or not

    @classmethod
    def of(
        cls,
        *,
        declined: bool,
        reason: str | None,
        confidence: str | None,
        cited: Iterable[str],
        found: Iterable[str],
    ) -> QuestionOutcome:
        return cls(
            "declined" if declined else "answered",
            (reason or "no_answer") if declined else None,
            confidence,
            [] if declined else list(dict.fromkeys(cited)),
            list(dict.fromkeys(found))[:5],
        )

    def fields(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "no_answer_code": self.no_answer_code,
            "confidence": self.confidence,
            "cited_paths": self.cited_paths,
            "nearby_paths": self.nearby_paths,
        }


def signal_pk(tenant_id: str) -> str:
    return f"{tenant_id}#signal"


def caller_kind(caller_type: str) -> str:
    """Spec 000's two caller kinds: people (signed in or anonymous) and agents (agents, services)."""
    return "agent" if caller_type in ("agent", "service") else "human"


def gap_kind(outcome: str, confidence: str | None) -> GapKind | None:
    """Why a signal is a gap, or None when the question was answered well enough."""
    if outcome == "declined":
        return "declined"
    if outcome in ("feedback", "improvement_task"):
        return "not_helpful"
    if outcome == "answered" and confidence == "low":
        return "low_confidence"
    return None


def signal_item(record: AuditRecord, expires_at: int) -> dict[str, Any] | None:
    """The signal of an audit record, or None when the call was not a question's outcome."""
    if record.outcome not in OUTCOMES or not record.query or (record.status or 0) >= 400:
        return None
    scope = record.effective_scope or {}
    gap = gap_kind(record.outcome, record.confidence)
    item: dict[str, Any] = {
        "pk": signal_pk(record.tenant_id),
        "sk": record.sort_key,
        "request_id": record.request_id,
        "at": record.timestamp,
        "day": record.timestamp[:10],
        "route": record.route,
        "question": record.query[:QUESTION_LIMIT],
        "kbs": sorted(set(record.knowledge_bases)),
        "projects": scope.get("projects"),
        "versions": scope.get("versions"),
        "paths": scope.get("path_prefixes"),
        "outcome": record.outcome,
        "reason": record.no_answer_code,
        "confidence": record.confidence,
        "caller_type": record.caller_type,
        "caller_kind": caller_kind(record.caller_type),
        "cited_paths": record.cited_paths[:20],
        "nearby_paths": record.nearby_paths[:5],
        "answer_request_id": record.answer_request_id,
        "feedback_record": record.feedback_record,
        "gap": gap,
        "expires_at": expires_at,
    }
    return {k: v for k, v in item.items() if v not in (None, [])}


class SignalLog:
    """Writes signals; citegate.insights.store reads and groups them."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def record(self, record: AuditRecord, expires_at: int) -> bool:
        item = signal_item(record, expires_at)
        if item is None:
            return False
        self._table.put_item(Item=to_item(item))
        return True
