"""Judge the answers a run already gave against the labels as they are now (no service, no model).

When the labels change (a blind audit adds a page that also states a fact, or the manual's own
wording of an answer), the figures must move only because of the labels: this re-judges every
stored outcome of `manuals.json` (answer text, citations, retrieved pages, declines) with
`scoring.judge` and prints each split's counts under the old and the new labels side by side.

    python -m benchmarks.manuals.rescore docs/results/manuals.json            # compare
    python -m benchmarks.manuals.rescore docs/results/manuals.json --write    # and rewrite it (+ .md)
    python -m benchmarks.manuals.rescore FILE --sets DIR                      # labels from DIR
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.manuals import report, scoring
from benchmarks.manuals.sets import SETS, Question, load_split

MEASURES = ("retrieval", "right", "cited_expected", "declined_in_domain", "declined_off_topic")


def _as_response(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The ask route's response as far as `scoring.judge` reads it, rebuilt from a stored outcome."""
    response: dict[str, Any] = {
        "answer": stored.get("answer") or "",
        "no_answer": bool(stored.get("declined")),
        "citations": [
            {"source_name": c.get("page", ""), **{k: c.get(k, "") for k in ("heading", "anchor", "snippet")}}
            for c in stored.get("cited") or []
        ],
        "stats": {"confidence": stored.get("confidence")},
        "no_answer_reason": stored.get("no_answer_reason"),
    }
    error = (stored.get("extra") or {}).get("error")
    if error:
        response["error"] = error
    return response


def rejudge(question: Question, stored: Mapping[str, Any]) -> dict[str, Any]:
    """One stored outcome judged again under `question`'s labels (its id and text must match)."""
    if question.id != stored.get("id") or question.text != stored.get("text"):
        raise ValueError(
            f"{stored.get('id')}: the stored question is not {question.id}'s (text or id differ)"
        )
    outcome = scoring.judge(
        question,
        list(stored.get("retrieved") or []),
        _as_response(stored),
        ask_ms=float(stored.get("ask_ms", math.nan)),
        retrieve_ms=float(stored.get("retrieve_ms", math.nan)),
    )
    outcome.extra = {**(stored.get("extra") or {}), **outcome.extra}
    return outcome.to_json()


def rescore(merged: Mapping[str, Any], sets: Path = SETS) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    """(the results re-judged under the labels in `sets`, rows of old and new counts per split)."""
    manuals = dict(merged.get("manuals") or {})
    rows: list[tuple[str, ...]] = []
    out: dict[str, Any] = {}
    for name, result in manuals.items():
        result = dict(result)
        splits = dict(result.get("splits") or {})
        for split, entry in splits.items():
            labels = {q.id: q for q in load_split(name, split, sets)}
            # A question replaced since the run (its text differs) was never asked: it is left out
            # of both columns (and of a rewritten file), so old and new count the same questions.
            asked = list(entry.get("questions") or [])
            stored = [s for s in asked if s.get("id") in labels and labels[s["id"]].text == s.get("text")]
            if not stored:
                raise ValueError(f"{name} {split}: no stored questions to re-judge")
            judged = [rejudge(labels[s["id"]], s) for s in stored]
            old = scoring.summarise([scoring.Outcome(**s) for s in stored])["counts"]
            left_out = (
                f" ({len(asked) - len(stored)} replaced question(s) left out)"
                if len(stored) < len(asked)
                else ""
            )
            summary = scoring.summarise([scoring.Outcome(**o) for o in judged])
            new = summary["counts"]
            totals = {
                "retrieval": summary["answerable"],
                "right": summary["answerable"],
                "cited_expected": summary["answerable"],
                "declined_in_domain": summary["unanswerable"],
                "declined_off_topic": summary["off_topic"],
            }
            rows.append((name, split + left_out, *(f"{old[m]} -> {new[m]} of {totals[m]}" for m in MEASURES)))
            splits[split] = {**entry, "summary": summary, "questions": judged}
        result["splits"] = splits
        out[name] = result
    return {**merged, "manuals": out}, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.manuals.rescore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("results", type=Path, help="a manuals.json written by python -m benchmarks.manuals")
    parser.add_argument("--sets", type=Path, default=SETS, help="the labels' folder (default: the repo's)")
    parser.add_argument("--write", action="store_true", help="rewrite the results (and manuals.md) in place")
    args = parser.parse_args(argv)
    merged = json.loads(args.results.read_text(encoding="utf-8"))
    judged, rows = rescore(merged, args.sets)
    header = ("manual", "split", *MEASURES)
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.write:
        args.results.write_text(json.dumps(judged, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (args.results.parent / report.TABLE_FILE).write_text(report.render(judged), encoding="utf-8")
        print(f"wrote {args.results} and {args.results.parent / report.TABLE_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
