"""Every call checked on the server and recorded: the one path all routes take.

`http_handler` opens a call record for each request; a route's first act is `authorize(...)`,
which runs spec 000 section 6.2's checks in order (token, identity, policy, tool, scope subset,
dataset, write action), plus tenant isolation and rate limits. When the request ends, the record
is written to the audit log, refused calls included; if it cannot be written, the call fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from citegate.governance.audit import AuditRecord, now_iso
from citegate.governance.policy.model import (
    EffectiveScope,
    Policy,
    RequestedScope,
    ScopeViolation,
    WriteAction,
    effective_scope,
)
from citegate.governance.signals import QuestionOutcome
from citegate.knowledge.retrieval import Scope
from citegate.knowledge.schemas.kb import KnowledgeBase
from citegate.platform.errors import (
    AuditUnavailable,
    DatasetNotAllowed,
    ForbiddenAction,
    ForbiddenScope,
    ForbiddenTool,
    RateLimited,
    Unauthorized,
)
from citegate.platform.observability import logger
from citegate.platform.principal import Principal

if TYPE_CHECKING:
    from citegate.governance.ports import Governing


@dataclass
class CallRecord:
    request_id: str
    route: str
    source_ip: str | None
    started: float = field(default_factory=time.perf_counter)
    timestamp: str = field(default_factory=now_iso)
    principal: Principal | None = None
    tool: str | None = None
    requested_scope: dict[str, Any] | None = None
    effective_scope: dict[str, Any] | None = None
    knowledge_bases: list[str] = field(default_factory=list)
    query: str | None = None
    result_count: int | None = None
    retrieved: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    purpose: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    pending_written: bool = False
    # A question's outcome (answer routes) or the report a feedback call counted (AuditRecord's).
    outcome: str | None = None
    no_answer_code: str | None = None
    confidence: str | None = None
    cited_paths: list[str] = field(default_factory=list)
    nearby_paths: list[str] = field(default_factory=list)
    answer_request_id: str | None = None
    feedback_record: str | None = None

    def note(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self, key, value)

    def to_audit(
        self, *, decision: str, reason: str | None, status: int | None, default_tenant: str
    ) -> AuditRecord:
        principal = self.principal
        return AuditRecord(
            request_id=self.request_id,
            timestamp=self.timestamp,
            tenant_id=principal.tenant_id if principal else default_tenant,
            caller_type=principal.type if principal else "unauthenticated",
            caller_id=principal.id if principal else "unauthenticated",
            route=self.route,
            tool=self.tool,
            user_id=self.user_id,
            session_id=self.session_id,
            purpose=self.purpose,
            source_ip=self.source_ip,
            requested_scope=self.requested_scope,
            effective_scope=self.effective_scope,
            decision=decision,
            reason=reason,
            status=status,
            knowledge_bases=self.knowledge_bases,
            query=self.query,
            result_count=self.result_count,
            retrieved_chunk_ids=self.retrieved,
            cited_chunk_ids=self.cited,
            latency_ms=round((time.perf_counter() - self.started) * 1000, 2),
            outcome=self.outcome,
            no_answer_code=self.no_answer_code,
            confidence=self.confidence,
            cited_paths=self.cited_paths,
            nearby_paths=self.nearby_paths,
            answer_request_id=self.answer_request_id,
            feedback_record=self.feedback_record,
        )


_current: ContextVar[CallRecord | None] = ContextVar("citegate_call", default=None)


def begin_call(event: dict[str, Any]) -> CallRecord:
    context = event.get("requestContext") or {}
    record = CallRecord(
        request_id=str(context.get("requestId") or ""),
        route=str(event.get("routeKey") or context.get("routeKey") or ""),
        source_ip=(context.get("http") or {}).get("sourceIp"),
    )
    _current.set(record)
    return record


def current_call() -> CallRecord:
    record = _current.get()
    if record is None:  # direct calls of the layer (tests, scripts) still get a record
        record = CallRecord(request_id="", route="", source_ip=None)
        _current.set(record)
    return record


def note_answered(question: str, kb_ids: Iterable[str], outcome: QuestionOutcome) -> None:
    """The one place a route that answers a question says so: the question, the knowledge bases
    it was asked of and its outcome go on the call's audit record, and from there (written once,
    when the call ends) become its insights signal (citegate.governance.signals)."""
    current_call().note(query=question, knowledge_bases=sorted(set(kb_ids)), **outcome.fields())


def end_call(s: Governing, record: CallRecord, status: int, error: str | None) -> None:
    """Write the call's audit record; raises AuditUnavailable if it cannot be written."""
    decision = "allow" if status < 400 else ("error" if status >= 500 else "deny")
    try:
        tenant = s.settings.default_tenant
        s.audit.write(record.to_audit(decision=decision, reason=error, status=status, default_tenant=tenant))
    except Exception as failure:
        logger.exception("audit write failed")
        raise AuditUnavailable("the call could not be audited, so it was not completed") from failure
    finally:
        _current.set(None)


@dataclass
class Authorized:
    principal: Principal
    policy: Policy
    scope: EffectiveScope
    kb: KnowledgeBase | None = None
    working_allowed: bool = False  # the policy grants working docs to this principal

    def search_scope(self, kb_ids: frozenset[str], source_names: list[str] | None = None) -> Scope:
        """The retrieval scope: the effective scope, narrowed to the files the policy grants."""
        names: set[str] | None = set(source_names) if source_names else None
        if self.policy.files is not None:
            granted = {name for kb in kb_ids for name in self.policy.files.get(kb, [])}
            names = granted if names is None else names & granted
        return Scope(
            kb_ids=kb_ids,
            source_names=frozenset(names) if names is not None else None,
            projects=frozenset(self.scope.projects) if self.scope.projects is not None else None,
            path_prefixes=tuple(self.scope.path_prefixes) if self.scope.path_prefixes is not None else None,
            versions=frozenset(self.scope.versions) if self.scope.versions is not None else None,
        )


def maintainer(principal: Principal, claim: str) -> bool:
    value = principal.claims.get(claim)
    roles = principal.claims.get("roles") or principal.claims.get("groups") or []
    return value is True or value == "true" or (isinstance(roles, list) and "maintainer" in roles)


# Seconds a read call may rely on this process's copy of a knowledge base (status, tenant), like the
# policy cache: one DynamoDB read less on every query.
KB_READ_MAX_AGE = 5.0


def admit(
    s: Governing,
    principal: Principal,
    tool: str,
    *,
    kb_id: str | None = None,
    write: WriteAction | None = None,
    allow_anonymous: bool = False,
    tool_granted: bool = False,
) -> Authorized:
    """The checks a route's declaration settles before its body is read (citegate.api.admission):
    token and identity, the policy, rate limits, the tool; then the knowledge base named in the
    path and the write action, for routes whose body carries no requested scope."""
    record = current_call()
    record.principal = principal
    record.tool = tool
    # 1-2. token and identity: resolved before this call; spec 004 routes need credentials.
    if not principal.authenticated and not allow_anonymous:
        raise Unauthorized(
            "authentication required: send 'Authorization: Bearer <token>' or sign the request"
        )
    # 3. the server's policy for this principal
    policy = s.policies.for_principal(principal)
    if policy is None:
        _refuse_anonymous(principal, tool)
        raise ForbiddenTool(
            f"no policy grants {principal.type} {principal.id!r} anything", details={"tool": tool}
        )
    _rate_limit(s, principal, policy, record.source_ip)
    _check_token_budget(s, principal, policy)
    # 4. tool (`tool_granted`: a route every caller with a policy may use, such as /v1/me)
    if not tool_granted and not policy.allows_tool(tool):
        _refuse_anonymous(principal, tool)
        raise ForbiddenTool(f"the tool {tool!r} is not granted to {principal.id!r}", details={"tool": tool})
    working_allowed = policy.working_docs and (
        principal.type != "human" or maintainer(principal, s.settings.maintainer_claim)
    )
    call = Authorized(
        principal, policy, _effective(None, policy, working_allowed), working_allowed=working_allowed
    )
    record.effective_scope = call.scope.model_dump(exclude_none=True)
    if kb_id is not None:
        call.kb = _dataset(s, call, kb_id, write)
    if write is not None:
        _write_action(s, call, write)
    return call


def _refuse_anonymous(principal: Principal, tool: str) -> None:
    """A tool the anonymous policy does not grant (the site is authenticated-read for it, spec 000
    6.1): the caller must identify itself first, so it is 401 ("who are you"), not 403 ("you may
    not"); a caller who signs in may well be granted it."""
    if not principal.authenticated:
        raise Unauthorized(
            f"sign in to call {tool!r}: it is not open to anonymous readers here (authenticated-read); "
            "send 'Authorization: Bearer <token>' or sign the request",
            details={"tool": tool},
        )


def narrow(
    s: Governing, call: Authorized, requested: RequestedScope | None, *, write: WriteAction | None = None
) -> Authorized:
    """Step 5 with the scope the body asks for (a request, never a grant), then step 7."""
    record = current_call()
    if requested is not None:
        record.requested_scope = requested.model_dump(exclude_none=True)
    narrowed = replace(call, scope=_effective(requested, call.policy, call.working_allowed))
    record.effective_scope = narrowed.scope.model_dump(exclude_none=True)
    if write is not None:
        _write_action(s, narrowed, write)
    return narrowed


def authorize(
    s: Governing,
    principal: Principal,
    tool: str,
    *,
    kb_id: str | None = None,
    write: WriteAction | None = None,
    requested: RequestedScope | None = None,
    allow_anonymous: bool = False,
) -> Authorized:
    """Every check of spec 000 6.2 in its order, at once (for callers outside a route's entry)."""
    call = narrow(s, admit(s, principal, tool, allow_anonymous=allow_anonymous), requested)
    if kb_id is not None:
        call.kb = _dataset(s, call, kb_id, write)
    if write is not None:
        _write_action(s, call, write)
    return call


def _effective(requested: RequestedScope | None, policy: Policy, working_allowed: bool) -> EffectiveScope:
    try:
        return effective_scope(requested, policy.scope, working_docs_allowed=working_allowed)
    except ScopeViolation as error:
        raise ForbiddenScope(str(error)) from error


def _dataset(s: Governing, call: Authorized, kb_id: str, write: WriteAction | None) -> KnowledgeBase:
    """6. The knowledge base: granted, and approved unless working docs are."""
    # A read may check a copy of the knowledge base up to KB_READ_MAX_AGE old; a write reads it.
    kb = s.kbs.get(
        kb_id, tenant_id=call.principal.tenant_id, max_age=None if write is not None else KB_READ_MAX_AGE
    )
    if not _names_readable(call, kb):
        raise DatasetNotAllowed(f"knowledge base {kb_id!r} is not granted", details={"kb_id": kb_id})
    current_call().knowledge_bases = [kb_id]
    return kb


def _names_readable(call: Authorized, kb: KnowledgeBase) -> bool:
    """A knowledge base the caller may name (in a path, or as an OpenAI-compatible model): granted,
    and approved unless working docs are granted or the policy names it."""
    return call.policy.allows_kb(kb.kb_id) and (
        kb.status == "approved" or call.working_allowed or kb.kb_id in call.policy.knowledge_bases
    )


def grant_kb(s: Governing, call: Authorized, kb_id: str) -> KnowledgeBase:
    """Step 6 for a knowledge base a read names outside its path (an OpenAI-compatible `model`):
    404 when the tenant has none of that id, 403 when it is not granted."""
    call.kb = _dataset(s, call, kb_id, None)
    return call.kb


def nameable_kbs(s: Governing, authorized: Authorized) -> list[KnowledgeBase]:
    """Every knowledge base the caller may name, as `grant_kb` checks it."""
    return [kb for kb in s.kbs.list(authorized.principal.tenant_id) if _names_readable(authorized, kb)]


def _write_action(s: Governing, call: Authorized, write: WriteAction) -> None:
    """7. The write action; before anything changes, the call's audit record exists."""
    if not call.policy.allows_write(write):
        raise ForbiddenAction(
            f"the write action {write!r} is not granted (the tool is)", details={"action": write}
        )
    _write_pending(s, current_call())


def readable_kbs(s: Governing, authorized: Authorized, *, include_working: bool) -> list[KnowledgeBase]:
    """Every knowledge base the caller may read: approved ones, working ones when granted and asked."""
    policy = authorized.policy
    allowed = []
    for kb in s.kbs.list(authorized.principal.tenant_id):
        if not policy.allows_kb(kb.kb_id):
            continue
        if kb.status == "approved" or (include_working and authorized.scope.include_working_docs):
            allowed.append(kb)
    return allowed


def _rate_limit(s: Governing, principal: Principal, policy: Policy, source_ip: str | None) -> None:
    """The principal's limit (its policy's), or for anonymous callers, who are all one principal,
    a limit per client address under a site-wide ceiling (settings); and the per-address limit of
    every caller. One call counts against all of them or none (citegate.governance.ratelimit)."""
    if principal.type == "anonymous":
        site = f"anonymous:{principal.tenant_id}"
        limits = [
            (f"{site}:ip:{source_ip or 'unknown'}", s.settings.anonymous_ip_rate_limit_per_minute),
            (site, s.settings.anonymous_rate_limit_per_minute),
        ]
    else:
        who = f"{principal.tenant_id}:{principal.type}:{principal.id}"
        limits = [(f"principal:{who}", policy.rate_limit_per_minute)]
    if source_ip:
        limits.append((f"ip:{source_ip}", s.settings.ip_rate_limit_per_minute))
    s.counters.hit_all(limits)


TOKEN_WINDOW_SECONDS = 24 * 3600


def _budget_key(principal: Principal) -> str:
    return f"tokens:{principal.tenant_id}:{principal.type}:{principal.id}"


def _check_token_budget(s: Governing, principal: Principal, policy: Policy) -> None:
    budget = policy.token_budget_per_day
    if budget is not None and s.counters.current(_budget_key(principal), TOKEN_WINDOW_SECONDS) >= budget:
        window_end = (int(time.time() // TOKEN_WINDOW_SECONDS) + 1) * TOKEN_WINDOW_SECONDS
        raise RateLimited(
            f"the daily token budget of {budget} is spent",
            details={"budget": budget, "retry_after": max(1, int(window_end - time.time()))},
        )


def estimate_tokens(*texts: str) -> int:
    """About four characters a token for English, one or two for Chinese: a budget, not a bill."""
    total = 0
    for text in texts:
        cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
        total += cjk + (len(text) - cjk + 3) // 4
    return total


def charge_tokens(s: Governing, principal: Principal, tokens: int) -> None:
    """Record what an answer cost against the principal's daily token budget."""
    if tokens > 0:
        s.counters.add(_budget_key(principal), tokens, TOKEN_WINDOW_SECONDS)


def _write_pending(s: Governing, record: CallRecord) -> None:
    """Before a call changes anything, its audit record must exist."""
    if record.pending_written:
        return
    try:
        tenant = s.settings.default_tenant
        s.audit.write(record.to_audit(decision="pending", reason=None, status=None, default_tenant=tenant))
    except Exception as error:
        raise AuditUnavailable("the call could not be audited, so nothing was changed") from error
    record.pending_written = True
