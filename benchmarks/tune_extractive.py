"""Tune and evaluate the extractive answerer on SQuAD 2.0 (English, with unanswerable questions) and
CMRC 2018 (Chinese) from benchmarks/data (not a test).

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
citegate/answers/extractive.py by hand. Every run prints a threshold sweep on dev for the module's
current weights, and, unless --no-test, the test figures of the module's constants, once, at the end.

    PYTHONPATH=layers .venv/bin/python benchmarks/tune_extractive.py [--fit] [--no-test]
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from citegate.answers.base import Draft, Evidence
from citegate.answers.confidence import HIGH_SUPPORT, MEDIUM_RECALL, MEDIUM_SUPPORT, extractive_level
from citegate.answers.extractive import (
    DEFAULT_CONFIG,
    FEATURES,
    Analysis,
    ExtractiveAnswerer,
    clear_sentence_cache,
)
from citegate.clients.evaluation.dataset import Dataset, Query, load_dataset
from citegate.clients.evaluation.metrics import contains_answer as _contains
from citegate.knowledge.embedding import Embedder, build_embedder
from citegate.knowledge.search.base import ChunkRecord, SearchFilter, SearchMode
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "benchmarks" / "data"
TOP_K = 8
KB = "bench"
SETS = ("squad2_dev", "cmrc2018")


def load(data: Path, name: str) -> Dataset:
    return load_dataset(data / name)


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

RANK_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
SUPPORT_FEATURES = (*FEATURES, "margin")
# Candidate support models compared by 5-fold cross-validation on dev (feature sets x L2).
SUPPORT_SETS: dict[str, tuple[str, ...]] = {
    "mismatch": (
        "context_recall",
        "salient",
        "salient_context",
        "number_missing",
        "name_missing",
        "negation_mismatch",
        "antonym_mismatch",
        "missing_salient",
        "answer_type",
        "bigram",
        "run",
        "coverage",
    ),
    "all": tuple(f for f in SUPPORT_FEATURES if f != "cosine"),
}
L2_GRID = (0.3, 1.0, 3.0, 10.0)
# Answerable questions answered with the gold passage cited, on dev, per language: the test bars
# (SQuAD 2.0 0.85, CMRC 2018 0.95) with a margin for the dev/test gap.
TARGET_ANSWERED = {True: 0.87, False: 0.97}


def rank_matrices(analyses: Sequence[tuple[Query, Analysis]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per answerable question: candidate features, and whether each sentence is in a gold passage
    and holds an answer string."""
    out = []
    for q, a in analyses:
        if q.impossible or not a.candidates:
            continue
        m = np.array([[c.features[f] for f in FEATURES] for c in a.candidates], dtype=np.float64)
        good = np.array([c.evidence.ref_id in q.gold and _contains(c.text, q.answers) for c in a.candidates])
        out.append((m, good))
    return out


def rank_objective(matrices: Sequence[tuple[np.ndarray, np.ndarray]], total: int, w: np.ndarray) -> float:
    """Share of answerable questions whose best sentence is in a gold passage and holds an answer."""
    return sum(bool(good[int(np.argmax(m @ w))]) for m, good in matrices) / max(total, 1)


def fit_rank(
    analyses: Sequence[tuple[Query, Analysis]], start: Mapping[str, float], cosine: bool
) -> dict[str, float]:
    """Coordinate ascent over RANK_GRID, "recall" fixed at its start value as the scale."""
    matrices = rank_matrices(analyses)
    total = sum(1 for q, _ in analyses if not q.impossible)
    index = {f: i for i, f in enumerate(FEATURES)}
    w = np.array([start.get(f, 0.0) for f in FEATURES])
    best = rank_objective(matrices, total, w)
    print(f"rank objective on dev, start weights: {best:.4f}")
    searched = [f for f in FEATURES if f != "recall" and (f != "cosine" or cosine)]
    for _ in range(3):
        improved = False
        for f in searched:
            for value in RANK_GRID:
                trial = w.copy()
                trial[index[f]] = value
                score = rank_objective(matrices, total, trial)
                if score > best + 1e-9:
                    best, w, improved = score, trial, True
        if not improved:
            break
    print(f"rank objective on dev, fitted weights: {best:.4f}")
    return {f: float(w[index[f]]) for f in FEATURES if w[index[f]] != 0.0}


@dataclass
class SupportRow:
    """One dev question as the support model sees it (after ranking and sentence selection)."""

    query: Query
    english: bool
    features: dict[str, float]
    gold_cited: bool  # answered at threshold 0, would the gold passage be cited?
    # Declined at threshold 0 (a veto or too little coverage): the support score never decides it.
    declined: bool = False


def support_rows(
    answerer: ExtractiveAnswerer, analyses: Sequence[tuple[Query, Analysis, bool]]
) -> list[SupportRow]:
    always = ExtractiveAnswerer(config=replace(answerer.config, threshold=0.0))
    rows = []
    for q, analysis, english in analyses:
        if not analysis.candidates:
            continue
        best = analysis.candidates[0]
        runner_up = analysis.candidates[1].rank_score if len(analysis.candidates) > 1 else 0.0
        draft = always.decide(analysis)
        rows.append(
            SupportRow(
                q,
                english,
                {**best.features, "margin": best.rank_score - runner_up},
                not draft.declined and bool(q.gold & set(draft.used_refs)),
                draft.declined,
            )
        )
    return rows


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float, sample_weight: np.ndarray
) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method (small, deterministic)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0  # no penalty on the bias
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (sample_weight * (p - y)) + reg * w
        hess = (xb * (sample_weight * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return w[:-1], float(w[-1])


def fit_support(
    rows: Sequence[SupportRow], names: Sequence[str], l2: float
) -> tuple[dict[str, float], float]:
    """Positives: answerable questions whose best sentence is in a gold passage; negatives: unanswerable
    ones; classes weighted to balance, so the bias does not just learn the dev mix."""
    train = [r for r in rows if not r.declined and (r.query.impossible or r.gold_cited)]
    x = np.array([[r.features[f] for f in names] for r in train])
    y = np.array([0.0 if r.query.impossible else 1.0 for r in train])
    pos, neg = float(y.sum()), float(len(y) - y.sum())
    weight = np.where(y > 0, len(y) / (2 * pos), len(y) / (2 * neg))
    coef, bias = fit_logistic(x, y, l2, weight)
    return {f: float(c) for f, c in zip(names, coef, strict=True)}, bias


def logit(row: SupportRow, weights: Mapping[str, float], bias: float) -> float:
    return bias + sum(w * row.features[f] for f, w in weights.items())


def operating_point(rows: Sequence[SupportRow], scores: Sequence[float]) -> dict[str, float]:
    """The highest support threshold keeping answered-with-gold >= TARGET_ANSWERED on both sets, and the
    share of unanswerable questions it declines."""
    answerable_en = sum(1 for r in rows if r.english and not r.query.impossible)
    answerable_zh = sum(1 for r in rows if not r.english)
    impossible = [
        -math.inf if r.declined else s for r, s in zip(rows, scores, strict=True) if r.query.impossible
    ]
    best = {"threshold": -math.inf, "declined_unanswerable": 0.0}
    below = -math.inf
    for t in sorted(set(scores)):
        en = sum(1 for r, s in zip(rows, scores, strict=True) if r.english and r.gold_cited and s >= t)
        zh = sum(1 for r, s in zip(rows, scores, strict=True) if not r.english and r.gold_cited and s >= t)
        if en / answerable_en < TARGET_ANSWERED[True] or zh / answerable_zh < TARGET_ANSWERED[False]:
            break
        # Halfway to the next lower score, so rounding the printed weights cannot flip the boundary case.
        best = {
            "threshold": (t + below) / 2 if below > -math.inf else t - 1.0,
            "declined_unanswerable": sum(1 for s in impossible if s < t) / len(impossible),
        }
        below = t
    return best


def auc(rows: Sequence[SupportRow], scores: Sequence[float]) -> float:
    """SQuAD answerable-with-gold vs unanswerable: the chance a positive outscores a negative."""
    pos = [s for r, s in zip(rows, scores, strict=True) if r.english and r.gold_cited]
    neg = [s for r, s in zip(rows, scores, strict=True) if r.query.impossible]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def cross_validate(
    rows: Sequence[SupportRow], names: Sequence[str], l2: float, folds: int = 5
) -> dict[str, float]:
    """Out-of-fold support logits (folds by sorted question id), then AUC and the operating point."""
    order = sorted(range(len(rows)), key=lambda i: rows[i].query.id)
    fold_of = {i: k % folds for k, i in enumerate(order)}
    scores = [0.0] * len(rows)
    for fold in range(folds):
        train = [r for i, r in enumerate(rows) if fold_of[i] != fold]
        weights, bias = fit_support(train, names, l2)
        for i, r in enumerate(rows):
            if fold_of[i] == fold:
                scores[i] = logit(r, weights, bias)
    return {"auc": auc(rows, scores), **operating_point(rows, scores)}


def extra_sentence_grid(
    answerer: ExtractiveAnswerer, analyses: Sequence[tuple[Query, Analysis, bool]]
) -> None:
    """How the number of quoted sentences / passages moves the ceiling (threshold 0) on dev."""
    print(
        "extra sentences (threshold 0, dev): ratio, max passages -> answered_gold en / zh,"
        " quote_has_answer en, refs cited"
    )
    for ratio in (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0):
        for max_passages in (1, 2, 3):
            config = replace(
                answerer.config, threshold=0.0, extra_sentence_ratio=ratio, max_passages=max_passages
            )
            trial = ExtractiveAnswerer(config=config)
            stats = {True: [0, 0, 0, 0], False: [0, 0, 0, 0]}
            for q, a, english in analyses:
                if q.impossible:
                    continue
                d = trial.decide(a)
                s = stats[english]
                s[0] += 1
                s[1] += bool(q.gold & set(d.used_refs))
                s[2] += _contains(d.answer, q.answers)
                s[3] += len(d.used_refs)
            en, zh = stats[True], stats[False]
            print(
                f"  {ratio:.2f} {max_passages}  {en[1] / en[0]:.3f} / {zh[1] / zh[0]:.3f}"
                f"   {en[2] / en[0]:.3f}   {(en[3] + zh[3]) / (en[0] + zh[0]):.2f}"
            )


def veto_counts(answerer: ExtractiveAnswerer, dev: Sequence[tuple[Query, Analysis, bool]]) -> None:
    """How often each veto fires on the best sentence: answerable questions whose best sentence is
    in a gold passage (a veto there costs an answer) vs unanswerable ones (a veto there is a win)."""
    print("vetoes on dev (best sentence): feature -> answerable in gold / unanswerable")
    for name in answerer.config.veto_features:
        for english in (True, False):
            hit = [(q, a) for q, a, e in dev if e == english and a.candidates and not a.han]
            fired = [(q, a) for q, a in hit if a.candidates[0].features.get(name, 0.0) > 0]
            gold = sum(1 for q, a in fired if not q.impossible and a.candidates[0].evidence.ref_id in q.gold)
            impossible = sum(1 for q, _ in fired if q.impossible)
            print(f"  {name:24s} {'en' if english else 'zh'}: {gold} / {impossible}")


def tune(answerer: ExtractiveAnswerer, dev: Sequence[tuple[Query, Analysis, bool]]) -> None:
    """Print fitted constants (rank weights, support model, threshold) for the module, from dev only."""
    rank = fit_rank([(q, a) for q, a, _ in dev], answerer.config.rank_weights, answerer.embedder is not None)
    print("RANK_WEIGHTS =", json.dumps(rank, indent=4))
    ranked = ExtractiveAnswerer(config=replace(answerer.config, rank_weights=rank))
    dev = [(q, ranked.rerank(a), english) for q, a, english in dev]
    extra_sentence_grid(ranked, dev)
    rows = support_rows(ranked, dev)
    print(
        "support models, 5-fold CV on dev (out-of-fold: AUC, and unanswerable declined at >= 90% answered):"
    )
    best: tuple[float, str, float] | None = None
    for set_name, names in SUPPORT_SETS.items():
        for l2 in L2_GRID:
            cv = cross_validate(rows, names, l2)
            print(
                f"  {set_name:9s} l2={l2:<5} auc {cv['auc']:.3f}  declined {cv['declined_unanswerable']:.3f}"
            )
            if best is None or cv["declined_unanswerable"] + cv["auc"] > best[0]:
                best = (cv["declined_unanswerable"] + cv["auc"], set_name, l2)
    assert best is not None
    _, set_name, l2 = best
    weights, bias = fit_support(rows, SUPPORT_SETS[set_name], l2)
    scores = [logit(r, weights, bias) for r in rows]
    point = operating_point(rows, scores)
    threshold = 1.0 / (1.0 + math.exp(-point["threshold"]))
    print(f"chosen: {set_name}, l2={l2}; fitted on all dev: auc {auc(rows, scores):.3f}, {point}")
    print("SUPPORT_WEIGHTS =", json.dumps({f: round(w, 3) for f, w in weights.items()}, indent=4))
    print(f"SUPPORT_BIAS = {bias:.3f}")
    print(
        f"SUPPORT_THRESHOLD = {threshold:.4f}  (the highest keeping answered-with-gold >= "
        f"{TARGET_ANSWERED[True]} (en) and {TARGET_ANSWERED[False]} (zh) on dev)"
    )


# ----------------------------------------------------------------------------------- confidence

LEVELS = ("high", "medium", "low")


def level_of(draft: Draft, high: float | None, medium: float | None) -> str:
    """Support thresholds alone (`calibrate`), or, with None, the module's rule (confidence.py)."""
    if high is None or medium is None:
        return extractive_level(draft)
    support = draft.support_score or 0.0
    return "high" if support >= high else "medium" if support >= medium else "low"


def reliability(
    queries: Sequence[Query], drafts: Mapping[str, Draft], high: float | None, medium: float | None
) -> dict[str, dict[str, float]]:
    """Per confidence level of answered questions: how many, and the share that cite a gold
    passage (an answered unanswerable question never does); and the share of unanswerable
    questions answered with each level."""
    out: dict[str, dict[str, float]] = {}
    impossible = [q for q in queries if q.impossible]
    for level in LEVELS:
        answered = [
            q for q in queries if not drafts[q.id].declined and level_of(drafts[q.id], high, medium) == level
        ]
        good = sum(1 for q in answered if q.gold & set(drafts[q.id].used_refs))
        out[level] = {
            "answered": float(len(answered)),
            "cites_gold": round(good / len(answered), 4) if answered else float("nan"),
            "unanswerable_share": round(sum(1 for q in answered if q.impossible) / len(impossible), 4)
            if impossible
            else float("nan"),
        }
    return out


MIN_LEVEL_ANSWERS = 5  # fewer answers at a level than this in a set say nothing about its share


def calibrate(datasets: Mapping[str, Dataset], drafts: Mapping[str, Draft]) -> tuple[float, float]:
    """The lowest support thresholds (on a 0.02 grid; 1.0 = never) at which, on dev and in each
    set, `high` answers cite gold >= 95% and take <= 3% of the unanswerable questions, and
    `medium` answers cite gold >= 80%: margins over the test bars (90%, 5%, 70%). Levels with
    fewer than MIN_LEVEL_ANSWERS answers in a set are not judged there."""
    grid = [round(0.02 * i, 2) for i in range(51)]

    def ok(high: float, medium: float) -> bool:
        for ds in datasets.values():
            table = reliability(ds.dev, drafts, high, medium)
            h, m = table["high"], table["medium"]
            if h["answered"] >= MIN_LEVEL_ANSWERS and h["cites_gold"] < 0.95:
                return False
            if not math.isnan(h["unanswerable_share"]) and h["unanswerable_share"] > 0.03:
                return False
            if m["answered"] >= MIN_LEVEL_ANSWERS and m["cites_gold"] < 0.80:
                return False
        return True

    high = next((t for t in grid if ok(t, t)), 1.0)
    medium = next((t for t in grid if t <= high and ok(high, t)), high)
    return high, medium


def print_reliability(label: str, table: Mapping[str, Mapping[str, float]]) -> None:
    print(f"reliability {label}: level -> answered, share citing gold, share of unanswerable")
    for level, row in table.items():
        answered, gold, unanswerable = row["answered"], row["cites_gold"], row["unanswerable_share"]
        print(f"  {level:6s} {int(answered):4d}  {gold:.3f}  {unanswerable:.3f}")


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
    """Dev figures for thresholds 0, 0.05, ..., 1 (the module's weights)."""
    rows = []
    for threshold in [round(float(t), 3) for t in np.arange(0.0, 1.0001, 0.05)]:
        trial = ExtractiveAnswerer(answerer.embedder, config=replace(answerer.config, threshold=threshold))
        row: dict[str, float] = {"threshold": threshold}
        for name, ds in datasets.items():
            m = metrics(ds.dev, run(trial, analyses, ds.dev), evidence[name])
            prefix = "squad" if name.startswith("squad") else "cmrc"
            if "declined_unanswerable" in m:
                row[f"{prefix}_declined_unanswerable"] = m["declined_unanswerable"]
            row[f"{prefix}_answered_gold"] = m["answered_gold"]
            row[f"{prefix}_citation_precision"] = m["citation_precision"]
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
    out: dict[str, float] = {}
    for label, text, question in (
        ("english", english * 3, "How high is Olympus Mons?"),
        ("chinese", chinese * 3, "长城的总长度是多少？"),
    ):
        # Eight distinct passages of 500 characters (windows at different offsets).
        step = len(text) // 3 // 8
        evidence = [Evidence(n, f"r{n}", text[n * step : n * step + 500], 1.0 / n) for n in range(1, 9)]
        answerer.answer(question, evidence)  # warm up (jieba's dictionary, the analyzer)
        for mode in ("cold", "warm"):
            samples = []
            for _ in range(rounds):
                if mode == "cold":  # every sentence analysed afresh, as for passages never seen
                    clear_sentence_cache()
                started = time.perf_counter()
                answerer.answer(question, evidence)
                samples.append((time.perf_counter() - started) * 1000)
            samples.sort()
            out[f"{label}_{mode}_p50_ms"] = round(statistics.median(samples), 3)
            out[f"{label}_{mode}_p95_ms"] = round(samples[int(0.95 * (len(samples) - 1))], 3)
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
            "veto_features": list(DEFAULT_CONFIG.veto_features),
        },
        "retrieval_timings": timings,
    }

    veto_counts(
        answerer,
        [(q, analyses[q.id], name.startswith("squad")) for name, ds in datasets.items() for q in ds.dev],
    )
    if args.fit:
        tune(
            answerer,
            [(q, analyses[q.id], name.startswith("squad")) for name, ds in datasets.items() for q in ds.dev],
        )

    print("dev threshold sweep (module constants):")
    rows = sweep(answerer, analyses, datasets, evidence)
    for row in rows:
        print("  " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))
    results["dev_sweep"] = rows

    dev_drafts = {q.id: answerer.decide(analyses[q.id]) for ds in datasets.values() for q in ds.dev}
    high, medium = calibrate(datasets, dev_drafts)
    print(f"support thresholds alone, calibrated on dev: high >= {high}, medium >= {medium} (1.0: never)")
    for name, ds in datasets.items():
        print_reliability(
            f"dev {name} (support thresholds alone)", reliability(ds.dev, dev_drafts, high, medium)
        )
    print(
        f"confidence in the module: MEDIUM_RECALL {MEDIUM_RECALL}, MEDIUM_SUPPORT {MEDIUM_SUPPORT},"
        f" HIGH_SUPPORT {HIGH_SUPPORT}"
    )
    results["confidence"] = {
        "support_thresholds_on_dev": [high, medium],
        "module": {
            "medium_recall": MEDIUM_RECALL,
            "medium_support": MEDIUM_SUPPORT,
            "high_support": HIGH_SUPPORT,
        },
    }
    for split in ("dev",) if args.no_test else ("dev", "test"):
        for name, ds in datasets.items():
            queries = ds.dev if split == "dev" else ds.test
            drafts = run(answerer, analyses, queries)
            m = metrics(queries, drafts, evidence[name])
            results[f"{split}_{name}"] = m
            print(f"{split} {name}: {json.dumps(m)}")
            table = reliability(queries, drafts, None, None)
            results[f"{split}_{name}_reliability"] = table
            print_reliability(f"{split} {name} (module constants)", table)
        queries = [q for ds in datasets.values() for q in (ds.dev if split == "dev" else ds.test)]
        pooled = reliability(queries, run(answerer, analyses, queries), None, None)
        results[f"{split}_pooled_reliability"] = pooled
        print_reliability(f"{split} both sets (module constants)", pooled)

    results["latency"] = latency(ExtractiveAnswerer())
    print(f"latency per question (8 passages x 500 chars, no embedder): {json.dumps(results['latency'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
