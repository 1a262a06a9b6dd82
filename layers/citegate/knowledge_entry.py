"""Spec 002's governed knowledge entry: one retrieval route for business agents.

The caller agent key identifies the agent; only the knowledge bases and files its policy grants
are searched. Statistics questions ("how many files", "which documents", "knowledge base status")
are answered from metadata without retrieval or model tokens. An empty knowledge base gets
guidance, not an error; an unreachable one gets the unavailable error and no web fallback.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from citegate.errors import SearchUnavailableError
from citegate.governance import Authorized, current_call
from citegate.models.knowledge import KnowledgeQuery
from citegate.retrieval import retrieve

if TYPE_CHECKING:
    from citegate.container import Services
    from citegate.models.kb import KnowledgeBase

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


def granted_kbs(s: Services, call: Authorized, requested: list[str] | None) -> list[KnowledgeBase]:
    kbs = [kb for kb in s.kbs.list(call.principal.tenant_id) if call.policy.allows_kb(kb.kb_id)]
    if "*" in call.policy.knowledge_bases:  # a wildcard grant covers published knowledge only
        kbs = [kb for kb in kbs if kb.status == "approved" or call.policy.working_docs]
    if requested is not None:
        kbs = [kb for kb in kbs if kb.kb_id in requested]
    return kbs


def _files(s: Services, call: Authorized, kb: KnowledgeBase) -> list[dict[str, Any]]:
    granted = call.policy.files.get(kb.kb_id) if call.policy.files is not None else None
    return [
        {
            "file_id": d.document_id,
            "file_name": d.source_name,
            "status": d.status,
            "chunks": d.counts.children,
        }
        for d in sorted(s.documents.list(kb.kb_id), key=lambda d: d.source_name)
        if granted is None or d.source_name in granted
    ]


def query_knowledge(s: Services, call: Authorized, request: KnowledgeQuery) -> dict[str, Any]:
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
