"""What the ingestion workflow passes from step to step: one batch of documents.

The queue consumer starts one execution per SQS batch. Every step takes the batch state and
returns it: the documents still going (`documents`), those that failed on their own (`failed`,
with a readable reason; the others go on), and the step's work data. Work data travels inline
while it is small and as an S3 work file under work/{batch_id}/ when it is not, since a Step
Functions payload is capped at 256 KB.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from citegate.knowledge.embedding.base import Matrix
    from citegate.knowledge.ports import HasBlobs

# Per stash; a state holds at most two (chunks and vectors), well under the 256 KB payload cap.
INLINE_LIMIT_BYTES = 64 * 1024


def batch_id(task_ids: list[str]) -> str:
    """A name for the batch's execution, the same for the same tasks in any order: a redelivered
    batch finds its execution already started (names are unique per state machine)."""
    digest = hashlib.blake2b("\n".join(sorted(set(task_ids))).encode(), digest_size=16).hexdigest()
    return f"b_{digest}"


def work_prefix(batch: str) -> str:
    return f"work/{batch}/"


class DocumentRef(BaseModel):
    task_id: str
    kb_id: str
    document_id: str
    title: str = ""
    parents: int = 0
    children: int = 0


class FailedDocument(BaseModel):
    task_id: str
    kb_id: str
    document_id: str
    error: str


class Stash(BaseModel):
    """Work data: `inline` holds it, or `key` names the S3 work file that does."""

    inline: Any = None
    key: str | None = None


class BatchState(BaseModel):
    batch_id: str
    documents: list[DocumentRef]
    failed: list[FailedDocument] = Field(default_factory=list)
    parsed: Stash | None = None
    chunks: Stash | None = None
    vectors: Stash | None = None
    model_id: str | None = None
    embedded: int = 0
    reused: int = 0
    work_files: bool = False  # whether finalize has S3 work files to remove
    error: dict[str, Any] | None = None  # the Catch's error, for MarkFailed

    def fail(self, document: DocumentRef, reason: str) -> None:
        self.failed.append(
            FailedDocument(
                task_id=document.task_id, kb_id=document.kb_id, document_id=document.document_id, error=reason
            )
        )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def stash_json(s: HasBlobs, state: BatchState, name: str, value: Any) -> Stash:
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(body.encode()) <= INLINE_LIMIT_BYTES:
        return Stash(inline=value)
    key = work_prefix(state.batch_id) + f"{name}.json"
    s.blobs.put(key, body.encode(), "application/json")
    state.work_files = True
    return Stash(key=key)


def unstash_json(s: HasBlobs, stash: Stash | None) -> Any:
    if stash is None:
        raise ValueError("the step's input has no work data")
    return stash.inline if stash.key is None else s.blobs.get_json(stash.key)


def stash_vectors(s: HasBlobs, state: BatchState, vectors: Matrix) -> Stash:
    import numpy as np  # not at import: the consumer loads this module too, and starts cold

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
    data = buffer.getvalue()
    if len(data) * 4 // 3 <= INLINE_LIMIT_BYTES:
        return Stash(inline=base64.b64encode(data).decode())
    key = work_prefix(state.batch_id) + "vectors.npy"
    s.blobs.put(key, data)
    state.work_files = True
    return Stash(key=key)


def unstash_vectors(s: HasBlobs, stash: Stash | None) -> Matrix:
    if stash is None:
        raise ValueError("the step's input has no vectors")
    import numpy as np

    data = base64.b64decode(stash.inline) if stash.key is None else s.blobs.get(stash.key)
    vectors: Matrix = np.load(io.BytesIO(data), allow_pickle=False)
    return vectors
