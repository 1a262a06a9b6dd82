"""The human rendering of a `citegate eval` report (the JSON is the report itself)."""

from __future__ import annotations

from typing import Any

HONESTY_ROWS = (
    ("declined_unanswerable", "unanswerable questions declined"),
    ("answered_gold", "answerable answered with a gold passage cited"),
    ("answered_answerable", "answerable answered at all"),
    ("citation_precision", "answers with a cited passage holding an answer"),
    ("evidence_recall", "answerable with a gold passage in the evidence"),
)
LABELS = {"ndcg@10": "nDCG@10", "mrr@10": "MRR@10"}


def render_table(report: dict[str, Any]) -> str:
    metrics: list[str] = report["metrics"]
    chosen = report.get("aggregation_chosen_on_dev")
    lines = [
        f"{report['dataset']} on {report['url']}, kb {report['kb']}: "
        f"top {report['top_k']} children per query, mapped to corpus documents",
        "",
        f"{'split':<6}{'agg':<7}{'queries':>8}{'judged':>8}"
        + "".join(f"{LABELS.get(m, m.replace('recall', 'R')):>10}" for m in metrics),
    ]
    for split, scored in report["splits"].items():
        for method, values in scored["retrieval"].items():
            mark = "*" if method == chosen else ""
            lines.append(
                f"{split:<6}{method + mark:<7}{scored['queries']:>8}{int(values['queries']):>8}"
                + "".join(f"{values[m]:>10.4f}" for m in metrics)
            )
    if chosen:
        lines.append("* aggregation chosen on dev (best nDCG@10); apply it to test")
    for split, scored in report["splits"].items():
        h = scored.get("honesty")
        if not h:
            continue
        lines += [
            "",
            f"ask, {split}: {int(h['questions'])} questions ({int(h['answerable'])} answerable, "
            f"{int(h['unanswerable'])} unanswerable), top_k {report['ask_top_k']}",
        ]
        for key, label in HONESTY_ROWS:
            if key in h:
                lines.append(f"  {label:<50}{_share(h[key]):>8}")
    if report.get("ask_skipped"):
        lines += ["", f"ask not scored: {report['ask_skipped']}"]
    ingest = report.get("ingest")
    if ingest:
        lines += [
            "",
            f"ingest: {ingest['ingested']} ingested, {ingest['skipped']} skipped (unchanged), "
            f"{ingest['failed']} failed of {ingest['passages']} passages; {ingest['chunks']} chunks; "
            f"{ingest['seconds']} s",
        ]
    lines += ["", f"{'latency (client side)':<24}{'calls':>7}{'p50 ms':>10}{'p95 ms':>10}"]
    for kind, summary in report["latency"].items():
        lines.append(f"  {kind:<22}{summary['calls']:>7}{_ms(summary['p50_ms'])}{_ms(summary['p95_ms'])}")
    notes = []
    if report.get("retrieval_fallbacks"):
        notes.append(f"{report['retrieval_fallbacks']} retrieval fallback(s): some queries ran BM25 alone")
    if report.get("unresolved_refs"):
        notes.append(f"{report['unresolved_refs']} retrieved ref(s) no longer resolve (left out)")
    waits = report.get("rate_limit_waits") or {}
    if waits.get("count"):
        notes.append(f"waited out {waits['count']} rate limit(s), {waits['seconds']} s (not in the latency)")
    run = report["run"]
    notes.append(
        f"queries and scoring {run['seconds']} s; client load average {run['client_loadavg'] or 'n/a'}"
    )
    return "\n".join([*lines, "", *notes])


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ms(value: float | None) -> str:
    return f"{'n/a':>10}" if value is None else f"{value:>10.1f}"
