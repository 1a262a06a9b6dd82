"""Spec 001's agent chats: owner-only conversations whose answers cite the knowledge base first.

`store` keeps chats and messages in DynamoDB under their owner; `service` runs a turn (retrieval
over the knowledge bases the caller may read, then the chosen model, then the web where asked for
and allowed) and shapes the replies.
"""

from __future__ import annotations

from citegate.platform.errors import NotFound


class ChatNotFound(NotFound):
    """Spec 001's CHAT_NOT_FOUND: an unknown id and another owner's chat look the same."""

    kind = "chat_not_found"


__all__ = ["ChatNotFound"]
