"""Spec 000's standard request (section 4) and AnswerResult (section 5), with the agent tools' bodies."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citegate.policy.model import RequestedScope


class WireModel(BaseModel):
    """Spec 000 bodies are camelCase on the wire; unknown fields are refused so typos surface."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, populate_by_name=True)


class Caller(WireModel):
    type: Literal["human", "agent"] | None = None
    id: str | None = Field(None, max_length=200)
    purpose: str | None = Field(None, max_length=500)


class AskBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    question: str = Field(min_length=1, max_length=4000)
    requireCitations: bool = True
    topK: int = Field(8, ge=1, le=50)


class SearchBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    query: str = Field(min_length=1, max_length=4000)
    topK: int = Field(8, ge=1, le=50)


class GetPageBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    path: str = Field(min_length=1, max_length=1000)
    version: str | None = Field(None, max_length=100)


class GetContextBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    task: str = Field(min_length=1, max_length=4000)
    tokenBudget: int = Field(4000, ge=200, le=32000)


class SessionCreateBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    question: str | None = Field(None, min_length=1, max_length=4000)
    requireCitations: bool = True


class TurnBody(WireModel):
    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    question: str = Field(min_length=1, max_length=4000)
    requireCitations: bool = True


class AnswerCitation(BaseModel):
    path: str
    url: str
    title: str
    anchor: str
    chunkId: str
    sourceProject: str
    version: str
    snippet: str = ""
    kbId: str = ""
    page: int | None = None


class GroundedSentence(BaseModel):
    sentence: str
    citations: list[int]  # 1-based indexes into `citations`
    supported: bool


class Action(BaseModel):
    """A follow-up the caller may take; sending `eventType` and the same question, scope and
    citations to the tool reproduces `dedupeKey` on the server."""

    type: Literal["create_feedback", "create_improvement_task"]
    enabled: bool
    eventType: str
    dedupeKey: str


class AnswerAudit(BaseModel):
    requestId: str
    caller: str
    scope: str


class AnswerResult(BaseModel):
    answer: str
    summary: str
    citations: list[AnswerCitation]
    confidence: Literal["high", "medium", "low"]
    grounding: list[GroundedSentence]
    noAnswerReason: dict[str, str] | None
    relatedPages: list[dict[str, Any]]
    actions: list[Action]
    audit: AnswerAudit
    answerSource: Literal["knowledge_base", "model"] = "knowledge_base"
    sessionId: str | None = None
    turn: int | None = None
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class SessionScope(BaseModel):
    """A session's scope in spec 000's words (section 4's request, section 7's AnswerSession).
    `null` on an axis means the session does not narrow it: what the caller's policy grants
    (`version` is also `null` when the policy grants several versions and none was asked for)."""

    projects: list[str] | None
    paths: list[str] | None
    version: str | None
    includeWorkingDocs: bool


class SessionOwner(BaseModel):
    type: str
    id: str


class SessionLimits(BaseModel):
    maxTurns: int
    maxContextTokens: int


class SessionTurn(AnswerResult):
    """One answered turn: the AnswerResult, its question and its number in the session."""

    sessionId: str
    turn: int
    question: str


class AnswerSession(BaseModel):
    """POST /answer/sessions: spec 000 section 7's AnswerSession, plus the session token itself.

    `sessionToken` is returned here once and never again; the server keeps only its SHA-256
    (`sessionTokenHash`, of 256 random bits: no help in guessing the token, and not accepted in its
    place). `turns` holds the first turn when the session was opened with a question."""

    sessionId: str
    sessionToken: str
    sessionTokenHash: str
    owner: SessionOwner
    scope: SessionScope
    turns: list[SessionTurn]
    limits: SessionLimits
    createdAt: str
    expiresAt: str
