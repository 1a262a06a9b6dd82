"""What the docs are missing, measured: a few thousand questions replayed through the API of a real
`citegate serve`, then the gap groups it made against the gaps that were planted.

The planted set is built from the labelled manual sets (benchmarks/data/manuals: git and python,
their pages as Debian ships them): every in-domain question the manual does not answer and every
off-topic one is a planted gap, asked in four forms (the original, a near-duplicate, an English
rephrasing and a Chinese translation: benchmarks/data/insights/variants.tsv, written by hand), a
skewed number of times each; the answerable questions are asked too (their pages are ingested),
and some answers are marked not helpful. Each question's id is its label; the split is the manual
sets' own (dev / test by id).

    python -m benchmarks.insights tune     # the grouping threshold on the dev split (offline, USE)
    python -m benchmarks.insights replay   # the replay through the API; figures on test (and all)

Figures: purity (the share of a group's questions that belong to its main label, weighted by
questions), completeness (the share of a label's questions in its largest group), the number of
groups against the number of distinct gaps, the share of planted gaps whose Chinese form joined
their main group, and the time from a new question to its group (GET /v1/insights/gaps folds it in).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
MANUALS = ("git", "python")
VARIANTS = ("original", "near", "paraphrase", "zh")
THRESHOLDS = tuple(round(0.40 + 0.025 * i, 3) for i in range(19))  # 0.40 .. 0.85
# New questions asked after the replay to time the refresh (none is in the planted set).
FRESH = (
    "How do I sign commits with an SSH key stored on a hardware token?",
    "What is the memory limit of a Python subinterpreter?",
    "How do I mirror a repository to three remotes at once?",
    "Which Python version added the tomllib module?",
    "How do I configure git to use a proxy only for one host?",
    "What is the default recursion limit of Python?",
    "How can I list the largest objects in my git repository?",
    "How do I make asyncio print slow callbacks?",
    "Where does git store credentials on macOS?",
    "How do I profile memory allocations in a Python program?",
    "What is the best pizza topping?",
    "How do I rename the default branch on the server?",
    "How do I read a file in chunks with pathlib?",
    "Which git command shows who changed a line last?",
    "How do I set a timeout on a subprocess call?",
    "Is there a way to undo git gc?",
    "How do I type a decorator that keeps the signature?",
    "How do I split a big commit into two?",
    "What does the walrus operator do inside a comprehension?",
    "How do I see which hooks git will run?",
)


@dataclass(frozen=True)
class Question:
    label: str
    manual: str
    kind: str  # answerable | unanswerable | off_topic
    split: str  # dev | test
    forms: dict[str, str]
    pages: tuple[str, ...]

    @property
    def planted(self) -> bool:
        return self.kind != "answerable"


def near_duplicate(text: str) -> str:
    """The same question typed differently: lower case, no question mark, a doubled space."""
    words = text.rstrip("?").lower().split()
    return " ".join(words[:2]) + "  " + " ".join(words[2:])


def load_set() -> list[Question]:
    variants: dict[str, dict[str, str]] = {}
    with (DATA / "insights" / "variants.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            variants[row["id"]] = {"paraphrase": row["paraphrase"], "zh": row["zh"]}
    questions = []
    for manual in MANUALS:
        folder = DATA / "manuals" / manual
        dev = {json.loads(line)["id"] for line in (folder / "dev.jsonl").open(encoding="utf-8")}
        for line in (folder / "queries.jsonl").open(encoding="utf-8"):
            q = json.loads(line)
            forms = {"original": q["text"], "near": near_duplicate(q["text"])}
            if q["kind"] != "answerable":
                forms.update(variants[q["id"]])
            questions.append(
                Question(
                    q["id"],
                    manual,
                    q["kind"],
                    "dev" if q["id"] in dev else "test",
                    forms,
                    tuple(q.get("pages") or []),
                )
            )
    return questions


def _unit(key: str) -> float:
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) / 2**32


def times_asked(q: Question) -> int:
    """Skewed, as real traffic is: a few gaps asked often, most a few times."""
    r = _unit(q.label)
    if q.kind == "unanswerable":
        return 6 + int(70 * r**2)
    if q.kind == "off_topic":
        return 3 + int(6 * r)
    return 1 + int(20 * r**2)


def schedule(questions: Sequence[Question], seed: int = 7) -> list[tuple[Question, str, str]]:
    """(question, form, caller kind) for every ask, shuffled. Every form of a question is asked at
    least once; then the original twice as often as each other form."""
    rng = random.Random(seed)
    asks = []
    for q in questions:
        forms = list(q.forms)
        weights = [2 if f == "original" else 1 for f in forms]
        chosen = forms + rng.choices(forms, weights, k=max(0, times_asked(q) - len(forms)))
        for form in chosen:
            asks.append((q, form, "agent" if rng.random() < 0.4 else "human"))
    rng.shuffle(asks)
    return asks


# --- the figures -------------------------------------------------------------------------------


def scores(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Purity and completeness of (group, label) assignments, weighted by questions."""
    cells: Counter[tuple[str, str]] = Counter(pairs)
    total = sum(cells.values())
    if not total:
        return {"questions": 0}
    by_group: dict[str, Counter[str]] = defaultdict(Counter)
    by_label: dict[str, Counter[str]] = defaultdict(Counter)
    for (group, label), n in cells.items():
        by_group[group][label] += n
        by_label[label][group] += n
    purity = sum(max(c.values()) for c in by_group.values()) / total
    completeness = sum(max(c.values()) for c in by_label.values()) / total
    whole = sum(1 for c in by_label.values() if len(c) == 1)
    return {
        "questions": total,
        "groups": len(by_group),
        "distinct_gaps": len(by_label),
        "purity": round(purity, 4),
        "completeness": round(completeness, 4),
        "f1": round(2 * purity * completeness / (purity + completeness), 4),
        "gaps_in_one_group": round(whole / len(by_label), 4),
    }


# --- tuning on dev (offline: the same online rule, the same embedder) ---------------------------


def tune(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from citegate.insights.grouping import cluster
    from citegate.knowledge.embedding import build_embedder

    questions = [q for q in load_set() if q.planted and q.split == args.split]
    asks = schedule(questions)
    embedder = build_embedder(args.embedder)
    texts = sorted({q.forms[form] for q, form, _ in asks})
    started = time.perf_counter()
    table = {}
    for text in texts:
        row = np.asarray(embedder.embed_query(text), dtype=np.float32).reshape(-1)
        table[text] = row / np.linalg.norm(row)
    embed_ms = (time.perf_counter() - started) * 1000 / len(texts)
    vectors = [table[q.forms[form]] for q, form, _ in asks]
    rows = []
    for threshold in THRESHOLDS:
        labels = cluster(vectors, threshold)
        rows.append(
            {
                "threshold": threshold,
                **scores((str(g), q.label) for g, (q, _, _) in zip(labels, asks, strict=True)),
            }
        )
    best = max(rows, key=lambda r: (r["f1"], r["threshold"]))
    print(
        f"tuning on {args.split}: {len(questions)} planted gaps, {len(asks)} asks, {len(texts)} texts "
        f"({embed_ms:.1f} ms per embedding, {args.embedder})"
    )
    print("| threshold | groups | purity | completeness | F1 |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        mark = " **best**" if r is best else ""
        print(
            f"| {r['threshold']:.3f}{mark} | {r['groups']} | {r['purity']:.3f} | "
            f"{r['completeness']:.3f} | {r['f1']:.3f} |"
        )
    result = {"split": args.split, "embedder": args.embedder, "asks": len(asks), "rows": rows, "best": best}
    _save(args.out / "insights-tune.json", result)
    return result


# --- the replay through the API ----------------------------------------------------------------


def _pages_root(manual: str, cache: Path, pages: set[str], into: Path) -> Path:
    from benchmarks.manuals import fetch

    root = fetch.html_root(fetch.load_manifest()[manual], cache)
    target = into / manual
    for page in sorted(pages):
        source = root / page
        if source.is_file():
            (target / page).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / page)
    return target


def replay(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.manuals import service

    from citegate.answers.feedback import normalize_question

    questions = load_set()
    asks = schedule(questions)
    label_of = {normalize_question(q.forms[f]): q for q in questions for f in q.forms}
    work = args.reuse or Path(tempfile.mkdtemp(prefix="citegate-insights-"))
    env = {
        "CITEGATE_INSIGHTS_THRESHOLD": str(args.threshold),
        "CITEGATE_ANONYMOUS_IP_RATE_LIMIT": "1000000",
        "CITEGATE_ANONYMOUS_RATE_LIMIT": "1000000",
        "CITEGATE_IP_RATE_LIMIT": "1000000",
    }
    server = service.Server(work / "data", work / "serve.log", env=env)
    result: dict[str, Any] = {"threshold": args.threshold, "asks": len(asks)}
    print(f"work folder {work}; citegate serve starting", flush=True)
    server.start()
    try:
        admin = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {service.TOKEN}"}, timeout=600
        )
        human = httpx.Client(base_url=server.url, timeout=120)
        if args.reuse is None:
            started = time.perf_counter()
            for manual in MANUALS:
                pages = {p for q in questions if q.manual == manual for p in q.pages}
                root = _pages_root(manual, args.cache, pages, work / "pages")
                made = admin.post("/v1/kb", json={"kb_id": manual, "name": manual, "status": "approved"})
                made.raise_for_status()
                run = service.ingest(server, root, manual, work / f"{manual}.state", work / "cli.log", 3600)
                print(
                    f"{manual}: ingested {run.ingested} of {run.files} pages, {run.chunks} chunks, "
                    f"{run.wall_s}s",
                    flush=True,
                )
            result["ingest_s"] = round(time.perf_counter() - started, 1)
            admin.put(
                "/admin/policies/agent:insights-bench",
                json={"tools": ["ask"], "knowledge_bases": ["*"], "rate_limit_per_minute": 1_000_000},
            ).raise_for_status()
            token = admin.post("/admin/agents/insights-bench/credentials", json={"kind": "token"}).json()[
                "secret"
            ]
            agent = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
            )

            def ask(item: tuple[Question, str, str]) -> dict[str, Any]:
                q, form, caller = item
                body = {"question": q.forms[form]}
                t0 = time.perf_counter()
                if caller == "agent":
                    reply = agent.post("/agent/tools/ask", json=body)
                else:
                    reply = human.post("/answer/ask", json=body)
                reply.raise_for_status()
                data = reply.json()
                return {
                    "label": q.label,
                    "form": form,
                    "caller": caller,
                    "declined": data.get("noAnswerReason") is not None,
                    "confidence": data.get("confidence"),
                    "request_id": data["audit"]["requestId"],
                    "ms": (time.perf_counter() - t0) * 1000,
                }

            started = time.perf_counter()
            with ThreadPoolExecutor(args.workers) as pool:
                answered = list(pool.map(ask, asks))
            result["replay_s"] = round(time.perf_counter() - started, 1)
            print(f"replayed {len(answered)} questions in {result['replay_s']}s", flush=True)
            # Readers mark some answers not helpful (an answered question of each of 12 answerable ones).
            marked = 0
            seen: set[str] = set()
            for row in answered:
                q = next(x for x in questions if x.label == row["label"])
                if q.planted or row["declined"] or q.label in seen or len(seen) >= 12:
                    continue
                seen.add(q.label)
                for _ in range(2):
                    human.post(
                        "/agent/tools/create_feedback",
                        json={"question": q.forms[row["form"]], "answerRequestId": row["request_id"]},
                    ).raise_for_status()
                    marked += 1
            result["marked_not_helpful"] = marked
            result["declined"] = sum(r["declined"] for r in answered)
            result["low_confidence"] = sum(
                1 for r in answered if not r["declined"] and r["confidence"] == "low"
            )
            result["ask_p50_ms"] = round(statistics.median(r["ms"] for r in answered), 1)

        else:
            result["reused"] = str(args.reuse)

        # The backlog of the whole replay, folded by as many views as it takes (each folds for
        # about FOLD_BUDGET_SECONDS), then the view the figures are read from.
        t0 = time.perf_counter()
        folds = []
        while True:
            view = admin.get("/v1/insights/gaps", params={"limit": 1000, "questions": 1000}).json()
            folds.append(view["refresh"])
            if not view["refresh"]["remaining"] and not view["ungrouped"]:
                break
        result["backlog_fold"] = {
            "views": len(folds),
            "signals": sum(f["seen"] for f in folds),
            "wall_s": round(time.perf_counter() - t0, 1),
            "fold_ms_per_signal": round(
                sum(f["ms"] for f in folds) / max(1, sum(f["seen"] for f in folds)), 2
            ),
        }
        pairs = []
        zh_joined = []
        by_label_groups: dict[str, Counter[str]] = defaultdict(Counter)
        for group in view["groups"]:
            for item in group["questions"]:
                q = label_of.get(normalize_question(item["question"]))
                if q is None:  # a question of an earlier refresh timing (--reuse)
                    continue
                for _ in range(item["count"]):
                    pairs.append((group["groupId"], q))
                by_label_groups[q.label][group["groupId"]] += item["count"]
        for q in questions:
            if q.planted and by_label_groups.get(q.label):
                main = by_label_groups[q.label].most_common(1)[0][0]
                zh_groups = [
                    g["groupId"]
                    for g in view["groups"]
                    for item in g["questions"]
                    if item["question"] == q.forms["zh"]
                ]
                zh_joined.append((q.split, bool(zh_groups) and zh_groups[0] == main))
        result["groups_total"] = view["totalGroups"]
        result["gap_questions"] = view["gapQuestions"]
        for name, keep in (
            ("test", lambda q: q.split == "test"),
            ("dev", lambda q: q.split == "dev"),
            ("all", lambda q: True),
            ("test_planted", lambda q: q.split == "test" and q.planted),
        ):
            result[name] = scores((g, q.label) for g, q in pairs if keep(q))
        for split in ("test", "dev"):
            joined = [ok for s, ok in zh_joined if s == split]
            result[f"{split}_zh_in_main_group"] = round(sum(joined) / len(joined), 4) if joined else None

        # The time from a new question to its group: ask it, then one view (which folds it in).
        timings = []
        for text in FRESH:
            asked = human.post("/answer/ask", json={"question": text})
            asked.raise_for_status()
            gap = asked.json()["noAnswerReason"] is not None or asked.json()["confidence"] == "low"
            t0 = time.perf_counter()
            fresh = admin.get("/v1/insights/gaps", params={"limit": 1000, "questions": 1000}).json()
            wall = (time.perf_counter() - t0) * 1000
            visible = any(
                normalize_question(i["question"]) == normalize_question(text)
                for g in fresh["groups"]
                for i in g["questions"]
            )
            timings.append(
                {
                    "view_ms": wall,
                    "refresh_ms": fresh["refresh"]["ms"],
                    "visible": visible,
                    "gap": gap,
                    "seen": fresh["refresh"]["seen"],
                }
            )
        result["refresh"] = {
            "new_questions": len(timings),
            "gaps_among_them": sum(t["gap"] for t in timings),
            "gaps_in_a_group_after_one_view": sum(t["visible"] and t["gap"] for t in timings),
            "answered_in_no_group": sum(not t["visible"] and not t["gap"] for t in timings),
            "view_p50_ms": round(statistics.median(t["view_ms"] for t in timings), 1),
            "view_max_ms": round(max(t["view_ms"] for t in timings), 1),
            "refresh_p50_ms": round(statistics.median(t["refresh_ms"] for t in timings), 1),
            "refresh_max_ms": round(max(t["refresh_ms"] for t in timings), 1),
        }
        t0 = time.perf_counter()
        summary = admin.get("/v1/insights/summary").json()
        result["summary_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        result["summary"] = {
            k: summary[k]
            for k in (
                "questions",
                "answerRate",
                "declineRate",
                "declinedByReason",
                "confidence",
                "callers",
                "notHelpful",
            )
        }
        result["signals_in_window"] = summary["questions"] + summary["notHelpful"]
        if args.keep:
            result["server"] = server.url
    finally:
        if not args.keep:
            server.stop()
            if args.reuse is None:
                shutil.rmtree(work, ignore_errors=True)
    _print(result)
    _save(args.out / "insights-replay.json", result)
    return result


def _print(r: dict[str, Any]) -> None:
    print(json.dumps(r, indent=1, ensure_ascii=False))
    print()
    print(
        "| split | gap questions | distinct gaps | groups | purity | completeness | F1 | gaps in one group |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in ("test", "test_planted", "dev", "all"):
        s = r[name]
        print(
            f"| {name} | {s['questions']} | {s['distinct_gaps']} | {s['groups']} | {s['purity']:.3f} | "
            f"{s['completeness']:.3f} | {s['f1']:.3f} | {s['gaps_in_one_group']:.3f} |"
        )


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.manuals import fetch

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="choose the grouping threshold on a split (offline)")
    t.add_argument("--split", default="dev", choices=("dev", "test"))
    t.add_argument("--embedder", default="use")
    r = sub.add_parser("replay", help="replay the planted set through a real citegate serve")
    r.add_argument("--threshold", type=float, default=None, help="default: the settings' default")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument(
        "--cache", type=Path, default=fetch.CACHE, help="the manuals' .deb cache (benchmarks.manuals.fetch)"
    )
    r.add_argument("--keep", action="store_true", help="leave the server running")
    r.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="a work folder of an earlier replay (its data/): skip the ingest and the replay",
    )
    for p in (t, r):
        p.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args(argv)
    if args.command == "tune":
        tune(args)
    else:
        if args.threshold is None:
            from citegate.platform.settings import Settings

            args.threshold = Settings.model_fields["insights_threshold"].default
        replay(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
