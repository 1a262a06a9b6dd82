"""Answer sessions (spec 000 section 7): multi-turn questions bound to an owner and a token.

The session token is returned once and stored only as a hash; every turn checks the token, the
owner, the scope and `expires_at` (in code: DynamoDB's TTL deletes late). A turn inherits the
session's scope and cannot widen it. Turns beyond `max_turns`, or past `max_context_tokens`, are
trimmed oldest first, keeping a summary of their citations. Earlier turns inform the retrieval of
a follow-up question.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any

from citegate.errors import ForbiddenScope, SessionExpired, SessionForbidden
from citegate.governance import Authorized, estimate_tokens
from citegate.identity.principal import Principal
from citegate.models.answer import AnswerResult
from citegate.policy.model import EffectiveScope, RequestedScope, ScopeGrant, ScopeViolation, effective_scope
from citegate.store.dynamo import from_item, to_item

if TYPE_CHECKING:
    pass

SESSION_TOKEN_HEADER = "X-Session-Token"
MAX_TURNS = 8
MAX_CONTEXT_TOKENS = 12000
SESSION_TTL_SECONDS = 30 * 60


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class SessionStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    def create(
        self, owner: Principal, scope: EffectiveScope, ttl_seconds: int = SESSION_TTL_SECONDS
    ) -> tuple[dict[str, Any], str]:
        token = secrets.token_urlsafe(32)
        now = time.time()
        session = {
            "session_id": "s_" + uuid.uuid4().hex,
            "session_token_hash": _hash(token),
            "owner": {"type": owner.type, "id": owner.id, "tenant_id": owner.tenant_id},
            "scope": scope.model_dump(),
            "turns": [],
            "earlier_citations": [],
            "limits": {"maxTurns": MAX_TURNS, "maxContextTokens": MAX_CONTEXT_TOKENS},
            "created_at": _iso(now),
            "expires_at": _iso(now + ttl_seconds),
            "expires_at_epoch": int(now + ttl_seconds),
        }
        self._table.put_item(Item=to_item(session), ConditionExpression="attribute_not_exists(session_id)")
        return session, token

    def open(self, session_id: str, token: str | None, caller: Principal) -> dict[str, Any]:
        """The session, if the caller owns it and holds its token; refused otherwise."""
        item = self._table.get_item(Key={"session_id": session_id}, ConsistentRead=True).get("Item")
        # An unknown id and someone else's session look the same: ids are not credentials.
        if item is None:
            raise SessionForbidden("no session with this id belongs to the caller")
        session: dict[str, Any] = from_item(item)
        if not token or not hmac.compare_digest(_hash(token), str(session["session_token_hash"])):
            raise SessionForbidden(f"the {SESSION_TOKEN_HEADER} header does not match this session")
        owner = session["owner"]
        if (owner["type"], owner["id"], owner["tenant_id"]) != (caller.type, caller.id, caller.tenant_id):
            raise SessionForbidden("the caller does not own this session")
        if time.time() >= float(session["expires_at_epoch"]):
            raise SessionExpired(f"the session expired at {session['expires_at']}")
        return session

    def add_turn(self, session: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
        turns = [*session["turns"], turn]
        earlier = list(session.get("earlier_citations") or [])
        # Trim oldest turns past the limits, keeping what they cited.
        while len(turns) > MAX_TURNS or (len(turns) > 1 and _tokens(turns) > MAX_CONTEXT_TOKENS):
            dropped = turns.pop(0)
            earlier.extend(c for c in dropped.get("citations", []) if c not in earlier)
        session = {**session, "turns": turns, "earlier_citations": earlier[-50:], "turn_count": turn["turn"]}
        self._table.put_item(Item=to_item(session))
        return session


def _tokens(turns: list[dict[str, Any]]) -> int:
    return sum(estimate_tokens(t.get("question", ""), t.get("answer", "")) for t in turns)


def turn_scope(session: dict[str, Any], requested: RequestedScope | None, call: Authorized) -> None:
    """A turn inherits the session's scope; asking for anything wider is refused."""
    if requested is None:
        return
    stored = EffectiveScope.model_validate(session["scope"])
    grant = ScopeGrant(
        projects=stored.projects,
        path_prefixes=[p.rstrip("/") for p in stored.path_prefixes]
        if stored.path_prefixes is not None
        else None,
        versions=stored.versions,
    )
    try:
        effective_scope(requested, grant, working_docs_allowed=stored.include_working_docs)
    except ScopeViolation as error:
        raise ForbiddenScope(f"a turn cannot widen its session's scope: {error}") from error


def follow_up_query(session: dict[str, Any], question: str) -> str:
    """The retrieval query for a turn: the question, plus what the previous turns asked about."""
    previous = [t["question"] for t in session["turns"][-2:]]
    return " ".join([*previous, question]) if previous else question


def turn_record(number: int, question: str, result: AnswerResult) -> dict[str, Any]:
    return {
        "turn": number,
        "question": question,
        "answer": result.answer,
        "confidence": result.confidence,
        "no_answer": result.noAnswerReason is not None,
        "citations": [{"chunkId": c.chunkId, "path": c.path, "title": c.title} for c in result.citations],
        "at": _iso(time.time()),
    }
