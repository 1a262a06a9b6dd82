"""Delayed citation binding: ref ids become displayable citations only when asked for.

A ref id resolves only inside the knowledge bases the caller may read; any other ref, known or
not, is reported as missing, so resolve_refs cannot be used to read another knowledge base.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from citegate.errors import SearchUnavailableError
from citegate.models.retrieval import Citation, ResolveRefsResponse
from citegate.search.base import ChunkRecord, SearchUnavailable

if TYPE_CHECKING:
    from citegate.container import Services

SNIPPET_CHARS = 300


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def citation_for(chunk: ChunkRecord) -> Citation:
    return Citation(
        ref_id=chunk.ref_id,
        kb_id=chunk.kb_id,
        source_name=chunk.source_name,
        document_id=chunk.document_id,
        parent_id=chunk.parent_id,
        page_hint=chunk.page,
        snippet=snippet(chunk.text),
        title=chunk.title,
        heading=chunk.heading,
        path=chunk.path,
        url=chunk.url,
        anchor=chunk.anchor,
        project=chunk.project,
        version=chunk.version,
    )


def resolve_refs(s: Services, kb_ids: Iterable[str], ref_ids: Sequence[str]) -> ResolveRefsResponse:
    allowed = set(kb_ids)
    wanted = list(dict.fromkeys(ref_ids))
    try:
        chunks = s.index.get_chunks(wanted)
    except SearchUnavailable as error:
        raise SearchUnavailableError(f"the search index is unreachable: {error}") from error
    citations = [citation_for(chunks[r]) for r in wanted if r in chunks and chunks[r].kb_id in allowed]
    found = {c.ref_id for c in citations}
    return ResolveRefsResponse(citations=citations, missing=[r for r in wanted if r not in found])
