"""Delayed citation binding: ref ids become displayable citations only when asked for.

A ref id resolves only inside the caller's scope (the knowledge base, and the projects, paths,
versions and files its policy grants); any other ref, known or not, is reported as missing, so
resolve_refs cannot be used to read outside the scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from citegate.errors import SearchUnavailableError
from citegate.models.retrieval import Citation, ResolveRefsResponse
from citegate.observability import logger
from citegate.search.base import ChunkRecord, SearchFilter, SearchUnavailable, chunks_in

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
