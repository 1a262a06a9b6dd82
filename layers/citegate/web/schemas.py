"""Spec 001 section 3.2 / 5.2: web search and web read requests and responses.

Requests ignore unknown fields on purpose: spec 001 passes "other JINA parameters" through, and a
client written for JINA must not be refused for sending one this service does not use.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_URLS = 20


class WebSearchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    query: str = Field(min_length=1, max_length=1000)
    max_results: int = Field(5, ge=1, le=20)
    search_engine: str = Field("google", min_length=1, max_length=40)
    include_content: bool = False
    timeout: float = Field(30, gt=0, le=120)
    locale: str | None = Field(None, max_length=35, pattern=r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
    format: Literal["markdown"] = "markdown"


class WebSearchResultItem(BaseModel):
    rank: int
    title: str
    url: str
    snippet: str
    domain: str
    timestamp: str | None = None


class WebSearchResult(WebSearchResultItem):
    """A result of POST /api/v1/web/search. With `include_content` (spec 001 5.2) it also carries
    its page, read by the same reader as /api/v1/web/read: `content`, `word_count`,
    `token_count`, `cached`, or `content: null` with `error` and `error_code` (spec 001's codes)
    when the page could not be read in time or at all. Without it those fields are never set, and
    the route leaves them out (`model_dump(exclude_unset=True)`)."""

    content: str | None = None
    word_count: int | None = None
    token_count: int | None = None
    cached: bool | None = None
    error: str | None = None
    error_code: str | None = None


class WebSearchResponse(BaseModel):
    query: str
    results: list[WebSearchResult]
    search_engine: str
    total_results: int
    search_time: float


class WebReadRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    urls: str | list[str]
    format: Literal["markdown"] = "markdown"
    timeout: float = Field(30, gt=0, le=120)
    css_selector: str | None = Field(None, max_length=500)
    wait_for_selector: str | None = Field(None, max_length=500)
    exclude_selector: str | None = Field(None, max_length=500)
    bypass_cache: bool = False
    locale: str | None = Field(None, max_length=35, pattern=r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
    max_concurrent: int = Field(3, ge=1, le=10)

    @field_validator("urls")
    @classmethod
    def _some_urls(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_URLS:
            raise ValueError(f"between 1 and {MAX_URLS} URLs are read per request")
        return value

    @property
    def url_list(self) -> list[str]:
        return [self.urls] if isinstance(self.urls, str) else list(self.urls)

    @property
    def single(self) -> bool:
        """One URL as a string: a failure is the response's error (as r.jina.ai answers)."""
        return isinstance(self.urls, str)


class WebReadResult(BaseModel):
    url: str
    status: Literal["success", "error"]
    title: str | None = None
    content: str | None = None
    format: str = "markdown"
    extracted_at: str | None = None
    word_count: int | None = None
    token_count: int | None = None
    cached: bool | None = None
    error: str | None = None
    error_code: str | None = None


class WebReadResponse(BaseModel):
    results: list[WebReadResult]
    total_urls: int
    successful: int
    failed: int
    processing_time: float
