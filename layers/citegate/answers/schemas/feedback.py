"""Spec 000 8.1: the create_feedback / create_improvement_task bodies and what they answer.

The server always derives the dedupeKey from the content (`citegate.answers.feedback.dedupe_key`): a
client-chosen key could merge unrelated reports into one record or carry plaintext, so a key sent
by the client is only checked for its shape and echoed back as `clientDedupeKey` when it differs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from citegate.answers.schemas.answer import StandardRequest, WireModel, either_text

Kind = Literal["feedback", "improvement_task"]
Status = Literal["open", "closed"]
SHA256_HEX = r"^[0-9a-f]{64}$"


class CitationRef(WireModel):
    path: str = Field(min_length=1, max_length=1000)
    chunkId: str | None = Field(None, max_length=300)


class FeedbackBody(StandardRequest):
    """Spec 000 section 4's standard request (`query` a synonym of `question`; `requireCitations`
    accepted, not used) and the report's own fields."""

    model_config = ConfigDict(json_schema_extra=either_text("question", ("query",)))

    eventType: str = Field("qa_no_answer", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    dedupeKey: str | None = Field(None, pattern=SHA256_HEX)
    idempotencyKey: str | None = Field(None, min_length=1, max_length=200)
    question: str = Field(min_length=1, max_length=4000)
    query: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of question")
    citations: list[CitationRef] = Field(default_factory=list, max_length=100)
    # The AnswerResult's audit.requestId, linking the report to the call that found no answer.
    answerRequestId: str | None = Field(None, max_length=200)
    title: str | None = Field(None, max_length=300)
    description: str | None = Field(None, max_length=8000)
    comment: str | None = Field(None, max_length=4000)

    @field_validator("citations", mode="before")
    @classmethod
    def _paths_as_citations(cls, value: Any) -> Any:
        # Citations may be sent as bare paths or as AnswerResult-like objects with a path.
        if isinstance(value, list):
            return [{"path": item} if isinstance(item, str) else item for item in value]
        return value

    def citation_paths(self) -> list[str]:
        return [c.path for c in self.citations]

    def scope_dict(self) -> dict[str, Any] | None:
        return self.scope.model_dump(exclude_none=True) if self.scope is not None else None


class ImprovementTaskBody(FeedbackBody):
    eventType: str = Field("knowledge_gap", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")


class CloseBody(WireModel):
    resolution: str | None = Field(None, max_length=2000)


class ReportEntry(BaseModel):
    """One report as callers see it: who (by type only) and when."""

    callerType: str
    at: str


class FeedbackRecord(BaseModel):
    recordId: str
    kind: Kind
    status: Status
    eventType: str
    dedupeKey: str
    count: int
    firstSeen: str
    lastSeen: str
    callers: dict[str, int]  # reports per caller type
    recent: list[ReportEntry]  # the latest reports, newest last
    issueNumber: int | None = None
    issueUrl: str | None = None
    sinkError: str | None = None
    closedAt: str | None = None
    resolution: str | None = None


class AdminReportEntry(ReportEntry):
    callerId: str
    requestId: str | None = None
    answerRequestId: str | None = None
    comment: str | None = None


class FeedbackRecordAdmin(FeedbackRecord):
    """What maintainers see: the content and every kept report with the caller's id."""

    tenantId: str
    question: str
    scope: dict[str, Any] | None = None
    citations: list[dict[str, Any]] = Field(default_factory=list)
    title: str | None = None
    description: str | None = None
    reports: list[AdminReportEntry] = Field(default_factory=list)
    closedBy: str | None = None


class ReportResult(BaseModel):
    record: FeedbackRecord
    created: bool  # False: the report was merged into the open record with the same dedupeKey
    duplicateOf: str | None = None  # that open record's id when created is False
    dedupeKey: str  # the server's key, always derived from the content
    clientDedupeKey: str | None = None  # the client's key, only when it differs
