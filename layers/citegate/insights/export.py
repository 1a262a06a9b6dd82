"""The gaps and the summary as CSV or Markdown (`?format=csv|md`, or an Accept header)."""

from __future__ import annotations

import csv
import io
from typing import Any, Literal

from citegate.platform.errors import InvalidRequest

Format = Literal["json", "csv", "md"]
CONTENT_TYPES: dict[str, str] = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
}
_ACCEPTED = {"text/csv": "csv", "text/markdown": "md", "application/json": "json"}


def negotiate(format_param: str | None, accept: str | None) -> Format:
    """`format` wins; else the first of text/csv, text/markdown, application/json the Accept header
    names; else JSON."""
    if format_param:
        value = format_param.lower()
        value = "md" if value == "markdown" else value
        if value not in CONTENT_TYPES:
            raise InvalidRequest("format must be json, csv or md", details={"field": "format"})
        return value  # type: ignore[return-value]
    for part in (accept or "").split(","):
        media = part.split(";")[0].strip().lower()
        if media in _ACCEPTED:
            return _ACCEPTED[media]  # type: ignore[return-value]
    return "json"


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        # A cell starting with = + - @ is read as a formula by spreadsheets: quote it as text.
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _md(value: Any) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in rows]
    return lines


GAP_HEADER = [
    "group_id",
    "representative",
    "count",
    "distinct_questions",
    "first_seen",
    "last_seen",
    "human",
    "agent",
    "declined",
    "low_confidence",
    "not_helpful",
    "pages",
    "questions",
    "improvement_task",
    "fixed_at",
    "verdict",
]


def _gap_rows(view: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for g in view["groups"]:
        fix = g.get("fix") or {}
        rows.append(
            [
                g["groupId"],
                g["representative"],
                g["count"],
                g["distinctQuestions"],
                g["firstSeen"],
                g["lastSeen"],
                g["callers"].get("human", 0),
                g["callers"].get("agent", 0),
                g["kinds"].get("declined", 0),
                g["kinds"].get("low_confidence", 0),
                g["kinds"].get("not_helpful", 0),
                " ; ".join(p["path"] for p in g["pages"]),
                " ; ".join(f"{q['question']} ({q['count']})" for q in g["questions"]),
                g.get("improvementTask"),
                fix.get("fixedAt"),
                fix.get("verdict"),
            ]
        )
    return rows


def gaps_text(view: dict[str, Any], fmt: Format) -> str:
    rows = _gap_rows(view)
    if fmt == "csv":
        return _csv(GAP_HEADER, rows)
    window = view["window"]
    lines = [
        "# Documentation gaps",
        "",
        f"{window['since']} to {window['until']}: {view['totalGroups']} groups, "
        f"{view['gapQuestions']} questions declined, answered with low confidence or marked not helpful.",
        "",
    ]
    header = [
        "#",
        "Representative question",
        "Count",
        "Questions",
        "First seen",
        "Last seen",
        "Callers",
        "Pages nearby",
        "Task",
        "Fixed",
    ]
    table = []
    for i, (g, row) in enumerate(zip(view["groups"], rows, strict=True), 1):
        callers = ", ".join(f"{k} {v}" for k, v in sorted(g["callers"].items()))
        fix = g.get("fix") or {}
        table.append(
            [
                i,
                g["representative"],
                g["count"],
                g["distinctQuestions"],
                row[4],
                row[5],
                callers,
                row[11],
                g.get("improvementTask") or "",
                fix.get("verdict") or "",
            ]
        )
    return "\n".join(lines + _table(header, table)) + "\n"


def __pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def summary_text(view: dict[str, Any], fmt: Format) -> str:
    header = ["day", "questions", "answered", "declined", "low_confidence", "not_helpful"]
    rows = [
        [d["day"], d["questions"], d["answered"], d["declined"], d["lowConfidence"], d["notHelpful"]]
        for d in view["perDay"]
    ]
    if fmt == "csv":
        return _csv(header, rows)
    window = view["window"]
    lines = [
        "# Questions and answers",
        "",
        f"{window['since']} to {window['until']}: {view['questions']} questions, answer rate "
        f"{_pct(view['answerRate'])}, decline rate {_pct(view['declineRate'])}, "
        f"{view['notHelpful']} marked not helpful.",
        "",
        "Confidence of answers: " + ", ".join(f"{k} {v}" for k, v in view["confidence"].items()),
        "",
        "## Declines by reason",
        "",
        *_table(
            ["reason", "declined", "rate"],
            [[r, view["declinedByReason"][r], _pct(x)] for r, x in view["declineRateByReason"].items()],
        ),
        "",
        "## Top cited pages",
        "",
        *_table(["page", "citations"], [[p["path"], p["count"]] for p in view["topCitedPages"]]),
        "",
        "## Per day",
        "",
        *_table(header, rows),
    ]
    return "\n".join(lines) + "\n"
