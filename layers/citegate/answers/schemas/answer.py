"""Spec 000's standard request (section 4) and AnswerResult (section 5), with the agent tools' bodies."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from citegate.governance.policy.model import RequestedScope


class WireModel(BaseModel):
    """Spec 000 bodies are camelCase on the wire; unknown fields are refused so typos surface."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, populate_by_name=True)


class Caller(WireModel):
    type: Literal["human", "agent"] | None = None
    id: str | None = Field(None, max_length=200)
    purpose: str | None = Field(None, max_length=500)


def either_text(primary: str, others: tuple[str, ...]) -> Any:
    """OpenAPI: the request's text may come under any of its names, one of them required."""

    def adjust(schema: dict[str, Any]) -> None:
        required = [name for name in schema.get("required", []) if name != primary]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
        schema["anyOf"] = [{"required": [name]} for name in (primary, *others)]

    return adjust


class StandardRequest(WireModel):
    """Spec 000 section 4's standard request, accepted whole by every spec 000 route: `caller`,
    `scope`, `question` (or `query`, its synonym) and `requireCitations`. A field a tool does not
    use is accepted and ignored there; any other unknown field is refused (400 naming it).

    `text_field` is the tool's own name for the text (`question`, `query`, `task`): when it is
    absent, the first of `text_synonyms` sent fills it."""

    text_field: ClassVar[str] = "question"
    text_synonyms: ClassVar[tuple[str, ...]] = ("query",)

    caller: Caller = Field(default_factory=Caller)
    scope: RequestedScope | None = None
    requireCitations: bool = True

    @model_validator(mode="before")
    @classmethod
    def _text_under_any_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get(cls.text_field) is None:
            for name in cls.text_synonyms:
                if data.get(name) is not None:
                    return {**data, cls.text_field: data[name]}
        return data


class AskBody(StandardRequest):
    model_config = ConfigDict(json_schema_extra=either_text("question", ("query",)))

    question: str = Field(min_length=1, max_length=4000)
    query: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of question")
    topK: int = Field(8, ge=1, le=50)


class SearchBody(StandardRequest):
    model_config = ConfigDict(json_schema_extra=either_text("query", ("question",)))
    text_field = "query"
    text_synonyms = ("question",)

    query: str = Field(min_length=1, max_length=4000)
    question: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of query")
    topK: int = Field(8, ge=1, le=50)


class GetPageBody(StandardRequest):
    """The page is named by `path`, or, without it, by the standard request's `scope.paths` when
    that names exactly one path (a folder's path names its index page: index.md, index.mdx,
    README.md); `version`, else the scope's version. The standard request's `question`/`query`
    and `requireCitations` are accepted and not used."""

    path: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="the page's path; default: the one path of scope.paths (400 when none or several)",
    )
    version: str | None = Field(None, max_length=100)
    question: str | None = Field(None, min_length=1, max_length=4000, description="accepted, not used")
    query: str | None = Field(None, min_length=1, max_length=4000, description="accepted, not used")


class GetContextBody(StandardRequest):
    model_config = ConfigDict(json_schema_extra=either_text("task", ("question", "query")))
    text_field = "task"
    text_synonyms = ("question", "query")

    task: str = Field(min_length=1, max_length=4000)
    question: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of task")
    query: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of task")
    tokenBudget: int = Field(4000, ge=200, le=32000)


class SessionCreateBody(StandardRequest):
    question: str | None = Field(None, min_length=1, max_length=4000)
    query: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of question")


class TurnBody(StandardRequest):
    model_config = ConfigDict(json_schema_extra=either_text("question", ("query",)))

    question: str = Field(min_length=1, max_length=4000)
    query: str | None = Field(None, min_length=1, max_length=4000, description="a synonym of question")


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
