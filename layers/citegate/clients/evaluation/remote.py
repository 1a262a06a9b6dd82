"""A labelled set against a running citegate over HTTP: the service as its users reach it.

Each query of the chosen splits goes through `POST /v1/kb/{kb}/retrieve` (top_k children, at most
the API's 50); the ref ids are mapped to corpus ids (the documents' source names) with batched
`POST /v1/kb/{kb}/resolve_refs`, cached for the run; the children are aggregated to documents
(max, top2) and scored like the in-process harness. With `ask`, the questions of a set that has
answers also go through `POST /v1/kb/{kb}/ask`, scored for honesty. Latency is the client's view
of each call (network and gateway included).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from citegate.clients.evaluation.dataset import Dataset, Query
from citegate.clients.evaluation.metrics import AGGREGATIONS, AnswerCase, evaluate, honesty, latency_summary
from citegate.clients.evaluation.metrics import aggregate as aggregate_children

if TYPE_CHECKING:
    from citegate.clients.http_client import CitegateClient

MAX_TOP_K = (
    50  # citegate.knowledge.schemas.retrieval.MAX_TOP_K, not imported: it would load pydantic for one int
)
RESOLVE_BATCH = 200  # ResolveRefsRequest.ref_ids max_length
RECALL_KS = (5, 10, 50)

Hits = list[tuple[str, float]]  # (corpus id, score), best first


@dataclass(frozen=True)
class RemoteOptions:
    kb: str
    splits: tuple[str, ...] = ("test",)
    top_k: int = MAX_TOP_K
    limit: int | None = None  # the first N queries of each split
    ask: bool = False
    ask_top_k: int = 8  # the ask route's default

    def recall_ks(self) -> tuple[int, ...]:
        # Recall past the depth retrieved would be a copy of the deepest one: name only what was seen.
        return tuple(k for k in RECALL_KS if k <= self.top_k) or (self.top_k,)


@dataclass
class Calls:
    """Client-side latency per call type."""

    samples_ms: dict[str, list[float]] = field(default_factory=dict)

    def post(self, client: CitegateClient, kind: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        # A client that waits out rate limits (the CLI's) counts its waits: they are not latency.
        waited = _waited_s(client)
        started = time.perf_counter()
        result = client.post(path, body)
        elapsed = time.perf_counter() - started - (_waited_s(client) - waited)
        self.samples_ms.setdefault(kind, []).append(elapsed * 1000)
        return result

    def summary(self) -> dict[str, dict[str, Any]]:
        return {
            kind: {"calls": len(samples), **_finite(latency_summary(samples))}
            for kind, samples in self.samples_ms.items()
        }


class RefMap:
    """ref id -> corpus id (the document's source name), resolved in batches and cached."""

    def __init__(self, client: CitegateClient, kb: str, calls: Calls) -> None:
        self._client, self._kb, self._calls = client, kb, calls
        self._source: dict[str, str | None] = {}

    def learn(self, ref_id: str, source_name: str) -> None:
        self._source[ref_id] = source_name

    def resolve(self, ref_ids: Iterable[str]) -> None:
        wanted = [r for r in dict.fromkeys(ref_ids) if r not in self._source]
        for i in range(0, len(wanted), RESOLVE_BATCH):
            batch = wanted[i : i + RESOLVE_BATCH]
            found = self._calls.post(
                self._client, "resolve_refs", f"/v1/kb/{self._kb}/resolve_refs", {"ref_ids": batch}
            )
            for citation in found.get("citations", []):
                self._source[str(citation["ref_id"])] = str(citation["source_name"])
            for ref in found.get("missing", []):
                self._source[str(ref)] = None  # deleted since retrieval: left out of the ranking

    def corpus_id(self, ref_id: str) -> str | None:
        return self._source.get(ref_id)

    @property
    def unresolved(self) -> int:
        return sum(1 for source in self._source.values() if source is None)


@dataclass
class Retrieved:
    """One query's children as returned by the retrieve route."""

    refs: list[tuple[str, float]]  # (ref id, score), best first
    texts: dict[str, str]  # ref id -> chunk text


def selected(dataset: Dataset, options: RemoteOptions) -> dict[str, list[Query]]:
    return {split: dataset.splits[split][: options.limit] for split in options.splits}


def asks(dataset: Dataset, options: RemoteOptions) -> bool:
    """The ask path is scored only where the set says what an answer is (answers or unanswerable)."""
    return options.ask and dataset.has_answers


def run_remote(
    client: CitegateClient,
    dataset: Dataset,
    options: RemoteOptions,
    tick: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The report: retrieval metrics per split and aggregation, honesty with `ask`, latency."""
    started = time.perf_counter()
    calls = Calls()
    refs = RefMap(client, options.kb, calls)
    recall_ks = options.recall_ks()
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "url": client.url,
        "kb": options.kb,
        "top_k": options.top_k,
        "limit": options.limit,
        "metrics": ["ndcg@10", *(f"recall@{k}" for k in recall_ks), "mrr@10"],
        "splits": {},
    }
    fallbacks = 0
    for split, queries in selected(dataset, options).items():
        retrieved: dict[str, Retrieved] = {}
        for q in queries:
            found = calls.post(
                client, "retrieve", f"/v1/kb/{options.kb}/retrieve", {"query": q.text, "top_k": options.top_k}
            )
            results = found.get("results", [])
            # Children rank by the order the service returned them (its fusion's order): `score` is
            # a relevance estimate, not monotone in that order (citegate.knowledge.search.relevance), so the
            # child-to-document aggregation reads 1 / rank ("max" then ranks like `make eval`).
            retrieved[q.id] = Retrieved(
                [(str(r["ref_id"]), 1.0 / rank) for rank, r in enumerate(results, start=1)],
                {str(r["ref_id"]): str(r["chunk_text"]) for r in results},
            )
            # A fallback (BM25 alone when the embedder fails) would score another system: count it.
            fallbacks += len((found.get("stats") or {}).get("fallbacks") or [])
            tick()
        refs.resolve(ref for r in retrieved.values() for ref, _ in r.refs)
        hits = {qid: _documents(r.refs, refs) for qid, r in retrieved.items()}
        scored: dict[str, Any] = {
            "queries": len(queries),
            "retrieval": {
                method: _rounded(
                    evaluate(
                        {qid: aggregate_children(h, method) for qid, h in hits.items()},
                        dataset.qrels,
                        recall_ks,
                    )
                )
                for method in AGGREGATIONS
            },
        }
        if asks(dataset, options):
            cases = [_ask(client, calls, refs, options, q, retrieved[q.id], tick) for q in queries]
            scored["honesty"] = _finite(honesty(cases))
        report["splits"][split] = scored
    if "dev" in report["splits"]:
        dev = report["splits"]["dev"]["retrieval"]
        report["aggregation_chosen_on_dev"] = max(AGGREGATIONS, key=lambda m: dev[m]["ndcg@10"])
    if options.ask and not dataset.has_answers:
        report["ask_skipped"] = "the set has no answers or unanswerable questions to score"
    report["ask_top_k"] = options.ask_top_k if asks(dataset, options) else None
    report["retrieval_fallbacks"] = fallbacks
    report["unresolved_refs"] = refs.unresolved
    report["latency"] = calls.summary()
    report["rate_limit_waits"] = {
        "count": getattr(client, "waits", 0),
        "seconds": round(_waited_s(client), 1),
    }
    report["run"] = {
        "seconds": round(time.perf_counter() - started, 1),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "client_loadavg": loadavg(),
    }
    return report


def _waited_s(client: CitegateClient) -> float:
    return float(getattr(client, "waited_s", 0.0))


def _documents(children: Sequence[tuple[str, float]], refs: RefMap) -> Hits:
    out = []
    for ref, score in children:
        corpus_id = refs.corpus_id(ref)
        if corpus_id is not None:
            out.append((corpus_id, score))
    return out


def _ask(
    client: CitegateClient,
    calls: Calls,
    refs: RefMap,
    options: RemoteOptions,
    q: Query,
    retrieved: Retrieved,
    tick: Callable[[], None],
) -> AnswerCase:
    answer = calls.post(
        client, "ask", f"/v1/kb/{options.kb}/ask", {"question": q.text, "top_k": options.ask_top_k}
    )
    tick()
    citations = answer.get("citations") or []
    for c in citations:
        refs.learn(str(c["ref_id"]), str(c["source_name"]))
    # The cited passage's full text when the retrieve call returned it (same question, deeper
    # top_k), else the citation's snippet (300 characters, so an answer past it is missed).
    cited_texts = tuple(retrieved.texts.get(str(c["ref_id"]), str(c.get("snippet", ""))) for c in citations)
    # The ask response does not list the answerer's evidence: its retrieval is the same search, so
    # the first ask_top_k children of the retrieve call stand for it.
    evidence = {ref for ref, _ in retrieved.refs[: options.ask_top_k]}
    return AnswerCase(
        answers=q.answers,
        impossible=q.impossible,
        gold=q.gold,
        declined=bool(answer.get("no_answer")),
        cited_docs=frozenset(str(c["source_name"]) for c in citations),
        cited_texts=cited_texts,
        evidence_docs=frozenset(d for d in (refs.corpus_id(r) for r in evidence) if d is not None),
    )


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items()}


def _finite(values: Mapping[str, float]) -> dict[str, float | None]:
    """NaN (an empty denominator) becomes null: JSON has no NaN."""
    return {k: None if math.isnan(v) else round(v, 4) for k, v in values.items()}


def loadavg() -> str | None:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return None
