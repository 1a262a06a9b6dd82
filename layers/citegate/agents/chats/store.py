"""Chats and their messages in one DynamoDB table, under their owner (resources.CHATS).

Items of one owner share the partition `owner_key` ("<type>:<tenant>:<id>"):
  chat#<chat_id>                                 the chat (title, created, updated, updated_sk)
  msg#<chat_id>#<nanoseconds>#<message_id>       a message, in the order written
  idem#<chat_id>#<sha256 of Idempotency-Key>     a sent message's retry guard
Another owner's chat lives in another partition, so it is simply not found. `updated_sk`
("<updated>#<chat_id>") feeds the sparse `by_updated` index that lists an owner's chats by recency.

Writes are conditional, so a retried request changes nothing twice: a chat created with an
idempotency key has an id derived from it; a message sent with one is guarded by an item written
in the same transaction as the message, and the assistant's reply is attached to the guard once.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

from citegate.agents.chats import ChatNotFound
from citegate.platform.dynamo import (
    cancellation_reasons,
    from_item,
    is_conditional_failure,
    query_all,
    to_item,
    utc_now,
)

CHAT = "chat#"
MESSAGE = "msg#"
GUARD = "idem#"
UPDATED_INDEX = "by_updated"
DEFAULT_TITLE = "New chat"


def new_id(prefix: str, seed: str | None = None) -> str:
    """`chat_<hex>` / `msg_<hex>`: random, or derived from a seed (an idempotency key)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()[:32] if seed is not None else uuid.uuid4().hex
    return f"{prefix}_{digest}"


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def message_sk(chat_id: str, message_id: str) -> str:
    return f"{MESSAGE}{chat_id}#{time.time_ns():020d}#{message_id}"


@dataclass
class TurnStart:
    """What recording a user message found: the stored user message, the guard of a keyed send,
    and the assistant reply when a retried send had already been answered."""

    user: dict[str, Any]
    guard_sk: str | None
    answered: dict[str, Any] | None = None
    retried: bool = False


class ChatStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    # -- chats --------------------------------------------------------------------------------

    def create(
        self, owner_key: str, title: str | None, *, idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """The new chat and True, or (a retry with the same key) the existing chat and False."""
        seed = f"{owner_key}\0{idempotency_key}" if idempotency_key else None
        chat_id = new_id("chat", seed)
        now = utc_now()
        chat = {
            "owner_key": owner_key,
            "sk": CHAT + chat_id,
            "chat_id": chat_id,
            "title": title or DEFAULT_TITLE,
            "auto_title": not title,
            "created": now,
            "updated": now,
            "updated_sk": f"{now}#{chat_id}",
        }
        try:
            self._table.put_item(Item=to_item(chat), ConditionExpression="attribute_not_exists(sk)")
        except Exception as error:
            if not is_conditional_failure(error):
                raise
            existing = self.get(owner_key, chat_id)
            if existing is None:  # deleted between the two calls: the key is spent
                raise ChatNotFound("the chat created with this idempotency key was deleted") from error
            return existing, False
        return chat, True

    def get(self, owner_key: str, chat_id: str) -> dict[str, Any] | None:
        item = self._table.get_item(Key={"owner_key": owner_key, "sk": CHAT + chat_id}, ConsistentRead=True)
        found = item.get("Item")
        return from_item(found) if found else None

    def require(self, owner_key: str, chat_id: str) -> dict[str, Any]:
        chat = self.get(owner_key, chat_id)
        if chat is None:
            raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id})
        return chat

    def list_chats(self, owner_key: str, limit: int = 100) -> list[dict[str, Any]]:
        """The owner's chats, most recently updated first."""
        from boto3.dynamodb.conditions import Key

        page = self._table.query(
            IndexName=UPDATED_INDEX,
            KeyConditionExpression=Key("owner_key").eq(owner_key),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [from_item(item) for item in page.get("Items", [])]

    def rename(self, owner_key: str, chat_id: str, title: str) -> dict[str, Any]:
        now = utc_now()
        try:
            updated = self._table.update_item(
                Key={"owner_key": owner_key, "sk": CHAT + chat_id},
                UpdateExpression="SET title = :t, auto_title = :f, updated = :u, updated_sk = :us",
                ConditionExpression="attribute_exists(sk)",
                ExpressionAttributeValues={":t": title, ":f": False, ":u": now, ":us": f"{now}#{chat_id}"},
                ReturnValues="ALL_NEW",
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id}) from error
            raise
        return dict(from_item(updated["Attributes"]))

    def delete(self, owner_key: str, chat_id: str) -> None:
        """The chat first (it disappears from lists and refuses new messages), then its messages
        and guards in batches."""
        try:
            self._table.delete_item(
                Key={"owner_key": owner_key, "sk": CHAT + chat_id},
                ConditionExpression="attribute_exists(sk)",
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id}) from error
            raise
        keys = [
            {"owner_key": owner_key, "sk": item["sk"]}
            for prefix in (MESSAGE, GUARD)
            for item in self._keys(owner_key, f"{prefix}{chat_id}#")
        ]
        with self._table.batch_writer() as batch:
            for key in keys:
                batch.delete_item(Key=key)

    def _keys(self, owner_key: str, prefix: str) -> list[dict[str, Any]]:
        from boto3.dynamodb.conditions import Key

        return query_all(
            self._table,
            KeyConditionExpression=Key("owner_key").eq(owner_key) & Key("sk").begins_with(prefix),
            ProjectionExpression="sk",
        )

    # -- messages -----------------------------------------------------------------------------

    def messages(self, owner_key: str, chat_id: str) -> list[dict[str, Any]]:
        """Every message of the chat, oldest first."""
        from boto3.dynamodb.conditions import Key

        return query_all(
            self._table,
            KeyConditionExpression=Key("owner_key").eq(owner_key)
            & Key("sk").begins_with(f"{MESSAGE}{chat_id}#"),
            ConsistentRead=True,
        )

    def recent_messages(self, owner_key: str, chat_id: str, limit: int) -> list[dict[str, Any]]:
        """The last `limit` messages, oldest first (history for a new turn)."""
        from boto3.dynamodb.conditions import Key

        page = self._table.query(
            KeyConditionExpression=Key("owner_key").eq(owner_key)
            & Key("sk").begins_with(f"{MESSAGE}{chat_id}#"),
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [from_item(item) for item in reversed(page.get("Items", []))]

    def begin_turn(
        self,
        chat: dict[str, Any],
        user: dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> TurnStart:
        """Store the user's message and move the chat's `updated`, in one transaction that also
        checks the chat still exists. With an idempotency key, a retry stores nothing new and
        finds the earlier message (and its answer, if there is one)."""
        owner_key, chat_id = chat["owner_key"], chat["chat_id"]
        item = {**user, "owner_key": owner_key, "sk": message_sk(chat_id, user["message_id"])}
        guard_sk = f"{GUARD}{chat_id}#{_key_hash(idempotency_key)}" if idempotency_key else None
        now = user["timestamp"]
        actions: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table.name,
                    "Item": to_item(item),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            },
            self._touch(owner_key, chat_id, now),
        ]
        if guard_sk:
            guard = {"owner_key": owner_key, "sk": guard_sk, "user_sk": item["sk"], "created": now}
            actions.insert(
                0,
                {
                    "Put": {
                        "TableName": self._table.name,
                        "Item": guard,
                        "ConditionExpression": "attribute_not_exists(sk)",
                    }
                },
            )
        try:
            self._table.meta.client.transact_write_items(TransactItems=actions)
        except Exception as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            if guard_sk and reasons and reasons[0] == "ConditionalCheckFailed":
                return self._retried(owner_key, chat_id, guard_sk)
            raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id}) from error
        if chat.get("auto_title"):
            self._title_from(owner_key, chat_id, user["content"])
        return TurnStart(item, guard_sk)

    def _retried(self, owner_key: str, chat_id: str, guard_sk: str) -> TurnStart:
        guard = self._table.get_item(Key={"owner_key": owner_key, "sk": guard_sk}, ConsistentRead=True)
        found = from_item(guard.get("Item") or {})
        user = self._item(owner_key, found.get("user_sk"))
        if user is None:
            raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id})
        return TurnStart(user, guard_sk, self._item(owner_key, found.get("assistant_sk")), retried=True)

    def _item(self, owner_key: str, sk: str | None) -> dict[str, Any] | None:
        if not sk:
            return None
        found = self._table.get_item(Key={"owner_key": owner_key, "sk": sk}, ConsistentRead=True).get("Item")
        return from_item(found) if found else None

    def finish_turn(
        self, chat: dict[str, Any], assistant: dict[str, Any], *, guard_sk: str | None = None
    ) -> bool:
        """Store the assistant's message. False when a concurrent retry of the same keyed send
        answered first (this reply is then not kept: the chat holds one answer per message)."""
        owner_key, chat_id = chat["owner_key"], chat["chat_id"]
        item = {**assistant, "owner_key": owner_key, "sk": message_sk(chat_id, assistant["message_id"])}
        actions: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table.name,
                    "Item": to_item(item),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            },
            self._touch(owner_key, chat_id, assistant["timestamp"]),
        ]
        if guard_sk:
            actions.append(
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": {"owner_key": owner_key, "sk": guard_sk},
                        "UpdateExpression": "SET assistant_sk = :a",
                        "ConditionExpression": "attribute_exists(sk) AND attribute_not_exists(assistant_sk)",
                        "ExpressionAttributeValues": {":a": item["sk"]},
                    }
                }
            )
        try:
            self._table.meta.client.transact_write_items(TransactItems=actions)
        except Exception as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            if (
                guard_sk
                and len(reasons) > 2
                and reasons[2] == "ConditionalCheckFailed"
                and reasons[1] == "None"
            ):
                return False
            raise ChatNotFound(f"no chat {chat_id!r}", details={"chat_id": chat_id}) from error
        return True

    def _touch(self, owner_key: str, chat_id: str, now: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self._table.name,
                "Key": {"owner_key": owner_key, "sk": CHAT + chat_id},
                "UpdateExpression": "SET updated = :u, updated_sk = :us",
                "ConditionExpression": "attribute_exists(sk)",
                "ExpressionAttributeValues": {":u": now, ":us": f"{now}#{chat_id}"},
            }
        }

    def _title_from(self, owner_key: str, chat_id: str, content: str) -> None:
        """An untitled chat takes its first message as title (unless renamed meanwhile)."""
        title = " ".join(content.split())
        title = title if len(title) <= 60 else title[:59].rstrip() + "…"
        try:
            self._table.update_item(
                Key={"owner_key": owner_key, "sk": CHAT + chat_id},
                UpdateExpression="SET title = :t, auto_title = :f",
                ConditionExpression="auto_title = :yes",
                ExpressionAttributeValues={":t": title, ":f": False, ":yes": True},
            )
        except Exception as error:
            if not is_conditional_failure(error):
                raise
