"""Delayed citation binding: ref ids become displayable citations only when asked for.

A ref id resolves only inside the caller's scope (the knowledge base, and the projects, paths,
versions and files its policy grants); any other ref, known or not, is reported as missing, so
resolve_refs cannot be used to read outside the scope.

One rule makes a citation out of a chunk (`citation_for`), and every path that cites uses it:
`ask`, the Answer API, the agent tools and `resolve_refs` return the same citation for the same
ref. Its `heading` is the chunk's own section (the section its middle sits in, as the chunker
assigns it) and its `snippet` is the text of that section inside the chunk, heading lines left out
(`own_section`). Answerers quote only from that text, so the quoted sentence is in the snippet and
sits in the section the citation names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from citegate.errors import SearchUnavailableError
from citegate.ingest.chunking import iter_headings
from citegate.models.retrieval import Citation, ResolveRefsResponse
from citegate.observability import logger
from citegate.search.base import ChunkRecord, SearchFilter, SearchUnavailable, chunks_in

if TYPE_CHECKING:
    from citegate.container import Services

SNIPPET_CHARS = 300
# A chunk's own section is shown whole up to this length (children are at most ~500 characters), so
# a sentence quoted from it is always inside the citation's snippet.
SECTION_SNIPPET_CHARS = 700


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def own_section(text: str) -> str:
    """The part of a chunk's text in the chunk's own section, without heading lines.

    The chunker gives a child the section its midpoint falls in (headings read by the same
    `iter_headings`, so `#` lines in code fences are no headings); a child can start in the
    section before (overlap, merged small sections) or run into the next one. Only the part under
    the child's own heading is returned: the section the citation names.
    """
    headings = list(iter_headings(text))
    if not headings:
        return text.strip()
    middle = len(text) // 2
    before = [h for h in headings if h.start <= middle]
    if before:
        line_end = text.find("\n", before[-1].start)
        start = len(text) if line_end < 0 else line_end + 1
        later = [h for h in headings if h.start > before[-1].start]
    else:
        start, later = 0, headings
    end = later[0].start if later else len(text)
    return text[start:end].strip()


def _without_headings(text: str) -> str:
    lines = text.splitlines()
    for heading in iter_headings(text):
        row = text.count("\n", 0, heading.start)
        lines[row] = ""
    return "\n".join(lines).strip()


def _snippet_of(text: str) -> str:
    """The chunk's own section without heading lines; a chunk whose own section is empty shows the
    rest of its text, and one of headings only their titles (never `#` marks)."""
    shown = own_section(text) or _without_headings(text)
    if not shown:
        shown = " / ".join(h.text for h in iter_headings(text)) or text
    return snippet(shown, SECTION_SNIPPET_CHARS)


def citation_for(chunk: ChunkRecord) -> Citation:
    return Citation(
        ref_id=chunk.ref_id,
        kb_id=chunk.kb_id,
        source_name=chunk.source_name,
        document_id=chunk.document_id,
        parent_id=chunk.parent_id,
        page_hint=chunk.page,
        snippet=_snippet_of(chunk.text),
        title=chunk.title,
        heading=chunk.heading,
        path=chunk.path,
        url=chunk.url,
        anchor=chunk.anchor,
        project=chunk.project,
        version=chunk.version,
    )


def resolve_refs(s: Services, scope: SearchFilter, ref_ids: Sequence[str]) -> ResolveRefsResponse:
    wanted = list(dict.fromkeys(ref_ids))
    try:
        chunks = chunks_in(s.index, scope, wanted)
    except SearchUnavailable as error:
        logger.warning("search index unreachable", extra={"reason": str(error)})
        raise SearchUnavailableError("the search index is unreachable") from error
    citations = [citation_for(chunks[r]) for r in wanted if r in chunks]
    found = {c.ref_id for c in citations}
    return ResolveRefsResponse(citations=citations, missing=[r for r in wanted if r not in found])
