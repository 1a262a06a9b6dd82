"""Answer sessions (spec 000 section 7): multi-turn questions bound to an owner and a token.

The session token is returned once and stored only as a hash; every turn checks the token, the
owner, the scope and `expires_at` (in code: DynamoDB's TTL deletes late). A turn inherits the
session's scope; it may narrow it for itself (fewer projects or paths, one version, no working
docs), never widen it, and the caller's policy of the day must still grant it. Turns beyond
`max_turns`, or past `max_context_tokens`, are trimmed oldest first, keeping a summary of their
citations; turn numbers come from a counter kept with the session, so they never repeat, however
many turns were trimmed, and two turns written at once cannot take the same number. Earlier turns
inform the retrieval of a follow-up question.

Expired sessions and clean-up. DynamoDB's TTL (the local TTL sweeper, about a minute late) deletes
a session, with its questions and answers, once it expires. Its owner must still be told
`session_expired`, not `session_forbidden`, afterwards. So each session has a tombstone item
beside it (`<session id>#tombstone`), written at creation: only the hashes of the token and of the
owner and the expiry, no question or answer, kept until `TOMBSTONE_SECONDS` after expiry. A
token signed with its expiry and owner would also work, but needs a signing key shared by the
functions, kept secret and rotated; the tombstone needs nothing new, and answers exactly as the
live session did. After the tombstone goes too, the session is unknown: `session_forbidden`.

A caller who lacks the token, or is not the owner, gets the same `session_forbidden` and message
whether the session exists, existed or never did: ids are not credentials.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

from citegate.answers.schemas.answer import AnswerResult, SessionScope
from citegate.governance.calls import estimate_tokens
from citegate.governance.policy.model import (
    EffectiveScope,
    InvalidPath,
    RequestedScope,
    ScopeGrant,
    ScopeViolation,
    _within,
    effective_scope,
    normalize_path,
)
from citegate.platform.dynamo import from_item, is_conditional_failure, to_item
from citegate.platform.errors import Conflict, ForbiddenScope, SessionExpired, SessionForbidden
from citegate.platform.principal import Principal

if TYPE_CHECKING:
    from citegate.governance.calls import Authorized

SESSION_TOKEN_HEADER = "X-Session-Token"
MAX_TURNS = 8
MAX_CONTEXT_TOKENS = 12000
SESSION_TTL_SECONDS = 30 * 60
# How long after its expiry a session's owner is still told `session_expired` (see the docstring).
TOMBSTONE_SECONDS = 7 * 24 * 3600
# Attempts to write a turn when other turns of the same session are written at the same time.
WRITE_ATTEMPTS = 5
_SESSION_ID = re.compile(r"s_[0-9a-f]{32}")
_TOMBSTONE = "#tombstone"
NOT_THE_CALLERS = (
    f"no session with this id belongs to the caller with this {SESSION_TOKEN_HEADER} "
    "(send the token returned when the session was created)"
)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _owner_hash(owner: Principal) -> str:
    return hashlib.sha256(f"{owner.tenant_id}\x1f{owner.type}\x1f{owner.id}".encode()).hexdigest()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class SessionStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    def create(
        self, owner: Principal, scope: EffectiveScope, ttl_seconds: int | None = None
    ) -> tuple[dict[str, Any], str]:
        token = secrets.token_urlsafe(32)
        now = time.time()
        expires = int(now + (SESSION_TTL_SECONDS if ttl_seconds is None else ttl_seconds))
        session_id = "s_" + uuid.uuid4().hex
        session = {
            "session_id": session_id,
            "session_token_hash": _hash(token),
            "owner": {"type": owner.type, "id": owner.id, "tenant_id": owner.tenant_id},
            "scope": scope.model_dump(),
            "turns": [],
            "turn_count": 0,
            "earlier_citations": [],
            "limits": {"maxTurns": MAX_TURNS, "maxContextTokens": MAX_CONTEXT_TOKENS},
            "created_at": _iso(now),
            "expires_at": _iso(expires),
            "expires_at_epoch": expires,  # the table's TTL attribute
        }
        tombstone = {
            "session_id": session_id + _TOMBSTONE,
            "session_token_hash": session["session_token_hash"],
            "owner_hash": _owner_hash(owner),
            "expires_at": session["expires_at"],
            "session_expires_epoch": expires,
            "expires_at_epoch": expires + TOMBSTONE_SECONDS,
        }
        # The tombstone first: a session never exists without one.
        self._table.put_item(Item=to_item(tombstone), ConditionExpression="attribute_not_exists(session_id)")
        self._table.put_item(Item=to_item(session), ConditionExpression="attribute_not_exists(session_id)")
        return session, token

    def open(self, session_id: str, token: str | None, caller: Principal) -> dict[str, Any]:
        """The session, if the caller owns it and holds its token; refused otherwise."""
        if not token or not _SESSION_ID.fullmatch(session_id):
            raise SessionForbidden(NOT_THE_CALLERS)
        item = self._table.get_item(Key={"session_id": session_id}, ConsistentRead=True).get("Item")
        if item is None:
            self._refuse_gone(session_id, token, caller)
        session: dict[str, Any] = from_item(item)
        owner = session["owner"]
        if not hmac.compare_digest(_hash(token), str(session["session_token_hash"])) or (
            owner["type"],
            owner["id"],
            owner["tenant_id"],
        ) != (caller.type, caller.id, caller.tenant_id):
            raise SessionForbidden(NOT_THE_CALLERS)
        if time.time() >= float(session["expires_at_epoch"]):
            raise SessionExpired(f"the session expired at {session['expires_at']}")
        return session

    def _refuse_gone(self, session_id: str, token: str, caller: Principal) -> NoReturn:
        """No session item: expired and cleaned up (the owner is told so), or never there."""
        item = self._table.get_item(Key={"session_id": session_id + _TOMBSTONE}, ConsistentRead=True).get(
            "Item"
        )
        if item is not None:
            tombstone = from_item(item)
            owned = hmac.compare_digest(_hash(token), str(tombstone["session_token_hash"])) and (
                hmac.compare_digest(_owner_hash(caller), str(tombstone["owner_hash"]))
            )
            if owned and time.time() >= float(tombstone["session_expires_epoch"]):
                raise SessionExpired(f"the session expired at {tombstone['expires_at']}")
        raise SessionForbidden(NOT_THE_CALLERS)

    def add_turn(self, session: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
        """Append `turn` under the session's next number and return the session as written.

        The number is the session's counter plus one, written only if the counter is still what
        was read (two turns at once: the second reads the session again and takes the next)."""
        for _ in range(WRITE_ATTEMPTS):
            written = _with_turn(session, turn)
            previous = session.get("turn_count")
            condition = "attribute_exists(session_id) AND " + (
                "turn_count = :previous" if previous is not None else "attribute_not_exists(turn_count)"
            )
            extra: dict[str, Any] = (
                {"ExpressionAttributeValues": {":previous": previous}} if previous is not None else {}
            )
            try:
                self._table.put_item(Item=to_item(written), ConditionExpression=condition, **extra)
                return written
            except Exception as error:
                if not is_conditional_failure(error):
                    raise
            item = self._table.get_item(Key={"session_id": session["session_id"]}, ConsistentRead=True).get(
                "Item"
            )
            if item is None:
                raise SessionExpired(
                    f"the session expired at {session['expires_at']} while this turn was answered"
                )
            session = from_item(item)
        raise Conflict("other turns of this session kept arriving at once; retry", details={"retry_after": 1})


def _with_turn(session: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
    previous = session.get("turn_count")
    if previous is None:  # a session written before the counter was kept
        previous = max((int(t["turn"]) for t in session["turns"]), default=0)
    number = int(previous) + 1
    turns = [*session["turns"], {**turn, "turn": number}]
    earlier = list(session.get("earlier_citations") or [])
    # Trim oldest turns past the limits, keeping what they cited.
    while len(turns) > MAX_TURNS or (len(turns) > 1 and _tokens(turns) > MAX_CONTEXT_TOKENS):
        dropped = turns.pop(0)
        earlier.extend(c for c in dropped.get("citations", []) if c not in earlier)
    return {**session, "turns": turns, "earlier_citations": earlier[-50:], "turn_count": number}


def _tokens(turns: list[dict[str, Any]]) -> int:
    return sum(estimate_tokens(t.get("question", ""), t.get("answer", "")) for t in turns)


def turn_scope(session: dict[str, Any], requested: RequestedScope | None, call: Authorized) -> EffectiveScope:
    """A turn's scope: the session's, or the narrower one the turn asks for (never wider), and
    still granted by the caller's policy today. An axis the turn does not name is inherited."""
    stored = EffectiveScope.model_validate(session["scope"])
    scope = stored
    if requested is not None:
        within = ScopeGrant(
            projects=stored.projects, path_prefixes=stored.path_prefixes, versions=stored.versions
        )
        try:
            scope = effective_scope(requested, within, working_docs_allowed=stored.include_working_docs)
        except ScopeViolation as error:
            raise ForbiddenScope(
                f"a follow-up may narrow its session's scope, never widen it: {error}"
            ) from error
        if "includeWorkingDocs" not in requested.model_fields_set:
            scope.include_working_docs = stored.include_working_docs
    try:
        _check_granted(scope, call.policy.scope, working_docs_allowed=call.working_allowed)
    except ScopeViolation as error:
        raise ForbiddenScope(f"the caller's policy no longer grants this session's scope: {error}") from error
    return scope


def _check_granted(scope: EffectiveScope, grant: ScopeGrant, *, working_docs_allowed: bool) -> None:
    """Raise ScopeViolation unless `scope` lies inside `grant` on every axis."""
    if grant.projects is not None and (
        scope.projects is None or not set(scope.projects) <= set(grant.projects)
    ):
        raise ScopeViolation("projects not granted")
    if grant.path_prefixes is not None:
        try:
            granted = [normalize_path(p) for p in grant.path_prefixes]
            paths = (
                [normalize_path(p) for p in scope.path_prefixes] if scope.path_prefixes is not None else None
            )
        except InvalidPath as error:
            raise ScopeViolation(f"invalid path: {error}") from error
        if paths is None or not all(any(_within(p, g) for g in granted) for p in paths):
            raise ScopeViolation("paths not granted")
    if grant.versions is not None and (
        scope.versions is None or not set(scope.versions) <= set(grant.versions)
    ):
        raise ScopeViolation("versions not granted")
    if scope.include_working_docs and not working_docs_allowed:
        raise ScopeViolation("working docs are not granted")


def wire_scope(scope: EffectiveScope) -> SessionScope:
    """The session's scope in spec 000's request names (`paths`, `version`, ...)."""
    return SessionScope(
        projects=scope.projects,
        paths=[p.rstrip("/") for p in scope.path_prefixes] if scope.path_prefixes is not None else None,
        version=scope.versions[0] if scope.versions is not None and len(scope.versions) == 1 else None,
        includeWorkingDocs=scope.include_working_docs,
    )


def follow_up_query(session: dict[str, Any], question: str) -> str:
    """The retrieval query for a turn: the question, plus what the previous turns asked about."""
    return follow_up_of([t["question"] for t in session["turns"]], question)


def follow_up_of(earlier_questions: list[str], question: str) -> str:
    """A follow-up's retrieval query from the conversation's earlier questions (a session's turns,
    or an OpenAI-compatible request's earlier user messages): the last two, then the question."""
    previous = [q for q in earlier_questions if q.strip()][-2:]
    return " ".join([*previous, question]) if previous else question


def turn_record(question: str, result: AnswerResult) -> dict[str, Any]:
    """What a session keeps of a turn; `add_turn` gives it its number."""
    return {
        "question": question,
        "answer": result.answer,
        "confidence": result.confidence,
        "no_answer": result.noAnswerReason is not None,
        "citations": [{"chunkId": c.chunkId, "path": c.path, "title": c.title} for c in result.citations],
        "at": _iso(time.time()),
    }
