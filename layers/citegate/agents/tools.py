"""Spec 000's Agent Access tools beyond `ask`: search, get_page, get_context.

They read only what the caller may read (the same knowledge bases and effective scope as the
Answer API) and return passages with citations in the AnswerResult citation shape.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from citegate.answers.answer_api import to_answer_citation
from citegate.governance.calls import Authorized, current_call, estimate_tokens, readable_kbs
from citegate.governance.policy.model import InvalidPath, RequestedScope, normalize_path
from citegate.knowledge.citations import citation_for
from citegate.knowledge.retrieval import retrieve
from citegate.platform.errors import DatasetNotAllowed, ForbiddenScope, InvalidRequest, NotFound

if TYPE_CHECKING:
    from citegate.agents.ports import AgentTools


def _kb_ids(s: AgentTools, call: Authorized) -> frozenset[str]:
    """The knowledge bases the call may read; none is spec 000's `dataset_not_allowed`, never an
    empty result that reads like "nothing matched"."""
    if not call.policy.knowledge_bases:
        raise DatasetNotAllowed("no knowledge base is granted to the caller")
    kbs = readable_kbs(s, call, include_working=call.scope.include_working_docs)
    ids = frozenset(kb.kb_id for kb in kbs)
    current_call().note(knowledge_bases=sorted(ids))
    if not ids:
        raise DatasetNotAllowed(
            "no knowledge base granted to the caller is readable in this scope: only approved ones "
            "are, and working ones when the policy grants working docs and the scope asks for them "
            "(includeWorkingDocs)"
        )
    return ids


def search(s: AgentTools, call: Authorized, query: str, top_k: int) -> dict[str, Any]:
    kb_ids = _kb_ids(s, call)
    found = retrieve(s, call.search_scope(kb_ids), query, top_k=top_k)
    results = [
        {
            "rank": rank,
            "chunkId": hit.chunk.ref_id,
            "text": hit.chunk.text,
            "score": round(hit.score, 6),
            "rankScore": round(hit.fused_score, 6) if hit.fused_score is not None else None,
            "citation": to_answer_citation(citation_for(hit.chunk)).model_dump(),
        }
        for rank, hit in enumerate(found.hits, start=1)
    ]
    current_call().note(query=query, result_count=len(results), retrieved=[r["chunkId"] for r in results])
    return {"results": results, "total": len(results), "stats": found.stats}


# The pages a folder's path names, in this order, when no document has the path itself (spec 000's
# scope names folders, `publish/system/components/kunora-kgent`, whose page is its index).
FOLDER_PAGES = ("index.md", "index.mdx", "README.md")


def page_paths(path: str | None, requested: RequestedScope | None) -> list[str]:
    """The paths a get_page request names, most specific first: `path`, else the one path of the
    request's `scope.paths` (spec 000 section 4's standard request names no `path`). A folder's
    path also names its index page. No `path` and not exactly one scope path is a 400 that says
    which field to send."""
    if path is None:
        paths = (requested.paths if requested is not None else None) or []
        if len(paths) != 1:
            named = f"{len(paths)} paths" if paths else "none"
            raise InvalidRequest(
                "send `path` (the page to read), or a `scope.paths` naming exactly one page; "
                f"scope.paths names {named}",
                details={"field": "path", "scopePaths": list(paths)},
            )
        path = paths[0]
    try:
        wanted = normalize_path(path)
    except InvalidPath as error:
        raise NotFound(f"no page at {path!r}: {error}") from error
    return [wanted, *(f"{wanted}/{name}" for name in FOLDER_PAGES if wanted)]


def get_page(
    s: AgentTools,
    call: Authorized,
    path: str | None,
    version: str | None,
    requested: RequestedScope | None = None,
) -> dict[str, Any]:
    """A document by path (and version), as its sections with headings and anchors.

    The page is `path`, else the one path the request's scope names (`page_paths`: a folder's
    path names its index page). A path or version outside the effective scope (the grant,
    narrowed by the body's `scope`) is `forbidden_scope`: that is decided from the request alone.
    Without `version`, only the scope's versions are candidates (`main` first). Documents are read
    through the caller's scope, so a page of another project, file or knowledge base is simply not
    found."""
    named = page_paths(path, requested)
    wanted = named[0]
    path = path if path is not None else wanted
    scope = call.scope
    if scope.path_prefixes is not None and not any(
        (wanted + "/").startswith(p) or p == "" for p in scope.path_prefixes
    ):
        raise ForbiddenScope(f"the path {path!r} is outside the caller's scope", details={"path": path})
    if version and scope.versions is not None and version not in scope.versions:
        raise ForbiddenScope(
            f"the version {version!r} is outside the caller's scope",
            details={"path": path, "version": version},
        )
    kb_ids = _kb_ids(s, call)
    # The path was checked above as the policy checks paths (a page at a scope path is inside it);
    # the search filter's folder prefixes would leave out a page named by its own path.
    reads = dataclasses.replace(call.search_scope(kb_ids).to_filter(), path_prefixes=None)
    candidates = []
    for kb_id in sorted(kb_ids):
        for document in s.documents.list_in(kb_id, reads):
            meta = document.metadata
            try:
                doc_path = normalize_path(str(meta.get("path") or ""))
            except InvalidPath:
                continue
            doc_version = str(meta.get("version") or "")
            if doc_path in named and (not version or doc_version == version):
                rank = named.index(doc_path)
                candidates.append(
                    (rank, doc_version != "main", doc_version, kb_id, document.document_id, document)
                )
    if not candidates:
        tried = "" if len(named) == 1 else f" (nor {', '.join(repr(n) for n in named[1:])})"
        raise NotFound(
            f"no page at {path!r}{tried}"
            + (f" version {version!r}" if version else "")
            + " in the caller's scope",
            details={"path": path},
        )
    *_, kb_id, _, document = min(candidates, key=lambda c: c[:5])
    meta = document.metadata
    parents = sorted(s.parents.list(kb_id, document.document_id), key=lambda p: int(p.get("index", 0)))
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
    found = normalize_path(str(meta.get("path") or ""))  # the named path, or its folder's index page
    current_call().note(query=f"get_page {found}", result_count=len(sections))
    return {
        "path": found,
        "version": str(meta.get("version") or ""),
        "title": document.title or document.source_name,
        "url": str(meta.get("url") or ""),
        "sourceProject": str(meta.get("project") or ""),
        "kbId": kb_id,
        "documentId": document.document_id,
        "headings": [{"heading": x["heading"], "anchor": x["anchor"]} for x in sections if x["heading"]],
        "sections": sections,
    }


def get_context(s: AgentTools, call: Authorized, task: str, token_budget: int) -> dict[str, Any]:
    """A ContextPack: the most relevant passages with citations that fit the token budget, related
    pages, and what was left out for the budget."""
    kb_ids = _kb_ids(s, call)
    hits = retrieve(s, call.search_scope(kb_ids), task, top_k=30).hits
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
