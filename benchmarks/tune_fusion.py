"""Sweep the hybrid fusion and the BM25 fields on dev sets; score only the chosen setting once on
SciFact test.

Reuses benchmarks/eval_retrieval.py (real chunker, EmbeddedSearchIndex, cached child vectors of the
chosen embedder, its metrics and its child -> document aggregation). Each index is built once per
set; each query is embedded once and the engine is called directly, as `citegate.knowledge.retrieval.retrieve`
does (`index.search(mode="hybrid", limit=top_k, fusion=..., candidates=pool)`), because `retrieve`
derives the pool itself (`candidate_pool(top_k=100)` = 200) and does not expose it.

Grid: BM25 fields (`LexicalFields`: text, title, parent context boosts; no reindex needed), min_max
lexical_weight {0.3..0.9}, rrf rank_constant {20, 60}, candidates {50, 100, 200}, aggregation
{max, top2}. NOTE: the engine takes max(candidates, limit) per side, so with top_k=100 children
candidates=50 runs exactly as 100; it is reported but aliased, not re-run.

Selection (dev only): the highest SciFact dev nDCG@10 among settings whose CMRC and SQuAD dev
nDCG@10 are not below the current default's by more than 0.01. For the sanity sets the aggregation
is chosen per set on dev (as eval_retrieval does), i.e. their figure is the better of max / top2.

    .venv/bin/python benchmarks/tune_fusion.py                  # USE
    .venv/bin/python benchmarks/tune_fusion.py --embedder e5 --pools 200
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_retrieval import (
    AGGREGATIONS,
    DATA,
    KB_ID,
    RESULTS,
    TOP_K,
    _pairs,
    _with_vector,
    aggregate,
    chunk_corpus,
    embed_cached,
    evaluate,
    query_metrics,
    read_jsonl,
    read_qrels,
)

from citegate.knowledge.embedding import build_embedder
from citegate.knowledge.retrieval import candidate_pool, fusion_for
from citegate.knowledge.search.base import FusionConfig, LexicalFields, SearchFilter
from citegate.knowledge.search.embedded import DEFAULT_LEXICAL, EmbeddedSearchIndex

SCIFACT, SANITY = "scifact", ("cmrc2018", "squad2_dev")
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
RRF_K = (20, 60)
POOLS = (50, 100, 200)
MAX_SANITY_DROP = 0.01
# BM25 fields: (text, title, context) boosts. "child" is the engine before the parent context field.
LEXICAL = {
    "child": LexicalFields(text=1.0, title=0.5, context=0.0),
    "ctx": DEFAULT_LEXICAL,  # text 1, title 0.5, context 1
    "ctx/t.5": LexicalFields(text=0.5, title=0.5, context=1.0),
    "ctx/t.25": LexicalFields(text=0.25, title=0.25, context=1.0),
}


def fusions() -> dict[str, FusionConfig]:
    out = {f"min_max/w={w}": FusionConfig(method="min_max", lexical_weight=w) for w in WEIGHTS}
    out.update({f"rrf/k={k}": FusionConfig(method="rrf", rank_constant=k) for k in RRF_K})
    return out


def effective_pool(pool: int) -> int:
    return max(pool, TOP_K)  # EmbeddedSearchIndex.search: max(candidates, limit)


def lexical_label(fields: LexicalFields) -> str:
    return next(label for label, value in LEXICAL.items() if value == fields)


def default_label(model_id: str) -> str:
    """What retrieve() runs in eval_retrieval for this embedder."""
    base = candidate_pool(TOP_K, False)
    fusion = fusion_for(model_id)
    return f"{lexical_label(DEFAULT_LEXICAL)}|min_max/w={fusion.lexical_weight}|pool={base}"


class SetRunner:
    """One set's index, built once from the embedding cache, with query vectors embedded once."""

    def __init__(self, name: str, kind: str, embedder: Any, tmp: Path) -> None:
        folder = DATA / name
        self.name = name
        self.qrels = read_qrels(folder / "qrels.tsv")
        corpus = read_jsonl(folder / "corpus.jsonl")
        chunks = chunk_corpus(corpus)
        ids = [r.ref_id for r in chunks.records]
        vectors = embed_cached(name, kind, embedder, [r.text for r in chunks.records], ids)
        self.index = EmbeddedSearchIndex(tmp / name, dimension=int(vectors.shape[1]), use_dense_cache=False)
        self.index.upsert_documents(
            [
                (KB_ID, doc, [_with_vector(chunks.records[i], vectors[i]) for i in positions])
                for doc, positions in chunks.by_doc.items()
            ]
        )
        self.queries = {s: read_jsonl(folder / f"{s}.jsonl") for s in ("dev", "test")}
        self.vectors = {
            s: {q["id"]: embedder.embed_query(q["text"]) for q in qs}
            for s, qs in self.queries.items()
            if s == "dev" or name == SCIFACT  # test is only ever run on SciFact
        }
        self.filter = SearchFilter(kb_ids=frozenset({KB_ID}))

    def run(
        self, split: str, fusion: FusionConfig, pool: int, lexical: LexicalFields = DEFAULT_LEXICAL
    ) -> dict[str, list[tuple[str, float]]]:
        self.index.lexical = lexical  # a query-time setting of the engine
        run = {}
        for q in self.queries[split]:
            result = self.index.search(
                query=q["text"],
                vector=self.vectors[split][q["id"]],
                filter=self.filter,
                limit=TOP_K,
                mode="hybrid",
                fusion=fusion,
                candidates=pool,
            )
            run[q["id"]] = _pairs(result.hits)
        return run

    def score(
        self, run: dict[str, list[tuple[str, float]]], method: str
    ) -> tuple[dict[str, float], dict[str, float]]:
        docs = {q: aggregate(h, method) for q, h in run.items()}
        per_query = {q: query_metrics(docs[q], self.qrels[q])["ndcg@10"] for q in docs if self.qrels.get(q)}
        return evaluate(docs, self.qrels), per_query


def std_err(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", choices=("use", "e5"), default="use")
    parser.add_argument("--pools", type=int, nargs="+", default=list(POOLS))
    parser.add_argument("--lexical", nargs="+", choices=sorted(LEXICAL), default=list(LEXICAL))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    embedder = build_embedder(args.embedder)
    out: dict[str, Any] = {
        "embedder": args.embedder,
        "top_k_children": TOP_K,
        "default": default_label(embedder.model_id),
        "lexical_fields": {label: vars(LEXICAL[label]) for label in args.lexical},
        "note": "candidates=50 is clamped to max(50, top_k=100) by the engine: identical to 100",
        "rule": f"max SciFact dev nDCG@10 s.t. CMRC/SQuAD dev nDCG@10 >= default - {MAX_SANITY_DROP}",
    }
    rows: dict[str, dict[str, Any]] = {}  # label -> set -> agg -> metrics
    per_query: dict[str, list[float]] = {}  # scifact label|agg -> per-query ndcg (query order)
    settings: dict[str, tuple[LexicalFields, FusionConfig, int]] = {}
    for llabel in dict.fromkeys([lexical_label(DEFAULT_LEXICAL), *args.lexical]):
        for flabel, fusion in fusions().items():
            for pool in sorted({effective_pool(p) for p in args.pools}):
                settings[f"{llabel}|{flabel}|pool={pool}"] = (LEXICAL[llabel], fusion, pool)
    with tempfile.TemporaryDirectory(prefix="tune-fusion-") as tmp_name:
        tmp = Path(tmp_name)
        runners = {}
        for name in (SCIFACT, *SANITY):
            t = time.perf_counter()
            runners[name] = SetRunner(name, args.embedder, embedder, tmp)
            print(f"[{name}] index + query vectors ready in {time.perf_counter() - t:.1f} s", flush=True)
        try:
            if out["default"] not in settings:
                raise SystemExit(f"the default {out['default']} is not in the grid: add its pool")
            for label, (lexical, fusion, pool) in settings.items():
                rows[label] = {}
                for name, runner in runners.items():
                    run = runner.run("dev", fusion, pool, lexical)
                    rows[label][name] = {}
                    for agg in AGGREGATIONS:
                        metrics, pq = runner.score(run, agg)
                        rows[label][name][agg] = metrics
                        if name == SCIFACT:
                            per_query[f"{label}|{agg}"] = [pq[q] for q in sorted(pq)]
                s = rows[label][SCIFACT]
                print(
                    f"  {label:<34} scifact nDCG@10 max {s['max']['ndcg@10']:.4f}"
                    f" top2 {s['top2']['ndcg@10']:.4f}"
                    f" ({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )

            # ---------------- selection on dev
            base = out["default"]

            def sanity(label: str, name: str) -> float:
                return float(max(rows[label][name][a]["ndcg@10"] for a in AGGREGATIONS))

            floors = {n: sanity(base, n) - MAX_SANITY_DROP for n in SANITY}
            candidates = []
            for label in rows:
                ok = all(sanity(label, n) >= floors[n] for n in SANITY)
                for agg in AGGREGATIONS:
                    candidates.append((rows[label][SCIFACT][agg]["ndcg@10"], ok, label, agg))
            admissible = [c for c in candidates if c[1]]
            best = max(admissible, key=lambda c: c[0])
            _, _, chosen_label, chosen_agg = best
            base_agg = max(AGGREGATIONS, key=lambda a: rows[base][SCIFACT][a]["ndcg@10"])
            a = np.array(per_query[f"{chosen_label}|{chosen_agg}"])
            b = np.array(per_query[f"{base}|{base_agg}"])
            diff = (a - b).tolist()
            out["selection"] = {
                "chosen": {"setting": chosen_label, "aggregation": chosen_agg},
                "default": {"setting": base, "aggregation": base_agg},
                "sanity_floors": floors,
                "scifact_dev_ndcg10": float(a.mean()),
                "scifact_dev_ndcg10_se": std_err(a.tolist()),
                "default_scifact_dev_ndcg10": float(b.mean()),
                "paired_gain_vs_default": float(np.mean(diff)),
                "paired_gain_se": std_err(diff),
                "excluded_by_sanity": sorted({c[2] for c in candidates if not c[1]}),
            }

            # ---------------- one test evaluation of the chosen setting only
            lexical, fusion, pool = settings[chosen_label]
            test_run = runners[SCIFACT].run("test", fusion, pool, lexical)
            test_metrics, test_pq = runners[SCIFACT].score(test_run, chosen_agg)
            out["selection"]["scifact_test"] = test_metrics
            out["selection"]["scifact_test_ndcg10_se"] = std_err(list(test_pq.values()))
        finally:
            for runner in runners.values():
                runner.index.close()

    out["dev"] = rows
    out["seconds"] = round(time.perf_counter() - started, 1)

    # ---------------- table
    print(
        f"\n{'setting':<34}{'agg':>5}"
        + "".join(f"{n[:8] + ' nDCG':>15}{'R@100':>8}" for n in (SCIFACT, *SANITY))
    )
    for label, sets in rows.items():
        for agg in AGGREGATIONS:
            cells = "".join(
                f"{sets[n][agg]['ndcg@10']:>15.4f}{sets[n][agg]['recall@100']:>8.4f}"
                for n in (SCIFACT, *SANITY)
            )
            mark = " <- default" if label == out["default"] else ""
            mark += " <- CHOSEN" if (label, agg) == (chosen_label, chosen_agg) else ""
            print(f"{label:<34}{agg:>5}{cells}{mark}")
    print("(pool=50 runs as pool=100: the engine clamps candidates to >= top_k=100)")
    print(json.dumps(out["selection"], indent=2))
    path = RESULTS / f"fusion-{args.embedder}.json"
    path.write_text(json.dumps(out, indent=2, sort_keys=True))
    print(f"wrote {path} ({out['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
