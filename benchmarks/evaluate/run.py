"""One evaluation: per embedder and set, ingest, query citegate and the peers, score dev and test.

Tuning choices made here use dev only: the child-to-document aggregation of each system is the
one with the best dev nDCG@10 (eval_retrieval.AGGREGATIONS), then applied unchanged to test.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import eval_retrieval, tune_extractive
from benchmarks.evaluate import metrics as m
from benchmarks.evaluate.ingest import IngestedSet, ingest_corpus
from benchmarks.provenance import git_commit, loadavg

if TYPE_CHECKING:
    from benchmarks.evaluate.peers import Peer

    from citegate.knowledge.embedding.base import Embedder
    from citegate.runtime.stack import LocalStack

SPLITS = ("dev", "test")
ANSWER_SETS = ("squad2_dev", "cmrc2018")  # sets with answer strings: the ask path is scored there
CITEGATE = "citegate"
Hits = list[tuple[str, float]]


@dataclass
class SystemRun:
    """One system's hits and per-query latency on one set, by split."""

    hits: dict[str, dict[str, Hits]] = field(default_factory=dict)  # split -> query id -> hits
    latency_ms: list[float] = field(default_factory=list)
    aggregations: Sequence[str] = m.AGGREGATIONS


def _timed_queries(
    queries: Sequence[tuple[str, str]], search: Callable[[str], Hits], run: SystemRun, split: str
) -> None:
    out: dict[str, Hits] = {}
    for qid, text in queries:
        started = time.perf_counter()
        hits = search(text)
        run.latency_ms.append((time.perf_counter() - started) * 1000)
        out[qid] = hits
    run.hits[split] = out


def score_system(run: SystemRun, qrels: Mapping[str, set[str]]) -> dict[str, Any]:
    """Aggregation chosen on dev, then dev and test metrics with it; latency over every query."""

    def docs(split: str, method: str) -> dict[str, list[str]]:
        return {q: m.aggregate(h, method) for q, h in run.hits[split].items()}

    dev_by_method = {method: m.evaluate(docs("dev", method), qrels) for method in run.aggregations}
    chosen = max(run.aggregations, key=lambda method: dev_by_method[method]["ndcg@10"])
    return {
        "aggregation": chosen,
        "dev": _rounded(dev_by_method[chosen]),
        "test": _rounded(m.evaluate(docs("test", chosen), qrels)),
        "latency": m.latency_summary(run.latency_ms),
    }


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items()}


def _ratios(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, float]:
    """citegate / peer: above 1 is better for quality, below 1 is faster for latency."""
    out = {}
    for split in SPLITS:
        for name in m.METRIC_NAMES:
            out[f"{split}_{name}"] = round(m.ratio(ours[split][name], theirs[split][name]), 3)
    for name in ("p50_ms", "p95_ms"):
        out[f"latency_{name}"] = round(m.ratio(ours["latency"][name], theirs["latency"][name]), 3)
    return out


def ask_cases(
    ingested: IngestedSet, kind: str, queries: Sequence[tune_extractive.Query], latency_ms: list[float]
) -> list[m.AnswerCase]:
    from citegate.answers.ask import ask
    from citegate.knowledge.retrieval import Scope

    scope = Scope(frozenset({ingested.kb_id}))
    doc_of = ingested.doc_of
    services = ingested.by_embedder[kind].services
    cases = []
    for q in queries:
        started = time.perf_counter()
        outcome = ask(services, scope, q.text)  # the route's defaults: top_k 8, 4 parents
        latency_ms.append((time.perf_counter() - started) * 1000)
        # The Answer API's own reporting step first: it may decline an answer left uncited.
        confidence = confidence_for(outcome)
        by_ref = {hit.chunk.ref_id: hit.chunk for hit in outcome.retrieval.hits}
        cited = [by_ref[r] for r in outcome.used_refs]
        cases.append(
            m.AnswerCase(
                answers=q.answers,
                impossible=q.impossible,
                gold=q.gold,
                declined=outcome.no_answer,
                cited_docs=frozenset(doc_of[c.document_id] for c in cited),
                cited_texts=tuple(c.text for c in cited),
                evidence_docs=frozenset(doc_of[h.chunk.document_id] for h in outcome.retrieval.hits),
                confidence=confidence,
            )
        )
    return cases


def confidence_for(outcome: Any) -> str:
    """The confidence the answer API reports for this outcome of `ask` (its own reporting step)."""
    from citegate.answers.answer_api import reported

    return reported(outcome).confidence


@dataclass
class EvalSet:
    name: str
    corpus: list[dict[str, Any]]
    qrels: dict[str, set[str]]
    queries: dict[str, list[tune_extractive.Query]]


def load_set(data: Path, name: str) -> EvalSet:
    dataset = tune_extractive.load(data, name)
    return EvalSet(
        name=name,
        corpus=eval_retrieval.read_jsonl(data / name / "corpus.jsonl"),
        qrels=eval_retrieval.read_qrels(data / name / "qrels.tsv"),
        queries={"dev": dataset.dev, "test": dataset.test},
    )


def ingest_set(
    stack: LocalStack, work: Path, ds: EvalSet, embedders: Mapping[str, Embedder], batch_size: int
) -> IngestedSet:
    print(
        f"\n== {ds.name}: ingesting {len(ds.corpus)} documents through citegate ({', '.join(embedders)})",
        flush=True,
    )
    ingested = ingest_corpus(stack, work, ds.name, embedders, ds.corpus, batch_size)
    print(f"   {ingested.counts}; shared stages {ingested.shared_timings_s}", flush=True)
    for kind, indexed in ingested.by_embedder.items():
        print(f"   {kind}: {indexed.timings_s} (cache {indexed.cache_before})", flush=True)
    return ingested


def evaluate_set(ds: EvalSet, ingested: IngestedSet, kind: str, embedder: Embedder) -> dict[str, Any]:
    """Every system on dev and test of one set with one embedder, and the ask path's honesty."""
    # The peers' packages (dependency group `bench`) are imported only when a set is evaluated.
    from benchmarks.evaluate.peers import langchain_ensemble, rank_bm25

    from citegate.knowledge.retrieval import Scope, retrieve

    started = time.perf_counter()
    set_name, corpus, qrels, queries = ds.name, ds.corpus, ds.qrels, ds.queries
    indexed = ingested.by_embedder[kind]
    print(f"\n== {set_name} ({kind}): querying", flush=True)
    scope = Scope(frozenset({ingested.kb_id}))
    doc_of = ingested.doc_of

    fallbacks: list[str] = []
    fusions: set[str] = set()

    def citegate_search(text: str) -> Hits:
        result = retrieve(indexed.services, scope, text, top_k=eval_retrieval.TOP_K)
        # A fallback (BM25 alone when the embedder fails) would score another system: count it.
        fallbacks.extend(result.stats["fallbacks"])
        fusions.add(json.dumps(result.stats["fusion"], sort_keys=True))
        # Documents rank by citegate's order (the fusion's score); `score` is the relevance estimate.
        return [(doc_of[h.chunk.document_id], _rank_score(h)) for h in result.hits]

    build_started = time.perf_counter()
    peers: list[Peer] = [
        langchain_ensemble(indexed.children, embedder),
        rank_bm25("rank-bm25-children", [(cid, text) for cid, text, _ in indexed.children]),
        rank_bm25(
            "rank-bm25-documents",
            [(str(r["id"]), f"{str(r.get('title') or '').strip()}\n{r['text']}") for r in corpus],
        ),
    ]
    print(f"   peers built in {time.perf_counter() - build_started:.1f} s", flush=True)
    systems: dict[str, tuple[Callable[[str], Hits], Sequence[str]]] = {
        CITEGATE: (citegate_search, m.AGGREGATIONS),
        # LangChain returns an order, not scores: its first child per document ranks the document.
        "langchain-ensemble": (peers[0].search, ("max",)),
        "rank-bm25-children": (peers[1].search, m.AGGREGATIONS),
        "rank-bm25-documents": (peers[2].search, ("max",)),
    }
    # Not one of the timed texts, so no system starts with that query's embedding cached.
    warm_up = f"{queries['dev'][0].text} (warm-up)"
    scored: dict[str, Any] = {}
    for name, (search, aggregations) in systems.items():
        search(warm_up)  # first-call costs (jieba's dictionary, lazy imports) are not per-query latency
        run = SystemRun(aggregations=aggregations)
        for split in SPLITS:
            _timed_queries([(q.id, q.text) for q in queries[split]], search, run, split)
        scored[name] = score_system(run, qrels)
        print(
            f"   {name:<20} dev nDCG@10 {scored[name]['dev']['ndcg@10']:.4f}  "
            f"test {scored[name]['test']['ndcg@10']:.4f}  p95 {scored[name]['latency']['p95_ms']} ms",
            flush=True,
        )
    report: dict[str, Any] = {
        "documents": ingested.counts["documents"],
        "children": ingested.counts["children"],
        "queries": {split: len(queries[split]) for split in SPLITS},
        "embedding_cache_before_run": indexed.cache_before,
        # Submit, parse, chunk and finalize ran once for every embedder of the run.
        "ingest_seconds": ingested.timings_for(kind),
        "ingest_shared_with": sorted(ingested.by_embedder),
        "peer_build_seconds": {p.name: round(p.build_s, 2) for p in peers},
        "systems": scored,
        "citegate_retrieval_fallbacks": len(fallbacks),
        "citegate_fusion": [json.loads(f) for f in sorted(fusions)],
        "ratios_vs": {name: _ratios(scored[CITEGATE], scored[name]) for name in scored if name != CITEGATE},
    }
    if set_name in ANSWER_SETS:
        ask_latency: list[float] = []
        cases = {split: ask_cases(ingested, kind, queries[split], ask_latency) for split in SPLITS}
        report["honesty"] = {
            split: {k: _round_or_nan(v) for k, v in m.honesty(cases[split]).items()} for split in SPLITS
        }
        report["reliability"] = {
            split: {
                level: {k: _round_or_nan(v) for k, v in row.items()}
                for level, row in m.reliability(cases[split]).items()
            }
            for split in SPLITS
        }
        report["ask_latency"] = m.latency_summary(ask_latency)
        for split in SPLITS:
            print(f"   ask {split}: {report['honesty'][split]}", flush=True)
            print(reliability_table(set_name, split, report["reliability"][split]), flush=True)
    report["run"] = {
        "commit": git_commit(),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        # Querying and scoring only; ingestion is in ingest_seconds.
        "seconds": round(time.perf_counter() - started, 1),
        "loadavg_at_end": loadavg(),
    }
    return report


def reliability_table(set_name: str, split: str, rows: Mapping[str, Mapping[str, float | None]]) -> str:
    """The reliability of each confidence level, as printed by `make eval`."""
    lines = [
        f"   reliability, {set_name} {split}: per confidence level, answers, the share citing a gold"
        " passage and citing an accepted answer; unanswerable questions at that level",
        f"     {'level':<9}{'answers':>8}{'cite gold':>11}{'hold answer':>13}{'unanswerable':>16}",
    ]
    for level in ("high", "medium", "low", "declined"):
        row = rows[level]
        declined = level == "declined"
        gold = "-" if declined else _pct(row["cites_gold"])
        held = "-" if declined else _pct(row["holds_answer"])
        unanswerable = f"{int(row['unanswerable'] or 0)} ({_pct(row['unanswerable_share'])})"
        lines.append(f"     {level:<9}{int(row['answered'] or 0):>8}{gold:>11}{held:>13}{unanswerable:>16}")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _rank_score(hit: Any) -> float:
    return float(hit.fused_score if hit.fused_score is not None else hit.score)


def _round_or_nan(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)
