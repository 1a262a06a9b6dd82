"""Does the offline retrieval agent find more than the question alone? (CMRC 2018 dev; prints figures)

Spec 003's retrieval agent searches 2-3 times with different keywords. On the embedded defaults the
offline planner makes the variants (citegate.agents.planner). This benchmark indexes the CMRC 2018
corpus like benchmarks/eval_retrieval.py (real chunker, USE vectors cached in bench-results/cache)
and, for every dev question, compares which gold passages are found by:
    question@k            the question alone, top k (one retrieve_knowledge call)
    planner               the union of the planner's calls, top k each (what /api/v2/query searches)
    question@same_budget  the question alone with as many chunks as the planner's union had
for k in 1, 2, 5. Two measures: the hit rate (a chunk of the gold passage is among the results),
and the number of distinct retrieved chunks that contain an accepted answer.

    uv run --frozen python benchmarks/query_planner.py [--split dev] [--limit 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.eval_retrieval import (
    KB_ID,
    RESULTS,
    _with_vector,
    chunk_corpus,
    embed_cached,
    read_jsonl,
    read_qrels,
)

from citegate.agents.documents import DocumentManager
from citegate.agents.planner import Call, OfflinePlanner
from citegate.container import Services
from citegate.knowledge.embedding import build_embedder
from citegate.knowledge.retrieval import Scope, retrieve
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

DATA = Path(__file__).resolve().parent / "data"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=["dev", "test"])
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 2, 5], help="top_k per call")
    args = parser.parse_args(argv)

    folder = DATA / "cmrc2018"
    corpus = read_jsonl(folder / "corpus.jsonl")
    qrels = read_qrels(folder / "qrels.tsv")
    questions = read_jsonl(folder / f"{args.split}.jsonl")
    if args.limit:
        questions = questions[: args.limit]
    embedder = build_embedder("use", threads=2)
    chunks = chunk_corpus(corpus)
    vectors = embed_cached(
        "cmrc2018", "use", embedder, [r.text for r in chunks.records], [r.ref_id for r in chunks.records]
    )

    per_k: dict[int, dict[str, float]] = {}
    rounds, union_sizes, elapsed = [], [], []
    with tempfile.TemporaryDirectory(prefix="planner-") as tmp:
        index = EmbeddedSearchIndex(Path(tmp), dimension=int(vectors.shape[1]), use_dense_cache=False)
        try:
            index.upsert_documents(
                [
                    (KB_ID, doc, [_with_vector(chunks.records[i], vectors[i]) for i in positions])
                    for doc, positions in chunks.by_doc.items()
                ]
            )
            s = Services(index=index, embedder=embedder)
            scope = Scope(frozenset({KB_ID}))

            def run(call: Call) -> Call:
                call.hits = retrieve(s, scope, call.query, top_k=call.top_k).hits
                return call

            for k in args.k:
                planner = OfflinePlanner(max_rounds=3, top_k=k)
                found = {"question@k": 0, "planner": 0, "question@same_budget": 0}
                answers = {"question@k": 0, "planner": 0, "question@same_budget": 0}
                counted = 0
                for q in questions:
                    gold = qrels.get(q["id"], set())
                    if not gold:
                        continue
                    counted += 1
                    alone = retrieve(s, scope, q["text"], top_k=k).hits
                    started = time.perf_counter()
                    documents = DocumentManager()
                    calls = list(planner.calls(q["text"], documents, run))
                    for number, call in enumerate(calls, start=1):
                        documents.add(call.hits, number)
                    elapsed.append((time.perf_counter() - started) * 1000)
                    union = [f.hit for f in documents.sorted()]
                    same_budget = retrieve(s, scope, q["text"], top_k=max(len(union), k)).hits
                    rounds.append(len(calls))
                    union_sizes.append(len(union))
                    for label, hits in (
                        ("question@k", alone),
                        ("planner", union),
                        ("question@same_budget", same_budget),
                    ):
                        found[label] += bool(gold & {h.chunk.document_id for h in hits})
                        # Distinct retrieved chunks that contain an accepted answer: "retrieves more".
                        answers[label] += sum(
                            any(a and a in h.chunk.text for a in q.get("answers", [])) for h in hits
                        )
                per_k[k] = {
                    **{f"hit_rate/{key}": round(v / counted, 4) for key, v in found.items()},
                    **{
                        f"answer_chunks_per_question/{key}": round(v / counted, 3)
                        for key, v in answers.items()
                    },
                }
                print(f"top_k={k}: {json.dumps(per_k[k], ensure_ascii=False)}", flush=True)
        finally:
            index.close()

    report = {
        "set": f"cmrc2018 {args.split}",
        "questions": len(questions),
        "by_top_k_per_call": per_k,
        "rounds_mean": round(statistics.mean(rounds), 2),
        "union_chunks_mean": round(statistics.mean(union_sizes), 2),
        "planner_ms_p50": round(statistics.median(elapsed), 1),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }
    print(json.dumps(report, ensure_ascii=False, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"query_planner_{args.split}.json").write_text(
        json.dumps(report, ensure_ascii=False, indent=2)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
