"""Fit the relevance model behind `score` (citegate.knowledge.search.relevance) on the dev splits, and pick
the default score threshold; test is only scored with what dev chose.

For each set and embedder the real chunker, the cached child vectors (bench-results/cache, shared
with eval_retrieval and `make eval`) and an EmbeddedSearchIndex are used; every dev query is
searched as `retrieve` does (hybrid, top 100 children, pool 200). Each hit gives one row:
features (the cosine retrieve() reads, and citegate.knowledge.search.relevance.coverage) and a label (its
document is a gold passage). SQuAD 2.0's unanswerable questions give rows too, all labelled 0:
they are the "no relevant document" case a threshold must filter.

The logistic models (with and without the cosine) are fitted by Newton's method on the pooled dev
rows of the three sets, each set weighted equally, and printed as the Python literal to paste into
citegate/knowledge/search/relevance.py. Then nDCG@10 of the engine's order beside an order by the estimate
(why the engine's order is kept), and a threshold table on dev: gold hits kept and other hits
dropped among the top 10 of answerable queries, answerable queries left with a gold hit,
unanswerable queries left with nothing; the default threshold maximises gold kept + others dropped.

    .venv/bin/python benchmarks/tune_relevance.py                  # USE
    .venv/bin/python benchmarks/tune_relevance.py --embedder e5
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_retrieval import DATA, KB_ID, RESULTS, _with_vector, chunk_corpus, embed_cached

from citegate.clients.evaluation.dataset import load_dataset
from citegate.clients.evaluation.metrics import aggregate, evaluate
from citegate.knowledge.embedding import build_embedder
from citegate.knowledge.retrieval import candidate_pool, fusion_for
from citegate.knowledge.search import relevance
from citegate.knowledge.search.base import SearchFilter
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

SETS = ("scifact", "cmrc2018", "squad2_dev")
TOP_K = 100
KINDS = {"use": "use-multilingual-v3", "e5": "multilingual-e5-small"}


def collect(name: str, kind: str, embedder: Any) -> dict[str, Any]:
    """Rows of every dev and test query's top 100 hits: features, label, query id, engine rank."""
    ds = load_dataset(DATA / name)
    corpus = [{"id": i, "title": t, "text": x} for i, (t, x) in ds.passages.items()]
    chunks = chunk_corpus(corpus)
    vectors = embed_cached(
        name, kind, embedder, [r.text for r in chunks.records], [r.ref_id for r in chunks.records]
    )
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"relevance-{name}-") as tmp:
        index = EmbeddedSearchIndex(Path(tmp), dimension=int(vectors.shape[1]), use_dense_cache=False)
        try:
            index.upsert_documents(
                [
                    (KB_ID, doc, [_with_vector(chunks.records[i], vectors[i]) for i in positions])
                    for doc, positions in chunks.by_doc.items()
                ]
            )
            flt = SearchFilter(kb_ids=frozenset({KB_ID}))
            fusion = fusion_for(embedder.model_id)
            for split, queries in ds.splits.items():
                rows: list[list[float]] = []
                meta: list[tuple[str, int, int, str, float]] = []
                for q in queries:
                    vector = embedder.embed_query(q.text)
                    result = index.search(
                        query=q.text,
                        vector=vector,
                        filter=flt,
                        limit=TOP_K,
                        mode="hybrid",
                        fusion=fusion,
                        candidates=candidate_pool(TOP_K, False),
                    )
                    terms = relevance.query_terms(q.text)
                    floor = result.stats.get("dense_floor")
                    for rank, hit in enumerate(result.hits):
                        # what retrieve() reads: the dense side's floor for a hit it did not return
                        cosine = hit.dense_score if hit.dense_score is not None else floor
                        rows.append(
                            [np.nan if cosine is None else cosine, relevance.coverage(terms, hit.chunk)]
                        )
                        meta.append(
                            (
                                q.id,
                                rank,
                                int(hit.chunk.document_id in q.gold),
                                hit.chunk.document_id,
                                hit.score,
                            )
                        )
                out[split] = {"rows": np.asarray(rows, dtype=np.float64), "meta": meta, "queries": queries}
        finally:
            index.close()
    out["qrels"] = ds.qrels
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Weighted logistic regression by Newton's method; returns [bias, coefficients...]."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-(design @ beta)))
        grad = design.T @ (w * (p - y)) + l2 * np.r_[0, beta[1:]]
        hess = (design * (w * p * (1 - p))[:, None]).T @ design + l2 * np.diag(
            np.r_[0, np.ones(len(beta) - 1)]
        )
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", choices=sorted(KINDS), default="use")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--reuse", action="store_true", help="refit from the rows of the last run")
    parser.add_argument(
        "--threads", type=int, default=1, help="embedder threads (1 is faster on a busy machine)"
    )
    args = parser.parse_args(argv)
    # The rows are kept (bench-results, git-ignored) so `--reuse` refits without searching again.
    cache = RESULTS / f"relevance-{args.embedder}.pickle"
    if args.reuse and cache.exists():
        data = pickle.loads(cache.read_bytes())
    else:
        embedder = build_embedder(args.embedder, threads=args.threads)
        data = {name: collect(name, args.embedder, embedder) for name in args.sets}
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps(data))
    report = analyse(data, args.embedder)
    out = RESULTS / f"relevance-{args.embedder}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")
    return 0


SUBMODELS = {"full": ("cosine", "coverage"), "without_cosine": ("coverage",)}
COLUMN = {"cosine": 0, "coverage": 1}
THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8)


def _pooled(data: dict[str, Any], split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of every set, each set weighing the same in all (SciFact has ~15,000 rows, SQuAD ~50,000)."""
    xs, ys, ws = [], [], []
    for d in data.values():
        rows, meta = d[split]["rows"], d[split]["meta"]
        y = np.array([m[2] for m in meta], dtype=np.float64)
        xs.append(rows)
        ys.append(y)
        ws.append(np.full(len(y), 1.0 / len(y)))
    y = np.concatenate(ys)
    return np.vstack(xs), y, np.concatenate(ws) * len(y) / len(data)


def analyse(data: dict[str, Any], kind: str) -> dict[str, Any]:
    x, y, w = _pooled(data, "dev")
    fitted: dict[str, relevance.Logistic] = {}
    for name, uses in SUBMODELS.items():
        beta = fit_logistic(x[:, [COLUMN[u] for u in uses]], y, w)
        fitted[name] = relevance.Logistic(
            uses, round(float(beta[0]), 4), tuple(round(float(b), 4) for b in beta[1:])
        )
    model = relevance.RelevanceModel(**fitted)
    print(f"\n# {kind}: paste into citegate/knowledge/search/relevance.py MODELS")
    print(f"    {KINDS[kind]!r}: RelevanceModel(")
    for name, logistic in fitted.items():
        print(f"        {name}=Logistic({logistic.uses!r}, {logistic.bias!r}, {logistic.weights!r}),")
    print("    ),")

    report: dict[str, Any] = {
        "model": {k: vars(v) for k, v in fitted.items()},
        "ndcg@10": {},
        "thresholds": {},
    }
    for name, d in data.items():
        for split in ("dev", "test"):
            rows, meta = d[split]["rows"], d[split]["meta"]
            engine: dict[str, list[tuple[str, float]]] = {}
            ranked: dict[str, list[tuple[str, float]]] = {}
            for row, (qid, _rank, _label, doc, score) in zip(rows, meta, strict=True):
                engine.setdefault(qid, []).append((doc, score))
                ranked.setdefault(qid, []).append((doc, _estimate(model, row)))
            row_out = {}
            for label, run in (("engine", engine), ("score", ranked)):
                for agg in ("max", "top2"):
                    ordered = {q: aggregate(sorted(h, key=lambda t: -t[1]), agg) for q, h in run.items()}
                    row_out[f"{label}/{agg}"] = round(evaluate(ordered, d["qrels"])["ndcg@10"], 4)
            report["ndcg@10"][f"{name}/{split}"] = row_out
            print(f"  nDCG@10 {name:<11} {split:<4} {row_out}")
    # Thresholds on dev: gold hits kept (top 10 of answerable queries), other hits dropped, and
    # unanswerable (SQuAD) queries left with no hit at all.
    print(
        "\n  threshold on dev: gold hits kept | other hits dropped (top 10) | answerable queries with a"
        " gold hit kept | unanswerable queries with nothing kept"
    )
    for t in THRESHOLDS:
        kept_gold = dropped = total_gold = total_other = empty = unanswerable = 0
        answerable = answered = 0
        for d in data.values():
            rows, meta = d["dev"]["rows"], d["dev"]["meta"]
            impossible = {q.id for q in d["dev"]["queries"] if q.impossible}
            best: dict[str, float] = {}
            best_gold: dict[str, float] = {}
            for row, (qid, rank, label, _doc, _score) in zip(rows, meta, strict=True):
                p = _estimate(model, row)
                best[qid] = max(best.get(qid, 0.0), p)
                if label:
                    best_gold[qid] = max(best_gold.get(qid, 0.0), p)
                if rank >= 10 or qid in impossible:
                    continue
                total_gold += label
                total_other += 1 - label
                kept_gold += label and p >= t
                dropped += (not label) and p < t
            unanswerable += len(impossible)
            empty += sum(1 for q in impossible if best.get(q, 0.0) < t)
            gold_queries = [q.id for q in d["dev"]["queries"] if q.gold]
            answerable += len(gold_queries)
            answered += sum(1 for q in gold_queries if best_gold.get(q, 0.0) >= t)
        row_t = {
            "answerable_with_gold_kept": round(answered / answerable, 3),
            "gold_kept": round(kept_gold / total_gold, 3),
            "other_dropped": round(dropped / total_other, 3),
            "unanswerable_empty": round(empty / unanswerable, 3) if unanswerable else None,
        }
        report["thresholds"][str(t)] = row_t
        print(f"  {t:.2f}  {row_t}")
    # The default: the threshold that best tells gold hits from the others among the top 10 on dev
    # (Youden's J: gold kept + others dropped). Whether an unanswerable question's topical passage
    # answers it is the answerer's call, not retrieval's, so that column is reported, not tuned on.
    chosen = max(
        report["thresholds"],
        key=lambda t: report["thresholds"][t]["gold_kept"] + report["thresholds"][t]["other_dropped"],
    )
    report["default_threshold"] = float(chosen)
    print(f"  default threshold (chosen on dev): {chosen}")
    return report


def _estimate(model: relevance.RelevanceModel, row: np.ndarray) -> float:
    return model.estimate(
        relevance.Features(cosine=None if np.isnan(row[0]) else float(row[0]), coverage=float(row[1]))
    )


if __name__ == "__main__":
    sys.exit(main())
