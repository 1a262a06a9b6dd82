"""Spec 000's Agent Access tools beyond `ask`: search, get_page, get_context.

They read only what the caller may read (the same knowledge bases and effective scope as the
Answer API) and return passages with citations in the AnswerResult citation shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from citegate.answer_api import to_answer_citation
from citegate.citations import citation_for
from citegate.errors import NotFound
from citegate.governance import Authorized, current_call, estimate_tokens, readable_kbs
from citegate.policy.model import InvalidPath, normalize_path
from citegate.retrieval import retrieve

if TYPE_CHECKING:
    from citegate.container import Services


def _kb_ids(s: Services, call: Authorized) -> frozenset[str]:
    kbs = readable_kbs(s, call, include_working=call.scope.include_working_docs)
    ids = frozenset(kb.kb_id for kb in kbs)
    current_call().note(knowledge_bases=sorted(ids))
    return ids


def search(s: Services, call: Authorized, query: str, top_k: int) -> dict[str, Any]:
    kb_ids = _kb_ids(s, call)
    if not kb_ids:
        return {"results": [], "total": 0, "stats": {"knowledgeBases": 0}}
    found = retrieve(s, call.search_scope(kb_ids), query, top_k=top_k)
    results = [
        {
            "rank": rank,
            "chunkId": hit.chunk.ref_id,
            "text": hit.chunk.text,
            "score": round(hit.score, 6),
            "citation": to_answer_citation(citation_for(hit.chunk)).model_dump(),
        }
        for rank, hit in enumerate(found.hits, start=1)
    ]
    current_call().note(query=query, result_count=len(results), retrieved=[r["chunkId"] for r in results])
    return {"results": results, "total": len(results), "stats": found.stats}


def get_page(s: Services, call: Authorized, path: str, version: str | None) -> dict[str, Any]:
    """A document by path (and version), as its sections with headings and anchors."""
    try:
        wanted = normalize_path(path)
    except InvalidPath as error:
        raise NotFound(f"no page at {path!r}: {error}") from error
    scope = call.scope
    if scope.path_prefixes is not None and not any(
        (wanted + "/").startswith(p) or p == "" for p in scope.path_prefixes
    ):
        raise NotFound(f"no page at {path!r} in the caller's scope", details={"path": path})
    if version and scope.versions is not None and version not in scope.versions:
        raise NotFound(
            f"no page at {path!r} version {version!r} in the caller's scope", details={"path": path}
        )
    for kb_id in sorted(_kb_ids(s, call)):
        for document in s.documents.list(kb_id):
            meta = document.metadata
            try:
                doc_path = normalize_path(str(meta.get("path") or ""))
            except InvalidPath:
                continue
            if doc_path != wanted or (version and str(meta.get("version") or "") != version):
                continue
            if scope.projects is not None and str(meta.get("project") or "") not in scope.projects:
                continue
            if call.policy.files is not None and document.source_name not in call.policy.files.get(kb_id, []):
                continue
            parents = sorted(
                s.parents.list(kb_id, document.document_id), key=lambda p: int(p.get("index", 0))
            )
            sections = [
                {
                    "heading": p.get("heading") or "",
                    "headingPath": p.get("heading_path") or [],
                    "anchor": p.get("anchor") or "",
                    "page": p.get("page"),
                    "text": p.get("text") or "",
                }
                for p in parents
            ]
            current_call().note(query=f"get_page {wanted}", result_count=len(sections))
            return {
                "path": doc_path,
                "version": str(meta.get("version") or ""),
                "title": document.title or document.source_name,
                "url": str(meta.get("url") or ""),
                "sourceProject": str(meta.get("project") or ""),
                "kbId": kb_id,
                "documentId": document.document_id,
                "headings": [
                    {"heading": x["heading"], "anchor": x["anchor"]} for x in sections if x["heading"]
                ],
                "sections": sections,
            }
    raise NotFound(
        f"no page at {path!r}" + (f" version {version!r}" if version else ""), details={"path": path}
    )


def get_context(s: Services, call: Authorized, task: str, token_budget: int) -> dict[str, Any]:
    """A ContextPack: the most relevant passages with citations that fit the token budget, related
    pages, and what was left out for the budget."""
    kb_ids = _kb_ids(s, call)
    hits = retrieve(s, call.search_scope(kb_ids), task, top_k=30).hits if kb_ids else []
    passages: list[dict[str, Any]] = []
    omitted: list[dict[str, Any]] = []
    used = 0
    for rank, hit in enumerate(hits, start=1):
        tokens = estimate_tokens(hit.chunk.text)
        entry = {"rank": rank, "chunkId": hit.chunk.ref_id, "score": round(hit.score, 6), "tokens": tokens}
        if used + tokens <= token_budget:
            used += tokens
            passages.append(
                {
                    **entry,
                    "text": hit.chunk.text,
                    "citation": to_answer_citation(citation_for(hit.chunk)).model_dump(),
                }
            )
        else:
            omitted.append({**entry, "reason": "token_budget"})
    included_docs = {p["citation"]["path"] or p["chunkId"] for p in passages}
    related: dict[str, dict[str, Any]] = {}
    for hit in hits:
        key = hit.chunk.path or hit.chunk.document_id
        if key not in related:
            related[key] = {
                "path": hit.chunk.path,
                "title": hit.chunk.title or hit.chunk.source_name,
                "url": hit.chunk.url,
                "included": key in included_docs,
            }
    current_call().note(query=task, result_count=len(passages), retrieved=[p["chunkId"] for p in passages])
    return {
        "task": task,
        "tokenBudget": token_budget,
        "tokensUsed": used,
        "passages": passages,
        "relatedPages": list(related.values())[:10],
        "omitted": omitted,
    }
