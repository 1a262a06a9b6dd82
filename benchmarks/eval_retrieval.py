"""Retrieval quality of the real pipeline on the shared evaluation sets (prints figures, asserts nothing).

For each set, every corpus passage becomes one document "# {title}\\n\\n{text}", chunked by the real
chunker; its children are embedded (vectors cached under bench-results/cache/) and indexed in one
EmbeddedSearchIndex knowledge base. Queries go through `citegate.knowledge.retrieval.retrieve` (hybrid, the
fusion tuned for the embedder) with top_k=100 children, which are mapped back to corpus documents:
    max    document score = its best child
    top2   document score = sum of its two best children (rewards several matching children)
The aggregation is chosen on dev and only that one is scored on test (the RULE: tune on dev only).
Metrics (citegate.clients.evaluation.metrics; pytrec_eval is used as a cross-check when importable): nDCG@10,
Recall@5/10/100, MRR@10, binary relevance (qrels score > 0); queries without qrels (SQuAD
unanswerable) are left out of the means.

    .venv/bin/python benchmarks/eval_retrieval.py                       # all sets, USE, dev + test
    .venv/bin/python benchmarks/eval_retrieval.py --sets scifact --split dev --embedder e5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from citegate.clients.evaluation.dataset import passage_document, read_jsonl, read_qrels
from citegate.clients.evaluation.metrics import AGGREGATIONS, METRIC_NAMES, aggregate, evaluate
from citegate.clients.evaluation.metrics import query_metrics as query_metrics  # re-exported for tune_fusion
from citegate.container import Services
from citegate.knowledge.embedding import build_embedder
from citegate.knowledge.embedding.base import Embedder
from citegate.knowledge.ingest.chunking import chunk_document
from citegate.knowledge.ingest.documents import ParsedDocument
from citegate.knowledge.retrieval import Scope, fusion_for, retrieve
from citegate.knowledge.search.base import ChunkRecord, Hit, SearchFilter, SearchMode
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

DATA = Path(__file__).resolve().parent / "data"  # the sets travel with the project (data/README.md)
RESULTS = Path(__file__).resolve().parent.parent / "bench-results"
SETS = ("scifact", "cmrc2018", "squad2_dev")
KB_ID = "eval"
TOP_K = 100
EMBED_BATCH = 512
# query id -> child hits (document_id, score), best first
Run = dict[str, list[tuple[str, float]]]


# --------------------------------------------------------------------------------------------------
# Data


@dataclass
class Chunks:
    records: list[ChunkRecord]  # without vectors
    by_doc: dict[str, list[int]]  # corpus id -> positions in `records`


def chunk_corpus(corpus: list[dict[str, Any]]) -> Chunks:
    records: list[ChunkRecord] = []
    by_doc: dict[str, list[int]] = {}
    for row in corpus:
        doc_id, title = str(row["id"]), str(row.get("title") or "").strip()
        text = passage_document(title, str(row["text"]))
        chunked = chunk_document(ParsedDocument(text=text, title=title, mime_type="text/markdown"))
        for child in chunked.children:
            by_doc.setdefault(doc_id, []).append(len(records))
            # Like ingest.steps.index: every child carries the document title (a BM25 field).
            records.append(
                ChunkRecord(
                    ref_id=f"{doc_id}:{child.index}",
                    kb_id=KB_ID,
                    tenant_id="eval",
                    document_id=doc_id,
                    parent_id=f"{doc_id}:p{child.parent_index}",
                    source_name=doc_id,
                    text=child.text,
                    position=child.index,
                    title=title,
                    anchor=child.anchor,
                    heading=child.heading,
                )
            )
    return Chunks(records, by_doc)


def embed_cached(name: str, kind: str, embedder: Embedder, texts: list[str], ids: list[str]) -> np.ndarray:
    """Vectors for `texts`, from bench-results/cache when the ids and texts are unchanged."""
    cache = RESULTS / "cache"
    vec_path, meta_path = cache / f"{name}-{kind}.npy", cache / f"{name}-{kind}.json"
    # The digest catches a chunker change that keeps the same ref_ids but moves the cut points.
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    if vec_path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("ids") == ids and meta.get("texts_sha256") == digest:
            vectors: np.ndarray = np.asarray(np.load(vec_path, allow_pickle=False), dtype=np.float32)
            print(f"  [{name}] embedding cache used: {vec_path} ({len(ids)} vectors)", flush=True)
            return vectors
        print(f"  [{name}] embedding cache stale (chunks changed): re-embedding", flush=True)
    else:
        print(f"  [{name}] no embedding cache: embedding {len(texts)} children", flush=True)
    started = time.perf_counter()
    parts = []
    for i in range(0, len(texts), EMBED_BATCH):
        parts.append(np.asarray(embedder.embed_documents(texts[i : i + EMBED_BATCH]), dtype=np.float32))
        done = min(i + EMBED_BATCH, len(texts))
        rate = done / (time.perf_counter() - started)
        print(f"    {done}/{len(texts)} ({rate:.0f}/s)", flush=True)
    vectors = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
    elapsed = time.perf_counter() - started
    print(f"  [{name}] embedded {len(texts)} children in {elapsed:.1f} s", flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(vec_path, vectors, allow_pickle=False)
    meta_path.write_text(json.dumps({"ids": ids, "texts_sha256": digest, "embed_seconds": elapsed}))
    return vectors


# --------------------------------------------------------------------------------------------------
# Runs


def hybrid_run(services: Services, queries: list[dict[str, Any]]) -> Run:
    scope = Scope(frozenset({KB_ID}))
    run: Run = {}
    for q in queries:
        result = retrieve(services, scope, q["text"], top_k=TOP_K)
        if result.stats["fallbacks"]:
            raise RuntimeError(f"retrieval fell back for query {q['id']}: {result.stats['fallbacks']}")
        run[q["id"]] = _pairs(result.hits)
    return run


def single_side_run(
    index: EmbeddedSearchIndex, embedder: Embedder, queries: list[dict[str, Any]], mode: SearchMode
) -> Run:
    flt = SearchFilter(kb_ids=frozenset({KB_ID}))
    run: Run = {}
    for q in queries:
        vector = embedder.embed_query(q["text"]) if mode == "dense" else None
        result = index.search(query=q["text"], vector=vector, filter=flt, limit=TOP_K, mode=mode)
        run[q["id"]] = _pairs(result.hits)
    return run


def _pairs(hits: Sequence[Hit]) -> list[tuple[str, float]]:
    return [(h.chunk.document_id, h.score) for h in hits]


def score_runs(
    runs: Mapping[str, Run],
    qrels: Mapping[str, set[str]],
    methods: Sequence[str],
) -> dict[str, dict[str, float]]:
    out = {}
    for label, run in runs.items():
        for method in methods:
            docs = {q: aggregate(hits, method) for q, hits in run.items()}
            out[f"{label}/{method}"] = evaluate(docs, qrels)
    return out


def cross_check(docs: Mapping[str, list[str]], qrels: Mapping[str, set[str]], ours: dict[str, float]) -> None:
    try:
        import pytrec_eval
    except ImportError:
        return
    judged = {q: {d: 1 for d in qrels[q]} for q in docs if qrels.get(q)}
    run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in docs.items() if q in judged}
    measures = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(run)
    theirs = sum(m["ndcg_cut_10"] for m in measures.values()) / max(1, len(measures))
    print(f"    pytrec_eval nDCG@10 {theirs:.4f} vs ours {ours['ndcg@10']:.4f}")


def print_table(title: str, rows: Mapping[str, Mapping[str, float]]) -> None:
    print(f"\n{title}")
    header = f"  {'system':<22}" + "".join(f"{m:>11}" for m in METRIC_NAMES) + f"{'queries':>9}"
    print(header)
    for label, metrics in rows.items():
        cells = "".join(f"{metrics[m]:>11.4f}" for m in METRIC_NAMES)
        print(f"  {label:<22}{cells}{int(metrics['queries']):>9}")


def evaluate_set(name: str, kind: str, embedder: Embedder, splits: Sequence[str]) -> dict[str, Any]:
    folder = DATA / name
    corpus = read_jsonl(folder / "corpus.jsonl")
    qrels = read_qrels(folder / "qrels.tsv")
    started = time.perf_counter()
    chunks = chunk_corpus(corpus)
    chunk_s = time.perf_counter() - started
    print(f"\n== {name}: {len(corpus)} documents -> {len(chunks.records)} children ({chunk_s:.1f} s)")
    ids = [r.ref_id for r in chunks.records]
    started = time.perf_counter()
    vectors = embed_cached(name, kind, embedder, [r.text for r in chunks.records], ids)
    embed_s = time.perf_counter() - started
    report: dict[str, Any] = {
        "documents": len(corpus),
        "children": len(chunks.records),
        "embed_or_load_seconds": round(embed_s, 1),
        # what retrieve() uses for this embedder (CITEGATE_FUSION_LEXICAL_WEIGHT left unset)
        "fusion": vars(fusion_for(embedder.model_id)),
        "top_k_children": TOP_K,
    }
    with tempfile.TemporaryDirectory(prefix=f"eval-{name}-") as tmp:
        index = EmbeddedSearchIndex(Path(tmp), dimension=int(vectors.shape[1]), use_dense_cache=False)
        try:
            started = time.perf_counter()
            batch = [
                (KB_ID, doc, [_with_vector(chunks.records[i], vectors[i]) for i in positions])
                for doc, positions in chunks.by_doc.items()
            ]
            index.upsert_documents(batch)
            report["index_seconds"] = round(time.perf_counter() - started, 1)
            print(f"  indexed in {report['index_seconds']} s")
            services = Services(index=index, embedder=embedder)
            queries = {split: read_jsonl(folder / f"{split}.jsonl") for split in ("dev", "test")}

            # Choose the aggregation on dev (computed even for --split test so the choice never sees test).
            started = time.perf_counter()
            dev_runs: dict[str, Run] = {"hybrid": hybrid_run(services, queries["dev"])}
            report["dev_query_ms"] = round((time.perf_counter() - started) * 1000 / len(queries["dev"]), 2)
            if name == "scifact":
                # Each side alone, so the fusion's value is visible.
                for mode in ("lexical", "dense"):
                    dev_runs[mode] = single_side_run(index, embedder, queries["dev"], mode)
            dev_rows = score_runs(dev_runs, qrels, AGGREGATIONS)
            chosen = max(AGGREGATIONS, key=lambda m: dev_rows[f"hybrid/{m}"]["ndcg@10"])
            report["aggregation_chosen_on_dev"] = chosen
            if "dev" in splits:
                report["dev"] = dev_rows
                print_table(f"{name} dev ({kind}; aggregation chosen on dev: {chosen})", dev_rows)
                docs = {q: aggregate(h, chosen) for q, h in dev_runs["hybrid"].items()}
                cross_check(docs, qrels, dev_rows[f"hybrid/{chosen}"])
            if "test" in splits:
                test_run = {"hybrid": hybrid_run(services, queries["test"])}
                test_rows = score_runs(test_run, qrels, [chosen])
                report["test"] = test_rows
                print_table(f"{name} test ({kind}; aggregation {chosen}, fixed on dev)", test_rows)
        finally:
            index.close()
    return report


def _with_vector(record: ChunkRecord, vector: np.ndarray) -> ChunkRecord:
    return replace(record, vector=np.asarray(vector, dtype=np.float32))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--embedder", choices=("use", "e5"), default="use")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument("--out", type=Path, default=RESULTS / "eval.json")
    args = parser.parse_args(argv)
    splits = ("dev", "test") if args.split == "both" else (args.split,)

    embedder = build_embedder(args.embedder)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for name in args.sets:
        results[name] = evaluate_set(name, args.embedder, embedder, splits)
    total = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Merge into an existing file so runs per set or embedder accumulate instead of overwriting.
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
    existing[args.embedder] = {**existing.get(args.embedder, {}), **results}
    args.out.write_text(json.dumps(existing, indent=2, sort_keys=True))
    print(f"\nwrote {args.out} ({total} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
