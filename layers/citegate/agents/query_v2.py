"""Spec 003's `/api/v2/query`: the retrieval agent, the document manager, the summary agent.

The events are spec 003's, with exactly its `message_type` codes:
  201 status · 301/302 tool call start/end · 1 content delta · 204 references · 0 end · 22 error.
The knowledge bases searched are those the caller's policy lets it read (anonymous callers get the
public-read policy): approved ones, and working ones too for a caller whose policy grants working
docs (`searchable_kbs`); a failure midway becomes a 22 followed by the 0 that ends the stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from citegate.agents.documents import DocumentManager
from citegate.agents.models import ModelRegistry, ModelSpec
from citegate.agents.planner import TOOL_NAME, Call, OfflinePlanner, ToolCallingPlanner
from citegate.agents.summary import (
    chinese,
    summarize_offline,
    summarize_with_model,
    summary_outcome,
    text_for,
)
from citegate.governance.calls import (
    Authorized,
    charge_tokens,
    current_call,
    estimate_tokens,
    note_answered,
    readable_kbs,
)
from citegate.knowledge.retrieval import Scope, retrieve
from citegate.platform.errors import CitegateError, SearchUnavailableError

if TYPE_CHECKING:
    from citegate.agents.ports import AgentTools
    from citegate.knowledge.schemas.kb import KnowledgeBase

INITIALIZING, TOOL_CALL_START, TOOL_CALL_END, CONTENT, REFERENCES, END, ERROR = 201, 301, 302, 1, 204, 0, 22

Event = dict[str, Any]


def failure_events(code: str, message: str) -> list[Event]:
    """What a client sees when the work fails midway: an error, then the end of the stream."""
    return [{"message_type": ERROR, "content": message}, {"message_type": END}]


def searchable_kbs(s: AgentTools, call: Authorized) -> list[KnowledgeBase]:
    """What spec 003's query and spec 001's chats search: every knowledge base the caller may read.
    Neither spec has spec 000's includeWorkingDocs, so a caller whose policy grants working docs
    (`Authorized.working_allowed`: the service token, an agent granted them, a maintainer) searches
    working knowledge bases as well as approved ones; anyone else (anonymous readers) approved ones."""
    if call.working_allowed and not call.scope.include_working_docs:
        call = replace(call, scope=call.scope.model_copy(update={"include_working_docs": True}))
    return readable_kbs(s, call, include_working=call.working_allowed)


@dataclass
class QueryV2:
    question: str
    top_k: int = 5
    model_id: str | None = None


def run_query(s: AgentTools, call: Authorized, registry: ModelRegistry, request: QueryV2) -> Iterator[Event]:
    """The whole exchange as spec 003 events. Model ids are checked by the caller beforehand."""
    spec = registry.get(request.model_id)
    zh = chinese(request.question)
    record = current_call()
    kbs = searchable_kbs(s, call)
    kb_ids = frozenset(kb.kb_id for kb in kbs)
    record.note(knowledge_bases=sorted(kb_ids), query=request.question)
    scope = call.search_scope(kb_ids)

    yield {
        "message_type": INITIALIZING,
        "content": text_for(zh, "The agents are working...", "双智能体正在工作..."),
    }
    yield {
        "message_type": INITIALIZING,
        "content": text_for(
            zh, "The retrieval agent is looking for documents...", "检索智能体正在查找相关文档..."
        ),
    }
    documents = DocumentManager()
    calls: list[Call] = []
    for call_ in _planner(s, registry, spec, request).calls(
        request.question, documents, lambda c: _run(s, scope, c, documents, len(calls) + 1)
    ):
        calls.append(call_)
        yield {"message_type": TOOL_CALL_START, "tool_name": TOOL_NAME, "arguments": call_.arguments}
        yield {"message_type": TOOL_CALL_END, "tool_name": TOOL_NAME, "result": call_.result()}
    if calls and all(c.error is not None for c in calls):
        raise SearchUnavailableError(
            text_for(zh, "retrieval failed: the search index is unreachable", "检索失败：搜索索引不可用")
        )

    ranked = documents.sorted()
    yield {
        "message_type": INITIALIZING,
        "content": text_for(
            zh,
            f"✅ Found {len(ranked)} documents, writing the summary...",
            f"✅ 已检索到 {len(ranked)} 个文档，准备生成总结...",
        ),
    }
    if spec.offline:
        summary = summarize_offline(s, request.question, ranked)
    else:
        summary = summarize_with_model(
            registry.client(spec, s.settings.llm_timeout_seconds), request.question, ranked
        )
    answer_parts: list[str] = []
    for delta in summary.deltas:
        answer_parts.append(delta)
        yield {"message_type": CONTENT, "content": delta}

    if not spec.offline:
        charge_tokens(s, call.principal, estimate_tokens(request.question, *answer_parts) + 500 * len(calls))
    record.note(
        result_count=len(ranked),
        retrieved=[f.chunk_id for f in ranked],
        cited=[f.chunk_id for f in ranked if f.index in summary.cited],
    )
    note_answered(request.question, kb_ids, summary_outcome(summary, ranked))
    # Spec 003's `doc_manager.get_references()`: every document the retrieval agent found, once,
    # in the numbering of the summary's markers (the count the status line gave), whether or not
    # the summary could use them. The summary was given the first `summary.shown` of them.
    yield {"message_type": REFERENCES, "content": DocumentManager.references(ranked)}
    yield {"message_type": END}


def _planner(s: AgentTools, registry: ModelRegistry, spec: ModelSpec, request: QueryV2) -> Any:
    rounds = s.settings.agent_max_retrieval_rounds
    if spec.offline or not spec.tools:
        return OfflinePlanner(rounds, request.top_k)
    return ToolCallingPlanner(registry.client(spec, s.settings.llm_timeout_seconds), rounds, request.top_k)


def _run(s: AgentTools, scope: Scope, call: Call, documents: DocumentManager, round_number: int) -> Call:
    """One `retrieve_knowledge` call in the caller's scope; a failure is the call's result."""
    if not scope.kb_ids:
        return call  # nothing the caller may read: an empty, successful search
    try:
        call.hits = retrieve(s, scope, call.query, top_k=call.top_k).hits
    except CitegateError as error:
        call.error = error.message
        return call
    documents.add(call.hits, round_number)
    return call
