"""The chunks of one document as stored: its parents (the sections answers quote as context) and
its children (the pieces retrieval ranks and citations name by ref id). For people who run citegate
to see what a document became (the console's chunk viewer, `GET .../documents/{id}/chunks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from citegate.knowledge.ports import ChunkSources
    from citegate.knowledge.search.base import SearchFilter

# The chunker makes ~500-character children, so this is a document of about 2.5 million characters;
# a larger one is answered in part, with `truncated: true`.
MAX_CHILDREN = 5000

PARENT_FIELDS = ("parent_id", "index", "heading", "heading_path", "anchor", "page", "text")


def document_chunks(s: ChunkSources, kb_id: str, document_id: str, scope: SearchFilter) -> dict[str, Any]:
    """Parents and children of a document inside `scope`; a document outside it is 404
    document_not_found, exactly like a missing one (the same rule as `GET .../documents/{id}`)."""
    record = s.documents.get_in(kb_id, document_id, scope)
    found = s.index.document_chunks(kb_id, document_id, MAX_CHILDREN + 1)
    children = [chunk for chunk in found[:MAX_CHILDREN] if scope.admits(chunk)]
    parents = sorted(s.parents.list(kb_id, document_id), key=lambda p: int(p.get("index", 0)))
    return {
        "kb_id": kb_id,
        "document_id": document_id,
        "source_name": record.source_name,
        "status": record.status,
        "parents": [{name: parent.get(name) for name in PARENT_FIELDS} for parent in parents],
        "children": [
            {
                "ref_id": chunk.ref_id,
                "parent_id": chunk.parent_id,
                "position": chunk.position,
                "page": chunk.page,
                "heading": chunk.heading,
                "anchor": chunk.anchor,
                "text": chunk.text,
            }
            for chunk in children
        ],
        "truncated": len(found) > MAX_CHILDREN,
    }
