"""Spec 003's document manager: what the retrieval rounds found, deduplicated, sorted, numbered.

A chunk found by several rounds is kept once, with its best score. After retrieval the documents
are sorted by score (highest first) and numbered from 1; those numbers are the `[n]` markers of
the summary and the `id`s of the references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from citegate.knowledge.search.base import Hit

PREVIEW_CHARS = 100


@dataclass
class Found:
    hit: Hit
    rounds: list[int] = field(default_factory=list)
    index: int = 0

    @property
    def chunk_id(self) -> str:
        return self.hit.chunk.ref_id

    @property
    def score(self) -> float:
        return self.hit.score


def tool_result(hit: Hit) -> dict[str, Any]:
    """One result of `retrieve_knowledge` as spec 003's tool-call-end event shows it."""
    chunk = hit.chunk
    return {
        "content": chunk.text,
        "source": chunk.title or chunk.source_name,
        "score": round(hit.score, 4),
        "chunk_id": chunk.ref_id,
        "doc_id": chunk.document_id,
        "doc_url": chunk.url,
    }


class DocumentManager:
    def __init__(self) -> None:
        self._by_chunk: dict[str, Found] = {}

    def add(self, hits: list[Hit], round_number: int) -> int:
        """Add one round's hits; returns how many were new."""
        new = 0
        for hit in hits:
            found = self._by_chunk.get(hit.chunk.ref_id)
            if found is None:
                self._by_chunk[hit.chunk.ref_id] = Found(hit, [round_number])
                new += 1
                continue
            found.rounds.append(round_number)
            if hit.score > found.hit.score:
                found.hit = hit
        return new

    def __len__(self) -> int:
        return len(self._by_chunk)

    def sorted(self, limit: int | None = None) -> list[Found]:
        """Highest score first, numbered 1..n in that order (ties keep discovery order)."""
        documents = sorted(self._by_chunk.values(), key=lambda f: f.score, reverse=True)[:limit]
        for number, found in enumerate(documents, start=1):
            found.index = number
        return documents

    @staticmethod
    def references(documents: list[Found]) -> list[dict[str, Any]]:
        refs = []
        for found in documents:
            chunk = found.hit.chunk
            ref: dict[str, Any] = {
                "id": found.index,
                "source": chunk.title or chunk.source_name,
                "content_preview": " ".join(chunk.text.split())[:PREVIEW_CHARS],
                "chunk_id": chunk.ref_id,
                "doc_id": chunk.document_id,
                "score": round(found.score, 4),
            }
            if chunk.url:
                ref["doc_url"] = chunk.url
            refs.append(ref)
        return refs
