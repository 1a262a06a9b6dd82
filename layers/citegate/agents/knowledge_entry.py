"""Spec 002's governed knowledge entry: one retrieval route for business agents.

The caller agent key identifies the agent; only the knowledge bases and files its policy grants
are searched, and only inside its scope (projects, paths, versions). Statistics questions ("how
many files", "which documents", "knowledge base status") are answered from metadata without
retrieval or model tokens. Spec 002 tells three states apart: an empty knowledge base gets
guidance, not an error (6.2); an unreachable one gets the unavailable error and no web fallback
(6.1); one the caller key is not granted, or that does not exist (the same answer, so existence is
not revealed), is refused: 403 `forbidden`, `details.reason` `dataset_not_allowed`.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from citegate.agents.schemas.knowledge import KnowledgeQuery
from citegate.governance.calls import Authorized, current_call
from citegate.knowledge.retrieval import retrieve
from citegate.platform.errors import DatasetNotAllowed, SearchUnavailableError

if TYPE_CHECKING:
    from citegate.agents.ports import AgentTools
    from citegate.knowledge.schemas.kb import KnowledgeBase

UNAVAILABLE_MESSAGE = (
    "目前無法訪問知識庫，請稍後再試 (the knowledge base is unavailable; please try again later)"
)
EMPTY_GUIDANCE = (
    "知識庫中尚未有任何文件，請先上傳文件 (the knowledge base has no documents yet; upload some first)"
)

# Spec 002 section 7.1's patterns, with English equivalents.
_STATS_PATTERNS = [
    r".*?(?:有多少|有幾個|有几个|幾個|几个).*?(?:文件|檔案|档案)",
    r".*?文件列表",
    r".*?文件統計|.*?文件统计",
    r".*?(?:上傳|上传|向量化).*?(?:哪些|多少)",
    r".*?(?:知識庫|知识库)狀態|.*?(?:知識庫|知识库)状态",
    r".*\bhow many (?:files|documents|docs)\b",
    r".*\b(?:list|which) (?:of )?(?:the )?(?:files|documents)\b",
    r".*\bknowledge base status\b",
]


def is_stats_query(query: str) -> bool:
    text = query.lower().strip()
    return any(re.match(pattern, text) for pattern in _STATS_PATTERNS)


def granted_kbs(s: AgentTools, call: Authorized, requested: list[str] | None) -> list[KnowledgeBase]:
    """The knowledge bases the query reads: all granted ones, or the requested ones, each of which
    must be granted (an unknown one is refused the same way, so existence is not revealed)."""
    if not call.policy.knowledge_bases:
        raise DatasetNotAllowed("no knowledge base is granted to the caller agent key")
    kbs = [kb for kb in s.kbs.list(call.principal.tenant_id) if call.policy.allows_kb(kb.kb_id)]
    if "*" in call.policy.knowledge_bases:  # a wildcard grant covers published knowledge only
        kbs = [kb for kb in kbs if kb.status == "approved" or call.policy.working_docs]
    if requested is not None:
        wanted = list(dict.fromkeys(requested))
        refused = [kb_id for kb_id in wanted if kb_id not in {kb.kb_id for kb in kbs}]
        if refused:
            raise DatasetNotAllowed(
                f"knowledge base(s) not granted to the caller agent key: {', '.join(refused)}",
                details={"knowledge_bases": refused},
            )
        kbs = [kb for kb in kbs if kb.kb_id in wanted]
    return kbs


def _files(s: AgentTools, call: Authorized, kb: KnowledgeBase) -> list[dict[str, Any]]:
    """The knowledge base's files the caller may see: granted files inside its scope."""
    scope = call.search_scope(frozenset({kb.kb_id})).to_filter()
    return [
        {
            "file_id": d.document_id,
            "file_name": d.source_name,
            "status": d.status,
            "chunks": d.counts.children,
        }
        for d in sorted(s.documents.list_in(kb.kb_id, scope), key=lambda d: d.source_name)
    ]


def query_knowledge(s: AgentTools, call: Authorized, request: KnowledgeQuery) -> dict[str, Any]:
    started = time.perf_counter()
    kbs = granted_kbs(s, call, request.knowledge_bases)
    record = current_call()
    record.note(
        query=request.query,
        knowledge_bases=[kb.kb_id for kb in kbs],
        user_id=request.user_id,
        session_id=request.session_id,
        purpose="knowledge_query",
    )

    def elapsed() -> int:
        return round((time.perf_counter() - started) * 1000)

    if is_stats_query(request.query):
        stats: list[dict[str, Any]] = []
        for kb in kbs:
            files = _files(s, call, kb)
            stats.append(
                {
                    "kb_id": kb.kb_id,
                    "name": kb.name,
                    "status": kb.status,
                    "file_count": len(files),
                    "files": files,
                }
            )
        total_files = sum(k["file_count"] for k in stats)
        record.note(result_count=0)
        return {
            "success": True,
            "type": "stats",
            "answer": f"{len(stats)} knowledge base(s), {total_files} file(s) in total.",
            "knowledge_bases": stats,
            "results": [],
            "total": 0,
            "query_time_ms": elapsed(),
        }

    if not kbs or all(not _files(s, call, kb) for kb in kbs):
        record.note(result_count=0)
        return {
            "success": True,
            "type": "empty",
            "guidance": EMPTY_GUIDANCE,
            "results": [],
            "total": 0,
            "query_time_ms": elapsed(),
        }

    scope = call.search_scope(frozenset(kb.kb_id for kb in kbs))
    try:
        found = retrieve(s, scope, request.query, top_k=request.options.top_k)
    except SearchUnavailableError as error:
        raise SearchUnavailableError(UNAVAILABLE_MESSAGE, details={"web_fallback": False}) from error
    results: list[dict[str, Any]] = [
        {
            "content": hit.chunk.text,
            "source": hit.chunk.source_name,
            "score": round(hit.score, 6),
            "metadata": {
                "file_id": hit.chunk.document_id,
                "chunk_id": hit.chunk.ref_id,
                "kb_id": hit.chunk.kb_id,
                "page": hit.chunk.page,
            },
        }
        for hit in found.hits
    ]
    record.note(result_count=len(results), retrieved=[r["metadata"]["chunk_id"] for r in results])
    return {
        "success": True,
        "type": "retrieval",
        "results": results,
        "total": len(results),
        "query_time_ms": elapsed(),
    }
