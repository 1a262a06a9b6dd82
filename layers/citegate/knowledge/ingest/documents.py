"""What parsing produces and chunking consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PageSpan:
    """Characters [start, end) of the parsed text came from page `page` (1-based) of the source."""

    start: int
    end: int
    page: int


@dataclass(frozen=True)
class ParsedDocument:
    """A source document as Markdown-like text. Headings are `#` lines, whatever the source format;
    a heading line may end with the id the source gives it, `## Memory {#runtime-config-memory}`,
    which chunking uses as the anchor of the chunks under it."""

    text: str
    title: str = ""
    mime_type: str = "text/plain"
    pages: tuple[PageSpan, ...] = ()

    def page_at(self, offset: int) -> int | None:
        for span in self.pages:
            if span.start <= offset < span.end:
                return span.page
        return None


@dataclass(frozen=True)
class ParentChunk:
    """A section-sized block (2000-4000 characters) kept whole for context and citation display."""

    index: int
    text: str
    start: int
    end: int
    heading: str = ""
    heading_path: tuple[str, ...] = ()
    anchor: str = ""
    page: int | None = None


@dataclass(frozen=True)
class ChildChunk:
    """A retrieval-sized piece (about 500 characters, 100 overlap) of exactly one parent."""

    index: int
    parent_index: int
    text: str
    start: int
    end: int
    page: int | None = None
    # The section the child's middle falls in, which can be deeper than its parent's first section
    # (a parent may merge several small sections): lets a citation link to the exact subsection.
    heading: str = ""
    heading_path: tuple[str, ...] = ()
    anchor: str = ""


@dataclass(frozen=True)
class ChunkedDocument:
    parents: tuple[ParentChunk, ...]
    children: tuple[ChildChunk, ...] = field(default=())
