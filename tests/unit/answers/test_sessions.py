"""Answer sessions (spec 000 section 7) without the stack: limits (past 8 turns or 12000 context
tokens the oldest turns go, their citations stay), turn numbers that never repeat, the owner told
`session_expired` after clean-up, and a follow-up's scope (narrower, never wider)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from botocore.exceptions import ClientError

from citegate.answers.sessions import MAX_TURNS, SessionStore, turn_scope, wire_scope
from citegate.governance.calls import Authorized
from citegate.governance.policy.model import EffectiveScope, Policy, RequestedScope
from citegate.platform.errors import ForbiddenScope, SessionExpired, SessionForbidden
from citegate.platform.principal import Principal

COMPONENT = "publish/system/components/kunora-kgent"


class FakeTable:
    """The part of a DynamoDB table the store uses, with the conditions it writes under."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def get_item(self, Key: dict[str, Any], **_: Any) -> dict[str, Any]:
        found = self.items.get(Key["session_id"])
        return {"Item": copy.deepcopy(found)} if found is not None else {}

    def put_item(self, Item: dict[str, Any], ConditionExpression: str = "", **options: Any) -> None:
        stored = self.items.get(Item["session_id"])
        values = options.get("ExpressionAttributeValues", {})
        holds = {
            "": True,
            "attribute_not_exists(session_id)": stored is None,
            "attribute_exists(session_id) AND turn_count = :previous": stored is not None
            and stored.get("turn_count") == values.get(":previous"),
            "attribute_exists(session_id) AND attribute_not_exists(turn_count)": stored is not None
            and "turn_count" not in stored,
        }[ConditionExpression]
        if not holds:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "PutItem")
        self.items[Item["session_id"]] = copy.deepcopy(Item)


OWNER = Principal(type="agent", id="kunora-coding-agent", tenant_id="t")


def _turn(n: int, answer: str = "short answer") -> dict[str, Any]:
    return {"question": f"q{n}", "answer": answer, "citations": [{"chunkId": f"r_{n}", "path": f"p{n}"}]}


def _session(store: SessionStore, scope: EffectiveScope | None = None, **options: Any) -> dict[str, Any]:
    return store.create(OWNER, scope or EffectiveScope(), **options)[0]


def test_turns_past_the_limit_are_trimmed_oldest_first_keeping_their_citations() -> None:
    store = SessionStore(FakeTable())
    session = _session(store)
    for n in range(1, MAX_TURNS + 3):
        session = store.add_turn(session, _turn(n))
    assert [t["turn"] for t in session["turns"]] == list(range(3, MAX_TURNS + 3))
    assert [c["chunkId"] for c in session["earlier_citations"]] == ["r_1", "r_2"]
    assert session["turn_count"] == MAX_TURNS + 2


def test_turn_numbers_never_repeat_once_old_turns_are_trimmed() -> None:
    store = SessionStore(FakeTable())
    session = _session(store)
    numbers = []
    for n in range(1, 3 * MAX_TURNS):
        session = store.add_turn(session, _turn(n))
        numbers.append(session["turns"][-1]["turn"])
    assert numbers == list(range(1, 3 * MAX_TURNS))  # not 1..8, 9, 9, 9, ...


def test_two_turns_written_at_once_take_two_numbers() -> None:
    table = FakeTable()
    store = SessionStore(table)
    read_by_both = _session(store)
    first = store.add_turn(read_by_both, _turn(1))
    second = store.add_turn(read_by_both, _turn(2))  # from the copy read before the first was written
    assert (first["turn_count"], second["turn_count"]) == (1, 2)
    kept = table.items[read_by_both["session_id"]]
    assert [(t["turn"], t["question"]) for t in kept["turns"]] == [(1, "q1"), (2, "q2")]


def test_a_turn_of_a_session_removed_meanwhile_is_session_expired() -> None:
    table = FakeTable()
    store = SessionStore(table)
    session = _session(store)
    del table.items[session["session_id"]]  # the TTL sweeper, between the turn's read and its write
    with pytest.raises(SessionExpired):
        store.add_turn(session, _turn(1))
    assert session["session_id"] not in table.items  # not brought back


def test_a_context_over_the_token_limit_is_trimmed_too() -> None:
    store = SessionStore(FakeTable())
    session = _session(store)
    for n in range(1, 4):
        session = store.add_turn(session, _turn(n, answer="word " * 5000))  # ~6000 tokens each
    assert len(session["turns"]) == 1 and session["turns"][0]["turn"] == 3
    assert {c["chunkId"] for c in session["earlier_citations"]} == {"r_1", "r_2"}


def test_the_owner_is_told_session_expired_after_the_session_is_cleaned_up() -> None:
    table = FakeTable()
    store = SessionStore(table)
    session, token = store.create(OWNER, EffectiveScope(), ttl_seconds=-1)
    session_id = session["session_id"]
    with pytest.raises(SessionExpired):
        store.open(session_id, token, OWNER)
    del table.items[session_id]  # DynamoDB's TTL: the session, its questions and answers, are gone
    tombstone = table.items[f"{session_id}#tombstone"]
    assert set(tombstone) == {
        "session_id",
        "session_token_hash",
        "owner_hash",
        "expires_at",
        "session_expires_epoch",
        "expires_at_epoch",
    }
    assert tombstone["expires_at_epoch"] > session["expires_at_epoch"] + 24 * 3600
    with pytest.raises(SessionExpired):
        store.open(session_id, token, OWNER)
    # Not the owner, not the token, no token: the same refusal as for an id that never existed.
    stranger = Principal(type="agent", id="someone-else", tenant_id="t")
    never = "s_" + "0" * 32
    refusals = []
    for opened, sent, caller in (
        (session_id, token, stranger),
        (session_id, "wrong", OWNER),
        (session_id, None, OWNER),
        (never, token, OWNER),
    ):
        with pytest.raises(SessionForbidden) as refused:
            store.open(opened, sent, caller)
        refusals.append(refused.value.message)
    assert len(set(refusals)) == 1
    # The tombstone is no session: its key is not a session id.
    with pytest.raises(SessionForbidden):
        store.open(f"{session_id}#tombstone", token, OWNER)


def test_a_session_gone_before_its_expiry_is_not_called_expired() -> None:
    table = FakeTable()
    store = SessionStore(table)
    session, token = store.create(OWNER, EffectiveScope())
    del table.items[session["session_id"]]
    with pytest.raises(SessionForbidden):
        store.open(session["session_id"], token, OWNER)


def _call(policy_scope: dict[str, Any] | None = None, working: bool = False) -> Authorized:
    policy = Policy(
        principal_key="agent:kunora-coding-agent",
        tenant_id="t",
        scope=policy_scope or {},
        working_docs=working,
    )
    return Authorized(OWNER, policy, EffectiveScope(), working_allowed=working)


SESSION_SCOPE = EffectiveScope(
    projects=["kunora-kgent"], path_prefixes=[f"{COMPONENT}/"], versions=["main", "v2"]
).model_dump()


def test_a_follow_up_narrows_its_sessions_scope_for_itself() -> None:
    session = {"scope": SESSION_SCOPE}
    narrowed = turn_scope(session, RequestedScope(paths=[f"{COMPONENT}/ops"], version="v2"), _call())
    assert narrowed.path_prefixes == [f"{COMPONENT}/ops/"] and narrowed.versions == ["v2"]
    assert narrowed.projects == ["kunora-kgent"]  # an axis the turn does not name is inherited
    assert turn_scope(session, None, _call()).model_dump() == SESSION_SCOPE


@pytest.mark.parametrize(
    "requested",
    [
        RequestedScope(paths=["publish"]),
        RequestedScope(paths=[f"{COMPONENT}/../other"]),
        RequestedScope(version="v3"),
        RequestedScope(projects=["kunora-kgent", "other"]),
        RequestedScope(includeWorkingDocs=True),
    ],
)
def test_a_follow_up_never_widens_its_sessions_scope(requested: RequestedScope) -> None:
    with pytest.raises(ForbiddenScope):
        turn_scope({"scope": SESSION_SCOPE}, requested, _call(working=True))


def test_working_docs_are_inherited_unless_the_turn_says_otherwise() -> None:
    session = {"scope": {**SESSION_SCOPE, "include_working_docs": True}}
    assert turn_scope(session, RequestedScope(version="main"), _call(working=True)).include_working_docs
    off = turn_scope(session, RequestedScope(includeWorkingDocs=False), _call(working=True))
    assert not off.include_working_docs


def test_a_scope_the_callers_policy_no_longer_grants_is_refused() -> None:
    session = {"scope": SESSION_SCOPE}
    narrower_policy = _call({"path_prefixes": [f"{COMPONENT}/ops"]})
    with pytest.raises(ForbiddenScope):
        turn_scope(session, None, narrower_policy)
    assert turn_scope(
        session, RequestedScope(paths=[f"{COMPONENT}/ops/x"]), narrower_policy
    ).path_prefixes == [f"{COMPONENT}/ops/x/"]
    with pytest.raises(ForbiddenScope):  # working docs no longer granted
        turn_scope({"scope": {**SESSION_SCOPE, "include_working_docs": True}}, None, _call(working=False))


def test_the_wire_scope_uses_section_4s_names() -> None:
    assert wire_scope(EffectiveScope.model_validate(SESSION_SCOPE)).model_dump() == {
        "projects": ["kunora-kgent"],
        "paths": [COMPONENT],
        "version": None,  # several versions: not pinned
        "includeWorkingDocs": False,
    }
    pinned = EffectiveScope(path_prefixes=[f"{COMPONENT}/"], versions=["main"])
    assert wire_scope(pinned).model_dump() == {
        "projects": None,
        "paths": [COMPONENT],
        "version": "main",
        "includeWorkingDocs": False,
    }
