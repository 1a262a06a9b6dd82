"""Check a manual's labelled question set against the manual's pages.

Usage: python benchmarks/data/manuals/check_labels.py --manual python --root <html root>

For every answerable question: each listed page exists, and each answer string occurs
(normalised: case-folded, whitespace collapsed, ``[n]`` markers removed) in the visible text
of at least one listed page (text outside <script>/<style>, tags stripped, entities decoded).
For every unanswerable question whose ``note`` marks ``absent: <identifier>``: the identifier
occurs in no file of the manual that ``citegate ingest`` would read (raw bytes,
case-insensitively, so hrefs and anchors count too). Also: counts per kind, id format and
numbering, field shapes, and the dev/test split rule of benchmarks/data/README.md.
Exits 1 with the list of problems, 0 when there are none. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNTS = {"answerable": 60, "unanswerable": 30, "off_topic": 10}
# What `citegate ingest <root>` reads (layers/citegate/clients/cli.py INGEST_SUFFIXES).
INGESTED_SUFFIXES = {".md", ".markdown", ".txt", ".text", ".pdf", ".html", ".htm"}
# Block-level tags end a run of text: stripping them must not glue two words together.
BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "div", "dl", "dt",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot",
    "th", "thead", "tr", "ul", "title", "body", "head", "html",
}  # fmt: skip
MARKER = re.compile(r"\[\d+\]")
# `absent: name` or, for a name with spaces, `absent: `git flow`` (in backticks).
ABSENT = re.compile(r"absent:\s*(?:`([^`]+)`|([^\s`,;]+))")


class _VisibleText(HTMLParser):
    """Collects the text a reader sees: no <script>/<style>, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in BLOCK_TAGS:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in BLOCK_TAGS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def normalise(text: str) -> str:
    """Case-folded, ``[n]`` markers removed, whitespace collapsed (the format's comparison)."""
    return " ".join(MARKER.sub("", text).lower().split())


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    return normalise("".join(parser.parts))


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def split_ids(ids: list[str]) -> tuple[list[str], list[str]]:
    """benchmarks/data/README.md: sort as plain strings; even indexes dev, odd test."""
    ordered = sorted(ids)
    return ordered[0::2], ordered[1::2]


def read_jsonl(path: Path, problems: list[str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    if not path.is_file():
        problems.append(f"{path.name}: missing")
        return rows
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            problems.append(f"{path.name}:{number}: not JSON ({error})")
    return rows


def check_shape(row: dict[str, object], manual: str, problems: list[str]) -> None:
    qid, kind = str(row.get("id")), row.get("kind")
    if kind not in COUNTS:
        problems.append(f"{qid}: unknown kind {kind!r}")
        return
    if not re.fullmatch(rf"{re.escape(manual)}-{kind}-\d{{3}}", qid):
        problems.append(f"{qid}: id is not {manual}-{kind}-NNN")
    if not isinstance(row.get("text"), str) or not str(row.get("text")).strip():
        problems.append(f"{qid}: empty text")
    if not isinstance(row.get("note"), str) or not str(row.get("note")).strip():
        problems.append(f"{qid}: empty note")
    pages, answers = row.get("pages"), row.get("answers")
    if not isinstance(pages, list) or not isinstance(answers, list):
        problems.append(f"{qid}: pages and answers must be lists")
        return
    if kind == "answerable":
        if not pages or not answers:
            problems.append(f"{qid}: answerable needs pages and answers")
        for answer in answers:
            if not isinstance(answer, str) or not 2 <= len(answer) <= 60:
                problems.append(f"{qid}: answer {answer!r} is not a string of 2 to 60 characters")
    elif pages or answers:
        problems.append(f"{qid}: {kind} must have empty pages and answers")


def check(manual: str, root: Path, folder: Path) -> tuple[list[str], dict[str, int]]:
    problems: list[str] = []
    rows = read_jsonl(folder / "queries.jsonl", problems)
    stats = {"questions": len(rows), "answers_checked": 0, "absent_checked": 0}
    if not rows:
        problems.append("queries.jsonl: no questions")
        return problems, stats
    for row in rows:
        check_shape(row, manual, problems)

    ids = [str(row.get("id")) for row in rows]
    duplicates = sorted({qid for qid in ids if ids.count(qid) > 1})
    if duplicates:
        problems.append(f"duplicate ids: {duplicates}")
    for kind, wanted in COUNTS.items():
        got = sorted(qid for qid in set(ids) if qid.startswith(f"{manual}-{kind}-"))
        if len(got) != wanted:
            problems.append(f"{kind}: {len(got)} questions, want {wanted}")
        expected = [f"{manual}-{kind}-{n:03d}" for n in range(1, len(got) + 1)]
        if got != expected:
            problems.append(f"{kind}: ids are not numbered 001..{len(got):03d} without gaps")

    dev_ids, test_ids = split_ids(ids)
    for name, wanted_ids in (("dev.jsonl", dev_ids), ("test.jsonl", test_ids)):
        got_rows = read_jsonl(folder / name, problems)
        by_id = {str(r.get("id")): r for r in rows}
        if sorted(str(r.get("id")) for r in got_rows) != wanted_ids:
            problems.append(f"{name}: ids do not follow the split rule")
        for written in got_rows:
            original = by_id.get(str(written.get("id")))
            if original is None:
                problems.append(f"{name}: {written.get('id')} is not in queries.jsonl")
            elif original != written:
                problems.append(f"{name}: {written.get('id')} differs from queries.jsonl")

    texts: dict[str, str] = {}

    def page_text(page: str) -> str | None:
        if page not in texts:
            path = root / page
            if not path.is_file():
                return None
            texts[page] = visible_text(path.read_text(encoding="utf-8", errors="replace"))
        return texts[page]

    for row in rows:
        qid = str(row.get("id"))
        pages = [str(p) for p in _list(row.get("pages"))]
        if row.get("kind") != "answerable":
            continue
        found_texts = []
        for page in pages:
            text = page_text(page)
            if text is None:
                problems.append(f"{qid}: page {page} does not exist under {root}")
            else:
                found_texts.append(text)
        for answer in _list(row.get("answers")):
            stats["answers_checked"] += 1
            if found_texts and not any(normalise(str(answer)) in t for t in found_texts):
                problems.append(f"{qid}: answer {answer!r} occurs in none of {pages}")

    absent = [
        (str(row.get("id")), name)
        for row in rows
        if row.get("kind") == "unanswerable"
        for quoted, bare in ABSENT.findall(str(row.get("note", "")))
        for name in [quoted or bare]
    ]
    if absent:
        corpus = [
            (path.relative_to(root).as_posix(), path.read_bytes().lower())
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix.lower() in INGESTED_SUFFIXES
        ]
        if not corpus:
            problems.append(f"no pages under {root}")
        for qid, name in absent:
            stats["absent_checked"] += 1
            needle = name.rstrip(".)").lower().encode()
            hits = [rel for rel, data in corpus if needle in data]
            if hits:
                problems.append(f"{qid}: 'absent' {name!r} occurs in {hits[:3]}")
    marked = {qid for qid, _ in absent}
    unanswerable = [r for r in rows if r.get("kind") == "unanswerable"]
    if unanswerable and len(marked) * 2 < len(unanswerable):
        problems.append(
            f"only {len(marked)} of {len(unanswerable)} unanswerable questions name an absent "
            "identifier; at least half must"
        )
    return problems, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manual", required=True, help="python | git | postgresql")
    parser.add_argument("--root", required=True, type=Path, help="the manual's HTML root")
    parser.add_argument("--folder", type=Path, help="the set's folder (default: beside this file)")
    args = parser.parse_args(argv)
    folder = args.folder or HERE / args.manual
    problems, stats = check(args.manual, args.root, folder)
    summary = (
        f"{args.manual}: {stats['questions']} questions, {stats['answers_checked']} answer strings "
        f"and {stats['absent_checked']} absent identifiers checked against {args.root}"
    )
    if problems:
        print(f"{summary}: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(f"{summary}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
