"""A source of a knowledge base, its settings per kind, and the record of one sync run.

Settings are validated when a source is created or updated (400 invalid_request then), never
when it syncs: a sync only meets what the source itself holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from citegate.platform.schemas import StrictModel

SourceKind = Literal["folder", "git", "website", "s3"]
# A run is `queued` from the request (the lease taken) until the sync function starts it.
RunStatus = Literal["queued", "running", "succeeded", "failed", "abandoned"]
Trigger = Literal["api", "schedule", "cli"]
# How often a source syncs by itself: every N minutes (at least 5), or never (on demand only).
MIN_SCHEDULE_MINUTES = 5


class Common(StrictModel):
    """What every kind shares: which files, and the metadata their documents get."""

    include: list[str] = Field(default_factory=list, max_length=50)
    exclude: list[str] = Field(default_factory=list, max_length=50)
    # Documents are named <name_prefix><path in the source>; two sources of one knowledge base
    # with the same paths keep apart by their prefixes.
    name_prefix: str = Field("", max_length=200)
    project: str = Field("", max_length=200)
    version: str = Field("", max_length=100)  # git: the ref when not given
    # A document's page URL: base_url + its path in the source, the suffix dropped when
    # strip_suffix (Docusaurus docs/a/b.md -> https://site/docs/a/b); website pages keep their own.
    base_url: str = Field("", max_length=2000)
    strip_suffix: bool = False
    # Where a document sits for spec 000's path scopes: path_prefix + its path in the source.
    path_prefix: str = Field("", max_length=500)
    keep_source_copies: bool = False


class FolderSettings(Common):
    kind: Literal["folder"] = "folder"
    path: str = Field(min_length=1, max_length=4096)


class GitSettings(Common):
    kind: Literal["git"] = "git"
    url: str = Field(min_length=1, max_length=2000)  # https://, ssh, file:// or a local path
    ref: str = Field("HEAD", min_length=1, max_length=200)  # a branch, tag or commit
    subdir: str = Field("", max_length=1000)  # the folder of the repository to follow

    @field_validator("url", "ref")
    @classmethod
    def no_option(cls, value: str) -> str:
        # Handed to `git` as an argument: one that starts with "-" would be read as an option.
        if value.startswith("-") or "\x00" in value or "\n" in value:
            raise ValueError("must not start with '-' or hold control characters")
        return value


class WebsiteSettings(Common):
    kind: Literal["website"] = "website"
    # A sitemap lists the pages; else the crawl starts at start_url and follows links under
    # `prefix` (default: the start URL's folder) on the same site.
    start_url: str = Field("", max_length=2000)
    sitemap_url: str = Field("", max_length=2000)
    prefix: str = Field("", max_length=2000)
    max_pages: int = Field(1000, ge=1, le=20000)
    requests_per_second: float = Field(5.0, gt=0, le=100)


class S3Settings(Common):
    kind: Literal["s3"] = "s3"
    bucket: str = Field(min_length=3, max_length=63)
    prefix: str = Field("", max_length=1024)


SourceSettings = Annotated[
    FolderSettings | GitSettings | WebsiteSettings | S3Settings, Field(discriminator="kind")
]


class CreateSourceRequest(StrictModel):
    name: str = Field(min_length=1, max_length=200)
    settings: SourceSettings
    schedule_minutes: int | None = Field(None, ge=MIN_SCHEDULE_MINUTES, le=7 * 24 * 60)
    enabled: bool = True


class UpdateSourceRequest(StrictModel):
    """PATCH: what is given replaces what was; settings are replaced whole (their kind stays)."""

    name: str | None = Field(None, min_length=1, max_length=200)
    settings: SourceSettings | None = None
    schedule_minutes: int | None = Field(None, ge=MIN_SCHEDULE_MINUTES, le=7 * 24 * 60)
    enabled: bool | None = None
    clear_schedule: bool = False  # schedule_minutes: null cannot be told from "not given"


class RunCounts(BaseModel):
    seen: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    requeued: int = 0  # left queued by a sync that stopped midway, handed to the queue again


class RunFailure(BaseModel):
    name: str
    reason: str


class SyncRun(BaseModel):
    run_id: str
    kb_id: str
    source_id: str
    trigger: Trigger = "api"
    caller: str = ""
    status: RunStatus = "running"
    started_at: str
    finished_at: str | None = None
    duration_ms: float | None = None
    counts: RunCounts = Field(default_factory=RunCounts)
    failures: list[RunFailure] = Field(default_factory=list)  # the first MAX_FAILURES
    error: str | None = None  # why the run as a whole failed
    revision: str = ""  # what was listed: a Git commit
    task_ids: list[str] = Field(default_factory=list)  # the ingestions it started (first 1,000)
    takes_over: str | None = None  # the stopped run this one finishes (recorded as abandoned)
    running_at: str | None = None  # when the sync function took it from the queue


class Source(BaseModel):
    kb_id: str
    source_id: str
    tenant_id: str
    name: str
    kind: SourceKind
    settings: dict[str, Any]
    schedule_minutes: int | None = None
    enabled: bool = True
    created_at: str
    updated_at: str
    created_by: str = ""
    last_run: dict[str, Any] | None = None  # the latest run's id, status, counts and times
    next_sync_at: str | None = None  # when the schedule runs it next

    def typed_settings(self) -> FolderSettings | GitSettings | WebsiteSettings | S3Settings:
        from pydantic import TypeAdapter

        adapter: TypeAdapter[FolderSettings | GitSettings | WebsiteSettings | S3Settings] = TypeAdapter(
            SourceSettings
        )
        return adapter.validate_python(self.settings)

    def public(self) -> dict[str, Any]:
        return self.model_dump()
