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
    python -m benchmarks.insights merge    # merging groups whose centroids meet (offline; --split)
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


def merge_grid(args: argparse.Namespace) -> dict[str, Any]:
    """Merging groups whose centroids meet, offline (after each question, as a refresh does after
    each batch): join thresholds against merge thresholds on a split."""
    import numpy as np

    from citegate.insights.grouping import cluster
    from citegate.knowledge.embedding import build_embedder

    questions = [q for q in load_set() if q.planted and q.split == args.split]
    asks = schedule(questions)
    embedder = build_embedder(args.embedder)
    table = {}
    for text in sorted({q.forms[form] for q, form, _ in asks}):
        row = np.asarray(embedder.embed_query(text), dtype=np.float32).reshape(-1)
        table[text] = row / np.linalg.norm(row)
    vectors = [table[q.forms[form]] for q, form, _ in asks]
    rows = []
    print(f"merging on {args.split}: {len(questions)} planted gaps, {len(asks)} asks ({args.embedder})")
    print("| join | merge | groups | purity | completeness | F1 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for join in (0.625, 0.65, 0.675, 0.7):
        for merge in (None, 0.65, 0.675, 0.7, 0.75, 0.8):
            if merge is not None and merge < join:
                continue
            labels = cluster(vectors, join, merge)
            r = {
                "join": join,
                "merge": merge,
                **scores((str(g), q.label) for g, (q, _, _) in zip(labels, asks, strict=True)),
            }
            rows.append(r)
            print(
                f"| {join:.3f} | {'none' if merge is None else f'{merge:.3f}'} | {r['groups']} | "
                f"{r['purity']:.3f} | {r['completeness']:.3f} | {r['f1']:.3f} |"
            )
    result = {"split": args.split, "embedder": args.embedder, "rows": rows}
    _save(args.out / f"insights-merge-{args.split}.json", result)
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


def extended_schedule(questions: Sequence[Question], total: int | None) -> list[tuple[Question, str, str]]:
    """The standard schedule (2,788 asks), then more rounds of it (other seeds) up to `total`: its
    first 2,788 asks are the standard replay whatever the total."""
    asks = schedule(questions)
    seed = 8
    while total is not None and len(asks) < total:
        asks += schedule(questions, seed=seed)
        seed += 1
    return asks[:total] if total is not None else asks


def _p(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return round(ordered[max(0, min(len(ordered) - 1, -(-int(q * 100) * len(ordered) // 100) - 1))], 1)


def _now_iso() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def measure(
    admin: httpx.Client,
    human: httpx.Client,
    questions: Sequence[Question],
    fresh: Sequence[str],
    figures: bool,
) -> dict[str, Any]:
    """At a checkpoint: fold the backlog (views of an empty window: only the fold is paid), the
    gap groups against the planted gaps (`figures`), then for each fresh question the time from
    asking it to its group (a whole gaps view as the console asks it) and a summary view."""
    from citegate.answers.feedback import normalize_question

    result: dict[str, Any] = {}
    t0 = time.perf_counter()
    folds = []
    while True:
        view = admin.get("/v1/insights/gaps", params={"since": _now_iso(), "limit": 1}).json()
        folds.append(view["refresh"])
        if not view["refresh"]["remaining"] and not view["refresh"].get("skipped"):
            break
    result["backlog_fold"] = {
        "views": len(folds),
        "signals": sum(f["seen"] for f in folds),
        "wall_s": round(time.perf_counter() - t0, 1),
        "fold_ms_per_signal": round(sum(f["ms"] for f in folds) / max(1, sum(f["seen"] for f in folds)), 2),
    }
    print(f"backlog folded: {result['backlog_fold']}", flush=True)
    if figures:
        t0 = time.perf_counter()
        view = admin.get("/v1/insights/gaps", params={"limit": 1000, "questions": 1000}).json()
        result["figures_view_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        result.update(_figures(view, questions))
    timings = []
    for text in fresh:
        asked = human.post("/answer/ask", json={"question": text})
        asked.raise_for_status()
        gap = asked.json()["noAnswerReason"] is not None or asked.json()["confidence"] == "low"
        t0 = time.perf_counter()
        got = admin.get("/v1/insights/gaps")
        got.raise_for_status()
        view = got.json()
        wall = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        summary = admin.get("/v1/insights/summary")
        summary.raise_for_status()
        summary_ms = (time.perf_counter() - t1) * 1000
        visible = any(
            normalize_question(i["question"]) == normalize_question(text)
            for g in view["groups"]
            for i in g["questions"]
        )
        timings.append(
            {
                "view_ms": wall,
                "summary_ms": summary_ms,
                "refresh_ms": view["refresh"]["ms"],
                "visible": visible,
                "gap": gap,
                "seen": view["refresh"]["seen"],
            }
        )
        print(f"fresh question: view {wall:.0f} ms, summary {summary_ms:.0f} ms", flush=True)
    if timings:
        result["refresh"] = {
            "new_questions": len(timings),
            "gaps_among_them": sum(t["gap"] for t in timings),
            # A gap lands in a group the view shows; the view lists 100 groups by count, so a new
            # group of one question may rank below them (then the figures view above has it).
            "gaps_in_a_group_after_one_view": sum(t["visible"] and t["gap"] for t in timings),
            **{
                f"{name}_{stat}_ms": _p([t[f"{name}_ms"] for t in timings], q)
                for name in ("view", "summary", "refresh")
                for stat, q in (("p50", 0.5), ("p95", 0.95))
            },
            "view_max_ms": round(max(t["view_ms"] for t in timings), 1),
            "summary_max_ms": round(max(t["summary_ms"] for t in timings), 1),
        }
    summary = admin.get("/v1/insights/summary").json()
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
    return result


def _figures(view: dict[str, Any], questions: Sequence[Question]) -> dict[str, Any]:
    from citegate.answers.feedback import normalize_question

    label_of = {normalize_question(q.forms[f]): q for q in questions for f in q.forms}
    result: dict[str, Any] = {}
    pairs = []
    zh_joined = []
    by_label_groups: dict[str, Counter[str]] = defaultdict(Counter)
    for group in view["groups"]:
        for item in group["questions"]:
            q = label_of.get(normalize_question(item["question"]))
            if q is None:  # a fresh question of a refresh timing
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
    return result


def replay(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.manuals import service

    questions = load_set()
    asks = extended_schedule(questions, args.asks)
    checkpoints = sorted({c for c in (args.checkpoints or []) if 0 < c < len(asks)} | {len(asks)})
    work = args.reuse or Path(tempfile.mkdtemp(prefix="citegate-insights-"))
    env = {
        "CITEGATE_INSIGHTS_THRESHOLD": str(args.threshold),
        "CITEGATE_ANONYMOUS_IP_RATE_LIMIT": "1000000",
        "CITEGATE_ANONYMOUS_RATE_LIMIT": "1000000",
        "CITEGATE_IP_RATE_LIMIT": "1000000",
    }
    server = service.Server(work / "data", work / "serve.log", env=env)
    result: dict[str, Any] = {"threshold": args.threshold, "asks": len(asks), "checkpoints": {}}
    print(f"work folder {work}; citegate serve starting", flush=True)
    server.start()
    fresh_at = args.fresh_offset
    try:
        admin = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {service.TOKEN}"}, timeout=900
        )
        human = httpx.Client(base_url=server.url, timeout=120)

        def next_fresh() -> list[str]:
            nonlocal fresh_at
            chosen = [FRESH[(fresh_at + i) % len(FRESH)] for i in range(args.fresh)]
            fresh_at += args.fresh
            return chosen

        if args.reuse is not None:
            result["reused"] = str(args.reuse)
            result["checkpoints"]["reused"] = measure(admin, human, questions, next_fresh(), figures=True)
            _print(result["checkpoints"]["reused"])
            _save(args.out / "insights-replay.json", result)
            return result
        started = time.perf_counter()
        for manual in MANUALS:
            pages = {p for q in questions if q.manual == manual for p in q.pages}
            root = _pages_root(manual, args.cache, pages, work / "pages")
            made = admin.post("/v1/kb", json={"kb_id": manual, "name": manual, "status": "approved"})
            made.raise_for_status()
            run = service.ingest(server, root, manual, work / f"{manual}.state", work / "cli.log", 3600)
            print(
                f"{manual}: ingested {run.ingested} of {run.files} pages, {run.chunks} chunks, {run.wall_s}s",
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
        agent = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)

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

        done = 0
        answered: list[dict[str, Any]] = []
        for index, checkpoint in enumerate(checkpoints):
            started = time.perf_counter()
            with ThreadPoolExecutor(args.workers) as pool:
                rows = list(pool.map(ask, asks[done:checkpoint]))
            answered += rows
            phase: dict[str, Any] = {
                "replay_s": round(time.perf_counter() - started, 1),
                "ask_p50_ms": round(statistics.median(r["ms"] for r in rows), 1),
            }
            print(f"replayed {checkpoint} questions ({len(rows)} in {phase['replay_s']}s)", flush=True)
            if index == 0:
                # Readers mark some answers not helpful (an answer of each of 12 answerable questions).
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
                phase["marked_not_helpful"] = marked
            phase["declined"] = sum(r["declined"] for r in rows)
            phase["low_confidence"] = sum(1 for r in rows if not r["declined"] and r["confidence"] == "low")
            done = checkpoint
            if args.snapshot:
                # The data as the replay left it, before any view: `--reuse` measures other code on it.
                server.stop()
                shutil.copytree(work / "data", work / f"data-{checkpoint}")
                server.start()
                phase["snapshot"] = str(work / f"data-{checkpoint}")
            phase.update(
                measure(admin, human, questions, next_fresh(), figures=index == 0 or args.figures_each)
            )
            result["checkpoints"][str(checkpoint)] = phase
            _print(phase)
            _save(args.out / "insights-replay.json", result)
        if args.keep:
            result["server"] = server.url
    finally:
        if not args.keep:
            server.stop()
            if args.reuse is None and not args.snapshot:
                shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    _save(args.out / "insights-replay.json", result)
    return result


# --- the fold's cost: counting signals into the rollups, before and after a change ---------------

FOLD_DAYS = 5  # the synthetic signals are spread over this many days


def _synthetic_records(tenant: str, total: int, seed: int = 11) -> list[Any]:
    """Audit records like the replay's: the planted set's questions in the replay's order, a gap
    declined (no evidence) with its nearby pages, an answerable one answered (a third with low
    confidence) citing its pages; 40% from an agent; spread over FOLD_DAYS days."""
    import datetime as dt
    import uuid

    from citegate.governance.audit import AuditRecord

    rng = random.Random(seed)
    asks = extended_schedule(load_set(), total)
    start = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
    step = dt.timedelta(days=FOLD_DAYS) / max(1, len(asks))
    records = []
    for i, (q, form, caller) in enumerate(asks):
        at = (start + i * step).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        pages = [f"{q.manual}/{p}" for p in q.pages] or [f"{q.manual}/page{rng.randrange(60)}.html"]
        nearby = (pages + [f"{q.manual}/page{rng.randrange(60)}.html" for _ in range(5)])[:5]
        declined = q.planted or rng.random() < 0.3
        records.append(
            AuditRecord(
                request_id=uuid.UUID(int=rng.getrandbits(128)).hex,
                timestamp=at,
                tenant_id=tenant,
                caller_type="agent" if caller == "agent" else "anonymous",
                caller_id="x",
                route="POST /agent/tools/ask" if caller == "agent" else "POST /answer/ask",
                status=200,
                knowledge_bases=[q.manual],
                query=q.forms[form],
                outcome="declined" if declined else "answered",
                no_answer_code="no_evidence" if declined else None,
                confidence="low" if declined or rng.random() < 0.35 else "medium",
                cited_paths=[] if declined else pages[:3],
                nearby_paths=nearby,
            )
        )
    return records


def fold_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One code version's fold, in this process (`fold` runs one per version, in turn): a fresh
    embedded stack (journaled, as `citegate serve` runs it), `--signals` signals written, then
    folded by successive refreshes (each view's budget), then `--fresh` new questions each folded
    by one refresh, then the views of the whole window."""
    import os
    import time as clock

    os.environ.update(
        {
            "RAG_DATA_ROOT": str(args.data),
            "RAG_API_TOKEN": "bench-token",
            "CITEGATE_EMBEDDER": args.embedder,
            "CITEGATE_STAGE": "bench",
        }
    )
    from citegate.governance.calls import Authorized
    from citegate.governance.policy.model import EffectiveScope, Policy
    from citegate.governance.signals import SignalLog
    from citegate.insights import service
    from citegate.insights.store import InsightsStore
    from citegate.platform import resources
    from citegate.platform.principal import Principal
    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.stack import LocalStack

    reset_settings()
    stack = LocalStack(get_settings(), poll=False).start()
    try:
        s = stack.services
        tenant = "bench-" + hashlib.sha1(str(args.data).encode()).hexdigest()[:8]
        log = SignalLog(s.table(resources.INSIGHTS))
        records = _synthetic_records(tenant, args.signals + args.fresh)
        for record in records[: args.signals]:
            log.record(record, 4_000_000_000)
        s.embedder.embed_query("warm up")
        spent = {"count_s": 0.0}
        count = getattr(InsightsStore, "count", None)  # none before the rollups

        def timed_count(self: Any, *a: Any, **k: Any) -> Any:
            t0 = clock.perf_counter()
            try:
                return count(self, *a, **k)  # type: ignore[misc]
            finally:
                spent["count_s"] += clock.perf_counter() - t0

        if count is not None:
            InsightsStore.count = timed_count  # type: ignore[method-assign]
        t0 = clock.perf_counter()
        refreshes, seen = 0, 0
        while True:
            done = service.refresh(s, tenant)
            refreshes += 1
            seen += done.seen
            if not done.remaining:
                break
        wall = clock.perf_counter() - t0
        result: dict[str, Any] = {
            "signals": seen,
            "refreshes": refreshes,
            "fold_s": round(wall, 1),
            "fold_ms_per_signal": round(wall * 1000 / max(1, seen), 1),
            "count_ms_per_signal": round(spent["count_s"] * 1000 / max(1, seen), 1),
        }
        policy = Policy.model_validate(
            {"principal_key": "agent:b", "tenant_id": tenant, "knowledge_bases": ["*"]}
        )
        call = Authorized(Principal(type="agent", id="b", tenant_id=tenant), policy, EffectiveScope())
        window = service.Window.parse("2026-10-01", "2026-10-31", 30)
        fresh_ms, view_ms, summary_ms = [], [], []
        for record in records[args.signals :]:
            log.record(record.model_copy(update={"timestamp": record.timestamp}), 4_000_000_000)
            t1 = clock.perf_counter()
            done = service.refresh(s, tenant)
            fresh_ms.append((clock.perf_counter() - t1) * 1000)
            assert done.seen >= 1, done
            t1 = clock.perf_counter()
            service.gaps(s, call, window, service.Filters())
            view_ms.append((clock.perf_counter() - t1) * 1000)
            t1 = clock.perf_counter()
            service.summary(s, call, window, service.Filters())
            summary_ms.append((clock.perf_counter() - t1) * 1000)
        for name, values in (("refresh_one", fresh_ms), ("gaps_view", view_ms), ("summary_view", summary_ms)):
            if values:
                result[f"{name}_p50_ms"] = _p(values, 0.5)
                result[f"{name}_p95_ms"] = _p(values, 0.95)
        return result
    finally:
        stack.stop()
        stack.release()


def fold(args: argparse.Namespace) -> dict[str, Any]:
    """The fold's cost per signal for each code version given (`--code`: a checkout's layers/
    folder; this checkout's by default), one after the other in this run, each on a fresh stack,
    the same signals; `--rounds` alternates them to spread the machine's load alike."""
    import os
    import subprocess

    versions = args.code or [ROOT / "layers"]
    rows: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for code in versions:
            with tempfile.TemporaryDirectory(prefix="citegate-fold-") as work:
                env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(code).resolve()), str(ROOT)]))
                command = [sys.executable, "-m", "benchmarks.insights", "fold-worker", "--data", work]
                command += [
                    "--signals",
                    str(args.signals),
                    "--fresh",
                    str(args.fresh),
                    "--embedder",
                    args.embedder,
                ]
                load = os.getloadavg()[0]
                out = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
                if out.returncode:
                    print(out.stdout[-2000:], out.stderr[-4000:], file=sys.stderr)
                    raise SystemExit(f"fold-worker failed for {code}")
                row = {"code": str(code), "round": round_, "load": round(load, 1)}
                row.update(json.loads(out.stdout.strip().splitlines()[-1]))
                rows.append(row)
                print(json.dumps(row), flush=True)
    print()
    heads = (
        "code",
        "round",
        "load",
        "signals",
        "fold ms/signal",
        "counting ms/signal",
        "refresh after one p50 / p95 ms",
        "gaps view p50 / p95 ms",
        "summary p50 / p95 ms",
    )
    print("| " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * (len(heads) - 1))
    for r in rows:
        cells = [
            r["code"],
            r["round"],
            r["load"],
            r["signals"],
            r["fold_ms_per_signal"],
            r["count_ms_per_signal"],
        ]
        for name in ("refresh_one", "gaps_view", "summary_view"):
            cells.append(f"{r.get(name + '_p50_ms')} / {r.get(name + '_p95_ms')}")
        print("| " + " | ".join(str(c) for c in cells) + " |")
    result = {"signals": args.signals, "embedder": args.embedder, "runs": rows}
    _save(args.out / "insights-fold.json", result)
    return result


def _print(r: dict[str, Any]) -> None:
    print(json.dumps(r, indent=1, ensure_ascii=False))
    print()
    if "test" not in r:
        return
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
    m = sub.add_parser("merge", help="merging groups whose centroids meet, on a split (offline)")
    m.add_argument("--split", default="dev", choices=("dev", "test"))
    m.add_argument("--embedder", default="use")
    r = sub.add_parser("replay", help="replay the planted set through a real citegate serve")
    r.add_argument("--threshold", type=float, default=None, help="default: the settings' default")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument(
        "--cache", type=Path, default=fetch.CACHE, help="the manuals' .deb cache (benchmarks.manuals.fetch)"
    )
    r.add_argument("--keep", action="store_true", help="leave the server running")
    r.add_argument("--asks", type=int, default=None, help="questions in all (default: the standard 2,788)")
    r.add_argument(
        "--checkpoints",
        type=lambda v: [int(x) for x in v.split(",") if x],
        default=None,
        help="ask counts at which to measure (comma-separated; the end always)",
    )
    r.add_argument("--fresh", type=int, default=20, help="new questions timed at each checkpoint")
    r.add_argument("--fresh-offset", type=int, default=0, help="the first of FRESH to ask")
    r.add_argument("--figures-each", action="store_true", help="group figures at every checkpoint")
    r.add_argument(
        "--snapshot",
        action="store_true",
        help="copy the data at each checkpoint, before any view (data-N in the work folder, kept)",
    )
    r.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="a work folder whose data/ an earlier replay left (a snapshot): measure only",
    )
    f = sub.add_parser("fold", help="the fold's cost per signal, for one or more code versions in turn")
    f.add_argument("--code", type=Path, action="append", help="a checkout's layers/ folder (repeatable)")
    f.add_argument("--signals", type=int, default=2000)
    f.add_argument("--fresh", type=int, default=10, help="new questions each folded by one refresh")
    f.add_argument("--rounds", type=int, default=1)
    f.add_argument("--embedder", default="hashing", help="hashing: the counting's cost, not the embedding's")
    w = sub.add_parser("fold-worker", help=argparse.SUPPRESS)
    w.add_argument("--data", type=Path, required=True)
    w.add_argument("--signals", type=int, default=2000)
    w.add_argument("--fresh", type=int, default=10)
    w.add_argument("--embedder", default="hashing")
    for p in (t, m, r, f):
        p.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args(argv)
    if args.command == "tune":
        tune(args)
    elif args.command == "merge":
        merge_grid(args)
    elif args.command == "fold":
        fold(args)
    elif args.command == "fold-worker":
        print(json.dumps(fold_worker(args)), flush=True)
    else:
        if args.threshold is None:
            from citegate.platform.settings import Settings

            args.threshold = Settings.model_fields["insights_threshold"].default
        replay(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
