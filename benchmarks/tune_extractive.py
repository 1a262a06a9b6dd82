"""Tune and evaluate the extractive answerer on SQuAD 2.0 (English, with unanswerable questions) and
CMRC 2018 (Chinese) from ../shared/data (not a test).

For each set: every corpus passage becomes one chunk of an in-memory EmbeddedSearchIndex (USE
vectors, hybrid search), each question retrieves its top 8, the hits become Evidence numbered from 1,
and the answerer answers or declines. Figures:

    declined_unanswerable   share of unanswerable questions declined (SQuAD 2.0 only)
    answered_gold           share of answerable questions answered with the gold passage cited
    citation_precision      share of answered questions with a cited passage containing an answer
                            string (an answered unanswerable question counts as wrong)
    quote_has_answer        share of answered answerable questions whose quoted sentences contain
                            an answer string (stricter: the quote itself, not just the passage)
    retrieval_recall        share of answerable questions with the gold passage in the top 8

Tuning uses dev.jsonl only: `--fit` searches the rank weights (coordinate ascent) and fits the support
weights (L2 logistic regression); the printed constants are then copied into
citegate/answering/extractive.py by hand. Every run prints a threshold sweep on dev for the module's
current weights, and, unless --no-test, the test figures of the module's constants, once, at the end.

    PYTHONPATH=layers .venv/bin/python benchmarks/tune_extractive.py [--fit] [--no-test]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from citegate.answering.base import Draft, Evidence
from citegate.answering.extractive import (
    DEFAULT_CONFIG,
    FEATURES,
    Analysis,
    ExtractiveAnswerer,
    ExtractiveConfig,
)
from citegate.embedding import Embedder, build_embedder
from citegate.search.base import ChunkRecord, SearchFilter, SearchMode
from citegate.search.embedded import EmbeddedSearchIndex

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
TOP_K = 8
KB = "bench"
SETS = ("squad2_dev", "cmrc2018")


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    answers: tuple[str, ...]
    impossible: bool
    gold: frozenset[str]


@dataclass
class Dataset:
    name: str
    passages: dict[str, tuple[str, str]]  # id -> (title, text)
    dev: list[Query]
    test: list[Query]


def _jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load(data: Path, name: str) -> Dataset:
    folder = data / name
    passages = {
        str(r["id"]): (str(r.get("title", "")), str(r["text"])) for r in _jsonl(folder / "corpus.jsonl")
    }
    gold: dict[str, set[str]] = {}
    with (folder / "qrels.tsv").open(encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, pid, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                gold.setdefault(qid, set()).add(pid)

    def queries(file: str) -> list[Query]:
        out = []
        for r in _jsonl(folder / file):
            answers = r.get("answers") or []
            assert isinstance(answers, list)
            out.append(
                Query(
                    id=str(r["id"]),
                    text=str(r["text"]),
                    answers=tuple(str(a) for a in answers),
                    impossible=bool(r.get("is_impossible", False)),
                    gold=frozenset(gold.get(str(r["id"]), set())),
                )
            )
        return out

    return Dataset(name, passages, queries("dev.jsonl"), queries("test.jsonl"))


# ------------------------------------------------------------------------------------ retrieval


def retrieve(
    dataset: Dataset, embedder: Embedder, mode: SearchMode
) -> tuple[dict[str, list[Evidence]], dict[str, float]]:
    """Top-8 Evidence for every dev and test question, and timings."""
    timings: dict[str, float] = {}
    ids = sorted(dataset.passages)
    started = time.perf_counter()
    vectors = embedder.embed_documents([dataset.passages[i][1] for i in ids])
    timings["embed_corpus_s"] = time.perf_counter() - started
    evidence: dict[str, list[Evidence]] = {}
    with tempfile.TemporaryDirectory(prefix="citegate-extractive-") as tmp:
        index = EmbeddedSearchIndex(Path(tmp), embedder.dimension, use_dense_cache=False)
        try:
            started = time.perf_counter()
            chunks = [
                ChunkRecord(
                    ref_id=pid,
                    kb_id=KB,
                    tenant_id="bench",
                    document_id=pid,
                    parent_id=pid,
                    source_name=dataset.name,
                    text=dataset.passages[pid][1],
                    title=dataset.passages[pid][0],
                    vector=vectors[row],
                )
                for row, pid in enumerate(ids)
            ]
            index.upsert_documents([(KB, c.document_id, [c]) for c in chunks])
            timings["index_s"] = time.perf_counter() - started
            flt = SearchFilter(kb_ids=frozenset({KB}))
            started = time.perf_counter()
            for q in dataset.dev + dataset.test:
                vector = embedder.embed_query(q.text) if mode != "lexical" else None
                hits = index.search(query=q.text, vector=vector, filter=flt, limit=TOP_K, mode=mode).hits
                evidence[q.id] = [
                    Evidence(
                        number=n,
                        ref_id=hit.chunk.ref_id,
                        text=hit.chunk.text,
                        score=hit.score,
                        title=hit.chunk.title,
                        lexical_score=hit.lexical_score,
                        dense_score=hit.dense_score,
                    )
                    for n, hit in enumerate(hits, start=1)
                ]
            timings["retrieve_s"] = time.perf_counter() - started
        finally:
            index.close()
    return evidence, timings


# -------------------------------------------------------------------------------------- metrics


def _contains(text: str, answers: Sequence[str]) -> bool:
    lowered = text.lower()
    return any(a.strip() and a.strip().lower() in lowered for a in answers)


def metrics(
    queries: Sequence[Query], drafts: Mapping[str, Draft], evidence: Mapping[str, list[Evidence]]
) -> dict[str, float]:
    answerable = [q for q in queries if not q.impossible]
    impossible = [q for q in queries if q.impossible]
    answered = [q for q in queries if not drafts[q.id].declined]
    answered_answerable = [q for q in answerable if not drafts[q.id].declined]

    def cited_contains(q: Query) -> bool:
        texts = {e.ref_id: e.text for e in evidence[q.id]}
        return any(_contains(texts.get(ref, ""), q.answers) for ref in drafts[q.id].used_refs)

    def share(n: int, d: int) -> float:
        return round(n / d, 4) if d else float("nan")

    out = {
        "questions": float(len(queries)),
        "answerable": float(len(answerable)),
        "unanswerable": float(len(impossible)),
        "retrieval_recall": share(
            sum(1 for q in answerable if q.gold & {e.ref_id for e in evidence[q.id]}), len(answerable)
        ),
        "answered_gold": share(
            sum(1 for q in answered_answerable if q.gold & set(drafts[q.id].used_refs)), len(answerable)
        ),
        "answered_answerable": share(len(answered_answerable), len(answerable)),
        "citation_precision": share(sum(1 for q in answered if cited_contains(q)), len(answered)),
        "quote_has_answer": share(
            sum(1 for q in answered_answerable if _contains(drafts[q.id].answer, q.answers)),
            len(answered_answerable),
        ),
        "mean_refs_cited": round(statistics.fmean(len(drafts[q.id].used_refs) for q in answered), 3)
        if answered
        else 0.0,
    }
    if impossible:
        out["declined_unanswerable"] = share(
            sum(1 for q in impossible if drafts[q.id].declined), len(impossible)
        )
    return out


# --------------------------------------------------------------------------------------- tuning


@dataclass
class Prepared:
    """Feature matrices of one question's candidates, independent of the weights."""

    query: Query
    matrix: np.ndarray  # (candidates, features)
    has_answer: np.ndarray  # the sentence contains an answer string
    in_gold: np.ndarray  # the sentence's passage is a gold passage


RANK_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
SUPPORT_FEATURES = (*FEATURES, "margin")


def prepare(query: Query, analysis: Analysis) -> Prepared:
    cands = analysis.candidates
    matrix = np.array([[c.features[f] for f in FEATURES] for c in cands], dtype=np.float64).reshape(
        -1, len(FEATURES)
    )
    has_answer = np.array([_contains(c.text, query.answers) for c in cands], dtype=bool)
    in_gold = np.array([c.evidence.ref_id in query.gold for c in cands], dtype=bool)
    return Prepared(query, matrix, has_answer, in_gold)


def rank_objective(prepared: Sequence[Prepared], weights: np.ndarray) -> float:
    """Share of answerable questions whose best sentence is in a gold passage and holds an answer."""
    hits = 0
    total = 0
    for p in prepared:
        if p.query.impossible or not len(p.matrix):
            total += not p.query.impossible
            continue
        total += 1
        scores = p.matrix @ weights
        best = int(np.argmax(scores))  # first maximum: the order of candidates breaks ties
        hits += bool(p.has_answer[best] and p.in_gold[best])
    return hits / max(total, 1)


def fit_rank(prepared: Sequence[Prepared], start: Mapping[str, float]) -> dict[str, float]:
    names = [f for f in FEATURES if f in start]
    index = {f: i for i, f in enumerate(FEATURES)}
    w = np.zeros(len(FEATURES))
    for f in names:
        w[index[f]] = start[f]
    best = rank_objective(prepared, w)
    for _ in range(3):
        improved = False
        for f in names:
            if f == "recall":
                continue  # the anchor: the scale of the others is relative to it
            for value in RANK_GRID:
                trial = w.copy()
                trial[index[f]] = value
                score = rank_objective(prepared, trial)
                if score > best + 1e-9:
                    best, w, improved = score, trial, True
        if not improved:
            break
    return {f: float(w[index[f]]) for f in names}


def support_rows(prepared: Sequence[Prepared], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per question: support features of its best sentence, and label (answerable and best sentence
    in a gold passage = 1; unanswerable = 0; answerable but the best sentence misses = dropped)."""
    rows, labels = [], []
    for p in prepared:
        if not len(p.matrix):
            continue
        scores = p.matrix @ weights
        order = np.argsort(-scores, kind="stable")
        best = int(order[0])
        margin = float(scores[best] - scores[order[1]]) if len(order) > 1 else float(scores[best])
        if p.query.impossible:
            label = 0.0
        elif p.in_gold[best]:
            label = 1.0
        else:
            continue
        rows.append([*p.matrix[best].tolist(), margin])
        labels.append(label)
    return np.array(rows), np.array(labels)


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float, sample_weight: np.ndarray
) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method (small, deterministic)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0  # no penalty on the bias
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (sample_weight * (p - y)) + reg * w
        hess = (xb * (sample_weight * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w[:-1], float(w[-1])


# ------------------------------------------------------------------------------------------ runs


def run(
    answerer: ExtractiveAnswerer, analyses: Mapping[str, Analysis], queries: Sequence[Query]
) -> dict[str, Draft]:
    return {q.id: answerer.decide(analyses[q.id]) for q in queries}


def sweep(
    answerer: ExtractiveAnswerer,
    analyses: Mapping[str, Analysis],
    datasets: Mapping[str, Dataset],
    evidence: Mapping[str, Mapping[str, list[Evidence]]],
) -> list[dict[str, float]]:
    rows = []
    for threshold in [round(t, 3) for t in np.arange(0.0, 1.0001, 0.05)]:
        trial = ExtractiveAnswerer(answerer.embedder, config=replace(answerer.config, threshold=threshold))
        row: dict[str, float] = {"threshold": threshold}
        for name, ds in datasets.items():
            m = metrics(ds.dev, run(trial, analyses, ds.dev), evidence[name])
            prefix = "squad" if name.startswith("squad") else "cmrc"
            row[f"{prefix}_answered_gold"] = m["answered_gold"]
            row[f"{prefix}_citation_precision"] = m["citation_precision"]
            if "declined_unanswerable" in m:
                row[f"{prefix}_declined_unanswerable"] = m["declined_unanswerable"]
        rows.append(row)
    return rows


def latency(answerer: ExtractiveAnswerer, rounds: int = 300) -> dict[str, float]:
    """Per-call latency for 8 passages of ~500 characters (English, then Chinese)."""
    english = (
        "Olympus Mons is a very large shield volcano on the planet Mars. It is about 22 km high, "
        "more than twice the height of Mount Everest above sea level. The volcano was formed by lava "
        "flows over a long period, and its caldera complex is 60 km wide. Dr. Smith et al. studied "
        "it in 2004, e.g. with data from orbiters. Its base spans roughly 600 km. Mars also hosts "
        "Valles Marineris, a system of canyons 4,000 km long, and two small moons, Phobos and Deimos."
    )
    chinese = (
        "长城是中国古代的军事防御工程，是一道高大、坚固而且连绵不断的长垣，用以限隔敌骑的行动。"
        "长城不是一道单纯孤立的城墙，而是以城墙为主体，同大量的城、障、亭、标相结合的防御体系。"
        "根据国家文物局2012年公布的数据，历代长城总长度为21196.18千米。长城修筑的历史可上溯到西周时期，"
        "春秋战国时期列国争霸，互相防守，长城修筑进入第一个高潮。秦灭六国统一天下后，秦始皇连接和修缮"
        "战国长城，始有万里长城之称。明朝是最后一个大规模修筑长城的朝代，今天人们所看到的长城多是此时修筑的。"
    )
    out = {}
    for label, text, question in (
        ("english", english, "How high is Olympus Mons?"),
        ("chinese", chinese * 2, "长城的总长度是多少？"),
    ):
        evidence = [Evidence(n, f"r{n}", text[:500], 1.0 / n) for n in range(1, 9)]
        answerer.answer(question, evidence)  # warm up (jieba's dictionary, the analyzer)
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            answerer.answer(question, evidence)
            samples.append((time.perf_counter() - started) * 1000)
        samples.sort()
        out[f"{label}_p50_ms"] = round(statistics.median(samples), 3)
        out[f"{label}_p95_ms"] = round(samples[int(0.95 * (len(samples) - 1))], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "extractive.json")
    parser.add_argument("--mode", choices=("hybrid", "lexical"), default="hybrid")
    parser.add_argument("--cache", type=Path, default=None, help="reuse retrieved evidence from this pickle")
    parser.add_argument("--cosine", action="store_true", help="give the answerer the USE embedder too")
    parser.add_argument("--fit", action="store_true", help="fit rank and support weights on dev, print them")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--no-test", action="store_true", help="do not evaluate on test (while tuning)")
    args = parser.parse_args()

    datasets = {name: load(args.data, name) for name in SETS}
    embedder = build_embedder("use")
    evidence: dict[str, dict[str, list[Evidence]]] = {}
    timings: dict[str, dict[str, float]] = {}
    if args.cache and args.cache.exists():
        evidence, timings = pickle.loads(args.cache.read_bytes())
        print(f"retrieval: reused {args.cache}")
    else:
        for name, ds in datasets.items():
            evidence[name], timings[name] = retrieve(ds, embedder, args.mode)
            print(f"retrieval {name}: {json.dumps({k: round(v, 2) for k, v in timings[name].items()})}")
        if args.cache:
            args.cache.parent.mkdir(parents=True, exist_ok=True)
            args.cache.write_bytes(pickle.dumps((evidence, timings)))

    answerer = ExtractiveAnswerer(embedder if args.cosine else None)
    started = time.perf_counter()
    analyses: dict[str, Analysis] = {}
    for name, ds in datasets.items():
        for q in ds.dev + ds.test:
            analyses[q.id] = answerer.analyse(q.text, evidence[name][q.id])
    print(f"analysis of {len(analyses)} questions: {time.perf_counter() - started:.1f} s")

    results: dict[str, object] = {
        "settings": {
            "top_k": TOP_K,
            "retrieval": f"embedded {args.mode}, USE vectors",
            "cosine": args.cosine,
        },
        "config": {
            "rank_weights": dict(DEFAULT_CONFIG.rank_weights),
            "support_weights": dict(DEFAULT_CONFIG.support_weights),
            "support_bias": DEFAULT_CONFIG.support_bias,
            "threshold": DEFAULT_CONFIG.threshold,
        },
        "retrieval_timings": timings,
    }

    if args.fit:
        dev_prepared = [prepare(q, analyses[q.id]) for ds in datasets.values() for q in ds.dev]
        start = dict(DEFAULT_CONFIG.rank_weights)
        w0 = np.array([start.get(f, 0.0) for f in FEATURES])
        print(f"rank objective (dev, current weights): {rank_objective(dev_prepared, w0):.4f}")
        rank = fit_rank(dev_prepared, start)
        w = np.array([rank.get(f, 0.0) for f in FEATURES])
        print(f"rank objective (dev, fitted weights):  {rank_objective(dev_prepared, w):.4f}")
        print("RANK_WEIGHTS =", json.dumps(rank, indent=4))
        x, y = support_rows(dev_prepared, w)
        names = [f for f in SUPPORT_FEATURES if f in DEFAULT_CONFIG.support_weights]
        cols = [SUPPORT_FEATURES.index(f) for f in names]
        # Balance the classes so the bias does not just learn the dev mix.
        pos = float(y.sum())
        neg = float(len(y) - pos)
        sample_weight = np.where(y > 0, len(y) / (2 * pos), len(y) / (2 * neg))
        coef, bias = fit_logistic(x[:, cols], y, args.l2, sample_weight)
        support = {f: round(float(c), 3) for f, c in zip(names, coef, strict=True)}
        print(f"support fit on {len(y)} dev questions ({int(pos)} positive): bias {bias:.3f}")
        print("SUPPORT_WEIGHTS =", json.dumps(support, indent=4))
        fitted = ExtractiveConfig(rank_weights=rank, support_weights=support, support_bias=round(bias, 3))
        fitted_answerer = ExtractiveAnswerer(answerer.embedder, config=fitted)
        refit = {
            qid: fitted_answerer.analyse(a.question, [c.evidence for c in a.candidates]) for qid, a in ()
        }
        del refit
        # Re-rank the existing analyses under the fitted rank weights (features do not change).
        reranked = {
            q.id: Analysis(
                analyses[q.id].question,
                tuple(fitted_answerer._ranked(list(analyses[q.id].candidates))),
                analyses[q.id].diagnostics,
            )
            for ds in datasets.values()
            for q in ds.dev
        }
        print("dev threshold sweep with the fitted weights:")
        for row in sweep(fitted_answerer, reranked, datasets, evidence):
            print("  " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))

    print("dev threshold sweep (module constants):")
    rows = sweep(answerer, analyses, datasets, evidence)
    for row in rows:
        print("  " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))
    results["dev_sweep"] = rows

    for split in ("dev",) if args.no_test else ("dev", "test"):
        for name, ds in datasets.items():
            queries = ds.dev if split == "dev" else ds.test
            m = metrics(queries, run(answerer, analyses, queries), evidence[name])
            results[f"{split}_{name}"] = m
            print(f"{split} {name}: {json.dumps(m)}")

    results["latency"] = latency(ExtractiveAnswerer())
    print(f"latency (8 passages x 500 chars, no embedder): {json.dumps(results['latency'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
