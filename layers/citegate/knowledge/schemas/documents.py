"""Document ingestion requests, document records and tasks (spec 004; PRODUCT.md decisions)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from citegate.platform.schemas import MAX_FREE_FORM_DEPTH, StrictModel, nesting_depth

SOURCE_FIELDS = ("text", "base64_file", "s3_key", "file_path")


class DocumentMetadata(BaseModel):
    """Known keys are typed; anything else is kept as given."""

    model_config = {"extra": "allow"}

    project: str = Field("", max_length=200)
    path: str = Field("", max_length=1000)
    version: str = Field("", max_length=100)
    url: str = Field("", max_length=2000)

    @model_validator(mode="after")
    def not_too_deep(self) -> DocumentMetadata:
        # Other keys are kept as given, nested at most MAX_FREE_FORM_DEPTH levels: the stores
        # walk them recursively and DynamoDB refuses items nested more than 32 levels.
        for key, value in (self.model_extra or {}).items():
            if nesting_depth(value) > MAX_FREE_FORM_DEPTH:
                raise ValueError(f"metadata.{key} is nested more than {MAX_FREE_FORM_DEPTH} levels deep")
        return self


class IngestRequest(StrictModel):
    text: str | None = None
    base64_file: str | None = None
    s3_key: str | None = Field(None, max_length=1024)
    file_path: str | None = Field(None, max_length=4096)
    source_name: str | None = Field(None, min_length=1, max_length=512)
    title: str | None = Field(None, max_length=500)
    mime_type: str | None = Field(None, max_length=200)
    metadata: DocumentMetadata = Field(default_factory=DocumentMetadata)

    @field_validator("file_path")
    @classmethod
    def a_path_the_system_can_name(cls, value: str | None) -> str | None:
        # No file system accepts NUL in a name; the OS calls would fail on it, not answer.
        if value is not None and "\x00" in value:
            raise ValueError("file_path must not contain a NUL character")
        return value

    @model_validator(mode="after")
    def exactly_one_source(self) -> IngestRequest:
        given = [name for name in SOURCE_FIELDS if getattr(self, name) is not None]
        if len(given) != 1:
            got = ", ".join(given) or "none"
            raise ValueError(f"give exactly one of {', '.join(SOURCE_FIELDS)} (got {len(given)}: {got})")
        if self.source_name is None and self.file_path is None:
            raise ValueError("source_name is required unless file_path names the source")
        return self

    @property
    def source_field(self) -> str:
        return next(name for name in SOURCE_FIELDS if getattr(self, name) is not None)


class UploadRequest(StrictModel):
    source_name: str = Field(min_length=1, max_length=512)
    mime_type: str | None = Field(None, max_length=200)


class TaskCounts(BaseModel):
    parents: int = 0
    children: int = 0


TaskStatus = Literal["queued", "running", "succeeded", "failed"]


class Task(BaseModel):
    task_id: str
    kb_id: str
    document_id: str | None = None
    kind: Literal["ingest", "reindex"] = "ingest"
    status: TaskStatus
    counts: TaskCounts = Field(default_factory=TaskCounts)
    error: str | None = None
    created_at: str
    updated_at: str
    children: list[str] | None = None  # a reindex task's per-document tasks


class DocumentRecord(BaseModel):
    kb_id: str
    document_id: str
    source_name: str
    title: str = ""
    mime_type: str = ""
    size_bytes: int = 0
    content_sha256: str = ""
    raw_key: str = ""
    # queued until its latest ingestion (task_id) finishes: the task says when it is running.
    # "running" is only read back from records written before the workflow stopped setting it.
    # "deleting": a delete began (DELETE, or a source's sync) and the record goes last.
    status: Literal["queued", "running", "indexed", "failed", "deleting"] = "queued"
    task_id: str = ""
    counts: TaskCounts = Field(default_factory=TaskCounts)
    metadata: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    created_at: str
    updated_at: str
    # A source's documents (citegate.knowledge.sources): which source, and the revision it was read
    # at (an S3 or HTTP ETag, a Git blob id), so an unchanged one is known without reading it.
    source_id: str | None = None
    source_revision: str | None = None
