"""docs/results/manuals.json (merged per manual across runs) and manuals.md (rendered from it)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.manuals.scoring import BARS

RESULTS_FILE = "manuals.json"
TABLE_FILE = "manuals.md"
ORDER = ("python", "git", "postgresql")
# The manual no one tuned on (issue 27's bars apply to it); the others are tuned on their dev split.
HELD_OUT = "postgresql"


def merge(out_dir: Path, results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Write these manuals' results into manuals.json, keeping the other manuals' earlier entries."""
    path = out_dir / RESULTS_FILE
    merged: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    manuals = merged.setdefault("manuals", {})
    for name, result in results.items():
        manuals[name] = result
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n")
    return merged


def _share(summary: Mapping[str, Any], key: str) -> str:
    count, share = summary["counts"][key], summary["shares"][key]
    total = {
        "declined_in_domain": summary["unanswerable"],
        "declined_off_topic": summary["off_topic"],
    }.get(key, summary["answerable"])
    return "n/a" if share is None else f"{count}/{total} ({share:.0%})"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _ingest_cells(result: Mapping[str, Any]) -> list[str]:
    first = result["ingest"]["first"]
    return [
        f"{first['files']:,}",
        f"{first['failed']:,}",
        f"{first['wall_s']:.0f}",
        f"{result['ingest'].get('kb_chunks', first['chunks']):,}",
        f"{first['chunks_per_s']}",
    ]


def _verdicts(questions: list[dict[str, Any]]) -> str:
    counts = Counter(q["verdict"] for q in questions if q["kind"] == "answerable")
    return ", ".join(f"{verdict} {n}" for verdict, n in counts.most_common())


def split_table(manuals: Mapping[str, Mapping[str, Any]], split: str) -> list[str]:
    rows = [
        "| manual | files | failed (1st run) | ingest wall s | chunks | chunks/s | expected page in top 8 "
        "| answers right | in-domain declined | off-topic declined | ask p50 / p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in [m for m in ORDER if m in manuals] + [m for m in manuals if m not in ORDER]:
        result = manuals[name]
        summary = result.get("splits", {}).get(split, {}).get("summary")
        if summary is None:
            continue
        label = f"{name} (held out)" if name == HELD_OUT else name
        rows.append(
            f"| {label} | "
            + " | ".join(_ingest_cells(result))
            + f" | {_share(summary, 'retrieval')} | {_share(summary, 'right')} "
            f"| {_share(summary, 'declined_in_domain')} | {_share(summary, 'declined_off_topic')} "
            f"| {_ms(summary['ask_ms']['p50'])} / {_ms(summary['ask_ms']['p95'])} |"
        )
    rows.append(
        f"| **bar** (issue 27) | 1,000+ | {BARS['failed_files']} | ≤ {BARS['ingest_wall_s']:.0f} | | "
        f"| ≥ {BARS['retrieval']:.0%} | ≥ {BARS['right']:.0%} | ≥ {BARS['declined_in_domain']:.0%} "
        f"| {BARS['declined_off_topic']:.0%} | |"
    )
    return rows


def _bars_missed(result: Mapping[str, Any]) -> list[str]:
    """Where the held-out manual's test figures miss issue 27's bars, and by how much."""
    out = []
    first = result["ingest"]["first"]
    if first["failed"] > BARS["failed_files"]:
        out.append(f"{first['failed']} files failed in the first run (bar 0)")
    if first["wall_s"] > BARS["ingest_wall_s"]:
        out.append(f"the first run took {first['wall_s']:.0f} s (bar {BARS['ingest_wall_s']:.0f} s)")
    summary = result.get("splits", {}).get("test", {}).get("summary")
    if summary:
        for key in ("retrieval", "right", "declined_in_domain", "declined_off_topic"):
            share = summary["shares"][key]
            if share is not None and share < BARS[key]:
                name, bar = key.replace("_", " "), BARS[key]
                out.append(f"{name} {share:.0%} (bar {bar:.0%}, short by {bar - share:.0%})")
    return out


def render(merged: Mapping[str, Any]) -> str:
    manuals: Mapping[str, Any] = merged.get("manuals", {})
    lines = [
        "# Real manuals, end to end (`python -m benchmarks.manuals`, part of `make eval`)",
        "",
        "Debian's own documentation packages (pinned in `benchmarks/data/manuals/manifest.json`), each",
        "ingested by ONE `citegate ingest <html folder> --kb <manual>` run into a fresh `citegate serve`,",
        "then every question of the split through `POST /v1/kb/<manual>/retrieve` (top_k 8) and",
        "`POST /v1/kb/<manual>/ask` (the route's defaults). Method and the sets: docs/evaluation.md,",
        '"Real manuals"; benchmarks/data/manuals/. PostgreSQL\'s manual is held out from all tuning: issue',
        "27's bars are for its test split. Every question's answer and citations are in `manuals.json`.",
        "",
        "- **files / failed / wall / chunks/s**: the first `citegate ingest` run over a fresh knowledge base",
        "  (a user's one command), timed from outside; chunks are what the knowledge base holds at the end.",
        "- **expected page in top 8**: answerable questions with a page that states the fact among the",
        "  source names of the 8 retrieved passages.",
        "- **answers right**: answered, an accepted answer string in the answer text, and a page that",
        "  states it among the citations.",
        "- **declined**: `no_answer` true (in-domain: the manual does not say it; off-topic: nothing",
        "  in a manual could).",
        "",
    ]
    for split in ("test", "dev"):
        if not any(split in m.get("splits", {}) for m in manuals.values()):
            continue
        title = "Test (reported)" if split == "test" else "Dev (the split tuning may look at)"
        lines += [f"## {title}", "", *split_table(manuals, split), ""]
    if manuals:
        lines += ["## Per manual", ""]
    for name in [m for m in ORDER if m in manuals] + [m for m in manuals if m not in ORDER]:
        result = manuals[name]
        ingest = result["ingest"]
        first = ingest["first"]
        lines += [
            f"### {name}: {result['package']} {result['version']}",
            "",
            f"- measured at commit {result.get('commit', '?')}, {result.get('measured_at', '?')}, "
            f"load average {first.get('load_average') or result.get('load_average', '?')}; "
            f"embedder {result.get('embedder', 'use')}; "
            f"server ready in {result.get('server_ready_s', '?')} s.",
            f"- first ingest run: {first['ingested']} ingested, {first['failed']} failed of "
            f"{first['files']} files in {first['wall_s']:.0f} s, {first['chunks']:,} chunks "
            f"({first['chunks_per_s']} chunks/s).",
        ]
        reasons = first.get("failure_reasons") or {}
        if reasons:
            lines.append(
                "- failure reasons (first run): "
                + "; ".join(f"{n} × `{reason[:120]}`" for reason, n in list(reasons.items())[:4])
            )
        if len(ingest["runs"]) > 1 or ingest.get("runs_to_complete") != 1:
            complete = ingest.get("runs_to_complete") or f"not complete after {len(ingest['runs'])}"
            walls = " + ".join(f"{r['wall_s']:.0f}" for r in ingest["runs"])
            lines.append(
                f"- `citegate ingest` runs until every file was in: {complete} (wall s per run: {walls})."
            )
        lines.append(
            f"- the knowledge base holds {ingest.get('kb_documents', '?')} documents, "
            f"{ingest.get('kb_chunks', '?'):,} chunks."
            if isinstance(ingest.get("kb_chunks"), int)
            else f"- the knowledge base holds {ingest.get('kb_documents', '?')} documents."
        )
        for split in ("test", "dev"):
            questions = result.get("splits", {}).get(split, {}).get("questions")
            if questions:
                lines.append(f"- {split}, answerable questions by verdict: {_verdicts(questions)}.")
        if name == HELD_OUT:
            missed = _bars_missed(result)
            lines.append(
                "- issue 27's bars (test): "
                + ("all met." if not missed else "missed: " + "; ".join(missed) + ".")
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write(out_dir: Path, results: Mapping[str, Mapping[str, Any]]) -> Path:
    merged = merge(out_dir, results)
    path = out_dir / TABLE_FILE
    path.write_text(render(merged))
    return path
