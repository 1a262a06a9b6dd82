"""Session limits: past 8 turns or 12000 context tokens, the oldest turns go, their citations stay."""

from __future__ import annotations

from typing import Any

from citegate.sessions import MAX_TURNS, SessionStore


class FakeTable:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def put_item(self, Item: dict[str, Any], **_: Any) -> None:
        self.items[Item["session_id"]] = Item


def _turn(n: int, answer: str = "short answer") -> dict[str, Any]:
    return {
        "turn": n,
        "question": f"q{n}",
        "answer": answer,
        "citations": [{"chunkId": f"r_{n}", "path": f"p{n}"}],
    }


def test_turns_past_the_limit_are_trimmed_oldest_first_keeping_their_citations() -> None:
    store = SessionStore(FakeTable())
    session: dict[str, Any] = {"session_id": "s", "turns": [], "earlier_citations": []}
    for n in range(1, MAX_TURNS + 3):
        session = store.add_turn(session, _turn(n))
    assert [t["turn"] for t in session["turns"]] == list(range(3, MAX_TURNS + 3))
    assert [c["chunkId"] for c in session["earlier_citations"]] == ["r_1", "r_2"]
    assert session["turn_count"] == MAX_TURNS + 2


def test_a_context_over_the_token_limit_is_trimmed_too() -> None:
    store = SessionStore(FakeTable())
    session: dict[str, Any] = {"session_id": "s", "turns": [], "earlier_citations": []}
    for n in range(1, 4):
        session = store.add_turn(session, _turn(n, answer="word " * 5000))  # ~6000 tokens each
    assert len(session["turns"]) == 1 and session["turns"][0]["turn"] == 3
    assert {c["chunkId"] for c in session["earlier_citations"]} == {"r_1", "r_2"}
