"""Spec 003's retrieval agent: several `retrieve_knowledge` calls with different keywords.

Two planners share one interface (a stream of rounds, each told what the earlier rounds found):
- With a chat model that can call tools, the model chooses the keywords (temperature 0.3, the
  spec's prompt), up to `max_rounds` rounds.
- On the embedded defaults an offline planner derives variants that really differ:
    1. the question's keywords (question words and particles dropped), for BM25;
    2. the question as asked, for the dense side;
    3. the keywords plus terms that recur in what round 1 found (pseudo-relevance feedback), to
       reach passages that use the documents' own vocabulary.
  A variant identical to an earlier one is skipped. Measured on CMRC 2018 dev in
  benchmarks/query_planner.py: the union finds more gold passages than the question alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from citegate.agents.documents import DocumentManager, tool_result
from citegate.agents.models import ChatModel, ToolCall
from citegate.knowledge.search.analysis import STOPWORDS, tokenize
from citegate.knowledge.search.base import Hit

TOOL_NAME = "retrieve_knowledge"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20

# Question words and function words that make poor search keywords (on top of the index's own
# stopwords, which are deliberately few).
QUESTION_WORDS = frozenset(
    {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "does", "did", "do"}
    | {"can", "could", "should", "would", "was", "were", "has", "have", "had", "about", "tell", "me"}
    | {"please", "explain", "describe", "list", "give", "many", "much", "there", "any", "some", "its"}
    | {"什么", "哪些", "哪个", "哪里", "哪", "如何", "怎么", "怎样", "为什么", "为何", "多少", "几"}
    | {"吗", "呢", "吧", "啊", "有", "有哪些", "是否", "请", "介绍", "一下", "一个", "这个", "那个"}
    | {"我", "你", "他", "她", "它", "们", "我们", "什么样", "主要", "哪些类型", "类型"}
)

RETRIEVE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Search the knowledge base. Returns passages with their source and score.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "search keywords"},
                "top_k": {"type": "integer", "description": "how many passages (default 5)"},
            },
            "required": ["query"],
        },
    },
}

PLANNER_PROMPT = """You find documents in a knowledge base for a question by calling retrieve_knowledge.
- Call retrieve_knowledge several times (2 to 3 calls), each time with different keywords:
  1st call: the main keywords of the question;
  2nd call: related concepts or synonyms;
  3rd call: a narrower sub-topic or application.
- Use short keyword queries in the language of the documents and the question.
- Stop calling the tool when you have enough documents; do not answer the question yourself."""


@dataclass
class Call:
    """One `retrieve_knowledge` call: its arguments, then (once run) its hits or its failure."""

    query: str
    top_k: int = DEFAULT_TOP_K
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        return {"query": self.query, "top_k": self.top_k}

    def result(self) -> dict[str, Any]:
        if self.error is not None:
            return {"success": False, "error": self.error, "results": []}
        return {"success": True, "results": [tool_result(h) for h in self.hits]}


Search = Callable[[str, int], list[Hit]]


def keywords(text: str) -> list[str]:
    """The content words of a question, in order, without duplicates or words inside longer ones."""
    words = [w for w in tokenize(text) if w not in STOPWORDS and w not in QUESTION_WORDS and len(w) > 1]
    distinct = list(dict.fromkeys(words))
    # jieba's search mode also yields the parts of long words ("模型" inside "大模型"): keep the whole.
    return [w for w in distinct if not any(w != other and w in other for other in distinct)]


def feedback_terms(question_terms: list[str], hits: list[Hit], limit: int = 3) -> list[str]:
    """Terms that recur across the best passages of a round but are not in the question."""
    counts: Counter[str] = Counter()
    for hit in hits[:5]:
        seen = set(keywords(hit.chunk.text))
        counts.update(seen)
    asked = set(question_terms)
    candidates = [
        (n, term)
        for term, n in counts.items()
        if n >= 2 and term not in asked and not re.fullmatch(r"\d+", term) and len(term) > 2 - term.isascii()
    ]
    candidates.sort(key=lambda pair: (-pair[0], question_terms.count(pair[1])))
    return [term for _, term in candidates[:limit]]


class OfflinePlanner:
    name = "offline"

    def __init__(self, max_rounds: int = 3, top_k: int = DEFAULT_TOP_K) -> None:
        self.max_rounds = max_rounds
        self.top_k = top_k

    def calls(self, question: str, documents: DocumentManager, run: Callable[[Call], Call]) -> Iterator[Call]:
        terms = keywords(question)
        asked: list[str] = []

        def fresh(query: str) -> bool:
            normal = " ".join(query.lower().split())
            if not normal or normal in asked:
                return False
            asked.append(normal)
            return True

        first_query = " ".join(terms) or question
        first = Call(first_query, self.top_k)
        if fresh(first_query):
            yield run(first)
        plans: list[Callable[[], str]] = [
            lambda: question.strip(),
            lambda: " ".join([*terms[:4], *feedback_terms(terms, first.hits)]),
        ]
        for plan in plans:
            if len(asked) >= self.max_rounds:
                return
            query = plan()
            if fresh(query):
                yield run(Call(query, self.top_k))


class ToolCallingPlanner:
    """The model picks the keywords; every call it makes is run (and shown) as it is made."""

    name = "tool-calling"

    def __init__(self, model: ChatModel, max_rounds: int = 3, top_k: int = DEFAULT_TOP_K) -> None:
        self.model = model
        self.max_rounds = max_rounds
        self.top_k = top_k

    def calls(self, question: str, documents: DocumentManager, run: Callable[[Call], Call]) -> Iterator[Call]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": PLANNER_PROMPT},
            {"role": "user", "content": question},
        ]
        made = 0
        for _ in range(self.max_rounds):
            reply = self.model.complete(messages, tools=[RETRIEVE_TOOL], temperature=0.3)
            wanted = [c for c in reply.tool_calls if c.name == TOOL_NAME][: self.max_rounds - made]
            if not wanted:
                break
            messages.append(_assistant_turn(reply.content, wanted))
            for tool_call in wanted:
                call = run(self._call_from(tool_call, question))
                made += 1
                yield call
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": _for_model(call)})
            if made >= self.max_rounds:
                break
        if made == 0:
            # A model that searched nothing still gets the question's own keywords searched once.
            yield run(Call(" ".join(keywords(question)) or question, self.top_k))

    def _call_from(self, tool_call: ToolCall, question: str) -> Call:
        query = str(tool_call.arguments.get("query") or "").strip() or question
        try:
            top_k = int(tool_call.arguments.get("top_k") or self.top_k)
        except (TypeError, ValueError):
            top_k = self.top_k
        return Call(query[:500], max(1, min(top_k, MAX_TOP_K)))


def _assistant_turn(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in calls
        ],
    }


def _for_model(call: Call) -> str:
    """What the model sees of a tool result: short passages, marked as data."""
    if call.error is not None:
        return json.dumps({"success": False, "error": call.error})
    results = [
        {"source": r["source"], "score": r["score"], "content": r["content"][:400]}
        for r in call.result()["results"]
    ]
    return json.dumps({"success": True, "results": results}, ensure_ascii=False)
