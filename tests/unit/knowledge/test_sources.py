"""The pure parts of sources (issue 29): names, URLs and metadata, the website's paths and robots,
and the lease's conditional writes (moto in process)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from citegate.knowledge.ingest.selection import SKIPPED_SOURCE_COPY, select_names
from citegate.knowledge.sources.kinds import Entry, page_url
from citegate.knowledge.sources.model import FolderSettings, Source
from citegate.knowledge.sources.ports import Page
from citegate.knowledge.sources.sync import document_metadata
from citegate.knowledge.sources.website import path_in, website_listing


def test_page_urls_and_metadata_come_from_the_settings() -> None:
    settings = FolderSettings(
        path="x",
        project="site",
        version="2.0",
        base_url="https://site.example/docs/",
        strip_suffix=True,
        path_prefix="/docs/",
    )
    assert page_url(settings, "a/b.md") == "https://site.example/docs/a/b"
    assert page_url(settings.model_copy(update={"strip_suffix": False}), "a b.md") == (
        "https://site.example/docs/a%20b.md"
    )
    entry = Entry("a/b.md", read=lambda: b"")
    assert document_metadata(settings, entry, "main") == {
        "project": "site",
        "path": "docs/a/b.md",
        "version": "2.0",  # the configured version wins over the source's (a Git ref)
        "url": "https://site.example/docs/a/b",
    }
    assert document_metadata(FolderSettings(path="x"), entry, "main")["version"] == "main"


def test_select_names_leaves_out_source_copies_and_honours_globs() -> None:
    names = ["index.html", "_sources/index.rst.txt", "guide/a.md", "notes.txt", "api/x.html"]
    taken, skipped = select_names(names, exclude=["api/*"])
    assert taken == ["index.html", "guide/a.md", "notes.txt"]
    assert ("_sources/index.rst.txt", SKIPPED_SOURCE_COPY) in skipped
    assert select_names(names, include=["*.md"])[0] == ["guide/a.md"]


def test_website_paths_stay_under_the_prefix() -> None:
    prefix = "https://docs.example.org/v2/"
    assert path_in(prefix, "https://docs.example.org/v2/") == "index.html"
    assert path_in(prefix, "https://docs.example.org/v2/guide/#top") == "guide/index.html"
    assert path_in(prefix, "https://docs.example.org/v2/a/b.html") == "a/b.html"
    assert path_in(prefix, "https://docs.example.org/v2/intro") == "intro"
    for outside in (
        "https://docs.example.org/v1/a.html",
        "https://other.example.org/v2/a.html",
        "ftp://docs.example.org/v2/a.html",
        "https://docs.example.org/v2/a.html?page=2",
        "https://docs.example.org/v2/logo.png",
    ):
        assert path_in(prefix, outside) is None, outside


class FakeSite:
    """A PageFetcher over a dict of pages, counting requests and honouring If-None-Match."""

    def __init__(self, pages: dict[str, tuple[str, str]], robots: str = "") -> None:
        self.pages = pages  # url -> (etag, html)
        self.robots = robots
        self.requests: list[str] = []

    def __call__(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Page:
        self.requests.append(url)
        if url.endswith("/robots.txt"):
            return Page(url, 200, self.robots.encode(), "text/plain") if self.robots else Page(url, 404)
        if url not in self.pages:
            return Page(url, 404)
        tag, html = self.pages[url]
        if etag == tag:
            return Page(url, 304, etag=tag)
        return Page(url, 200, html.encode(), "text/html; charset=utf-8", etag=tag)


def _html(*links: str) -> str:
    return "<html><body><p>text</p>" + "".join(f'<a href="{x}">x</a>' for x in links) + "</body></html>"


def test_a_crawl_honours_robots_and_asks_conditionally() -> None:
    from citegate.knowledge.sources.model import WebsiteSettings

    base = "https://docs.example.org/v2/"
    site = FakeSite(
        {
            base: ("e0", _html("a.html", "private/p.html", "https://elsewhere.example/")),
            base + "a.html": ("e1", _html("b.html")),
            base + "b.html": ("e2", _html()),
            base + "private/p.html": ("e3", _html()),
        },
        robots="User-agent: *\nDisallow: /v2/private/\n",
    )
    settings = WebsiteSettings(start_url=base, requests_per_second=100)
    listing = website_listing(settings, site, {})
    entries = {e.path: e for e in listing.entries}
    assert set(entries) == {"index.html", "a.html", "b.html"}
    assert ("private/p.html", "disallowed by robots.txt") in listing.skipped
    assert entries["a.html"].revision == "http:e1|" and entries["a.html"].url == base + "a.html"
    # Again, knowing what it holds: every page answers 304, and a page reached only through a 304
    # page (b.html, linked from a.html) is still visited, as a known page.
    known = {path: (e.revision, e.url) for path, e in entries.items()}
    again = {e.path: e for e in website_listing(settings, site, known).entries}
    assert set(again) == set(entries) and all(e.not_modified for e in again.values())
    # A page that is gone (404) is simply not listed.
    del site.pages[base + "b.html"]
    assert {e.path for e in website_listing(settings, site, known).entries} == {"index.html", "a.html"}


def test_the_crawl_stops_at_max_pages() -> None:
    from citegate.knowledge.sources.model import WebsiteSettings

    base = "https://docs.example.org/"
    pages = {base: ("e", _html(*[f"p{i}.html" for i in range(20)]))}
    pages.update({f"{base}p{i}.html": (f"e{i}", _html()) for i in range(20)})
    settings = WebsiteSettings(start_url=base, max_pages=5, requests_per_second=100)
    assert len(list(website_listing(settings, FakeSite(pages), {}).entries)) == 5


@pytest.fixture
def sources_table(moto_in_process: None) -> Any:
    import boto3

    from citegate.knowledge.sources.store import SourceStore

    name = "sources-" + uuid.uuid4().hex[:8]
    dynamodb = boto3.resource("dynamodb", region_name="us-east-1")
    table = dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "kb_id", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "kb_id", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return SourceStore(table)


def test_the_lease_lets_one_run_through_until_it_expires(sources_table: Any) -> None:
    from citegate.knowledge.sources.store import SourceNotFound, SyncInProgress

    store = sources_table
    now = "2026-01-01T00:00:00.000Z"
    store.create(
        Source(
            kb_id="kb",
            source_id="src_1",
            tenant_id="t",
            name="docs",
            kind="folder",
            settings={"kind": "folder", "path": "x"},
            created_at=now,
            updated_at=now,
        )
    )
    store.acquire("kb", "src_1", "run_a", 0.3)
    with pytest.raises(SyncInProgress):
        store.acquire("kb", "src_1", "run_b", 60)
    assert store.renew("kb", "src_1", "run_a", 0.3)
    assert not store.renew("kb", "src_1", "run_b", 60)
    time.sleep(0.4)
    store.acquire("kb", "src_1", "run_b", 60)  # run_a's lease ran out
    assert not store.renew("kb", "src_1", "run_a", 60)  # and run_a knows it lost it
    store.release("kb", "src_1", "run_a", {"status": "failed"})  # not its lease: nothing changes
    with pytest.raises(SyncInProgress):
        store.acquire("kb", "src_1", "run_c", 60)
    store.release("kb", "src_1", "run_b", {"run_id": "run_b", "status": "succeeded"})
    assert store.get("kb", "src_1").last_run == {"run_id": "run_b", "status": "succeeded"}
    store.acquire("kb", "src_1", "run_c", 60)
    with pytest.raises(SourceNotFound):
        store.acquire("kb", "src_missing", "run_d", 60)
