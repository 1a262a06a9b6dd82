"""ChatStore on an in-process DynamoDB (moto), with the table built from resources.CHATS."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from citegate.agents.chats import ChatNotFound
from citegate.agents.chats.store import DEFAULT_TITLE, ChatStore
from citegate.platform import resources
from citegate.runtime.provision import create_tables

OWNER, OTHER = "human:t1:alice", "human:t1:bob"


@pytest.fixture
def store(moto_in_process: None) -> ChatStore:
    stage = f"unit{uuid.uuid4().hex[:8]}"  # moto is not reset between tests: tables of their own
    create_tables(boto3.client("dynamodb", region_name="us-east-1"), stage)
    table = boto3.resource("dynamodb", region_name="us-east-1").Table(resources.CHATS.physical_name(stage))
    return ChatStore(table)


def user(message_id: str, content: str = "How tall is Zorvath Ridge?") -> dict[str, Any]:
    return {
        "message_id": message_id,
        "type": "user",
        "content": content,
        "timestamp": "2030-01-01T00:00:00.000Z",
    }


def assistant(message_id: str) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "type": "assistant",
        "content": "31 km. [1]",
        "timestamp": "2030-01-01T00:00:01.000Z",
        "sources": [{"score": 0.5}],
    }


def test_chats_belong_to_their_owner(store: ChatStore) -> None:
    chat, created = store.create(OWNER, "Mine")
    assert created and chat["chat_id"].startswith("chat_") and len(chat["chat_id"]) == 37
    assert store.get(OTHER, chat["chat_id"]) is None
    with pytest.raises(ChatNotFound):
        store.require(OTHER, chat["chat_id"])
    with pytest.raises(ChatNotFound):
        store.rename(OTHER, chat["chat_id"], "taken")
    with pytest.raises(ChatNotFound):
        store.delete(OTHER, chat["chat_id"])
    assert store.list_chats(OTHER) == []
    assert store.require(OWNER, chat["chat_id"])["title"] == "Mine"


def test_list_by_recency_and_rename(store: ChatStore) -> None:
    first, _ = store.create(OWNER, "first")
    second, _ = store.create(OWNER, "second")
    assert [c["chat_id"] for c in store.list_chats(OWNER)] == [second["chat_id"], first["chat_id"]]
    renamed = store.rename(OWNER, first["chat_id"], "renamed")
    assert renamed["title"] == "renamed" and renamed["auto_title"] is False
    assert store.list_chats(OWNER)[0]["chat_id"] == first["chat_id"]
    assert len(store.list_chats(OWNER, limit=1)) == 1


def test_a_create_retried_with_its_key_returns_the_same_chat(store: ChatStore) -> None:
    chat, created = store.create(OWNER, None, idempotency_key="k-1")
    again, created_again = store.create(OWNER, None, idempotency_key="k-1")
    assert created and not created_again and again == chat
    others, _ = store.create(OTHER, None, idempotency_key="k-1")
    assert others["chat_id"] != chat["chat_id"], "keys are per owner"
    assert chat["title"] == DEFAULT_TITLE and chat["auto_title"] is True


def test_the_first_message_titles_an_untitled_chat_and_moves_updated(store: ChatStore) -> None:
    chat, _ = store.create(OWNER, None)
    store.begin_turn(
        chat, user("msg_1", "  What is   the height of Zorvath Ridge on Quellar today, in kilometres please?")
    )
    stored = store.require(OWNER, chat["chat_id"])
    assert stored["title"].startswith("What is the height of Zorvath Ridge") and stored["title"].endswith("…")
    assert len(stored["title"]) <= 60 and stored["updated"] == "2030-01-01T00:00:00.000Z"
    store.begin_turn(stored, user("msg_2", "second"))
    assert store.require(OWNER, chat["chat_id"])["title"] == stored["title"], "only the first message"
    titled, _ = store.create(OWNER, "Kept")
    store.begin_turn(titled, user("msg_3"))
    assert store.require(OWNER, titled["chat_id"])["title"] == "Kept"


def test_messages_in_order_and_a_keyed_send_is_stored_once(store: ChatStore) -> None:
    chat, _ = store.create(OWNER, "t")
    start = store.begin_turn(chat, user("msg_u1"), idempotency_key="send-1")
    assert not start.retried and start.answered is None and start.guard_sk
    retry = store.begin_turn(chat, user("msg_u1bis"), idempotency_key="send-1")
    assert retry.retried and retry.user["message_id"] == "msg_u1" and retry.answered is None
    assert store.finish_turn(chat, assistant("msg_a1"), guard_sk=start.guard_sk) is True
    assert store.finish_turn(chat, assistant("msg_a1bis"), guard_sk=start.guard_sk) is False, "one answer"
    answered = store.begin_turn(chat, user("msg_u1ter"), idempotency_key="send-1")
    assert answered.answered is not None and answered.answered["message_id"] == "msg_a1"
    store.begin_turn(chat, user("msg_u2"))
    store.finish_turn(chat, assistant("msg_a2"))
    assert [m["message_id"] for m in store.messages(OWNER, chat["chat_id"])] == [
        "msg_u1",
        "msg_a1",
        "msg_u2",
        "msg_a2",
    ]
    assert [m["message_id"] for m in store.recent_messages(OWNER, chat["chat_id"], 2)] == ["msg_u2", "msg_a2"]
    assert store.messages(OWNER, chat["chat_id"])[1]["sources"] == [{"score": 0.5}]


def test_delete_removes_the_chat_its_messages_and_guards(store: ChatStore) -> None:
    chat, _ = store.create(OWNER, "t")
    kept, _ = store.create(OWNER, "kept")
    for n in range(30):  # more than one batch of 25
        store.begin_turn(chat, user(f"msg_u{n}"), idempotency_key=f"k{n}")
    store.begin_turn(kept, user("msg_k"))
    store.delete(OWNER, chat["chat_id"])
    items = store._table.scan()["Items"]
    assert all(chat["chat_id"] not in item["sk"] for item in items)
    assert {item["sk"].split("#")[0] for item in items} == {"chat", "msg"}, "the other chat is untouched"
    with pytest.raises(ChatNotFound):
        store.begin_turn(chat, user("msg_late"))
    with pytest.raises(ChatNotFound):
        store.finish_turn(chat, assistant("msg_late"))
