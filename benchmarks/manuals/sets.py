"""The labelled question sets on real manuals (benchmarks/data/manuals/<manual>/): reading and checking.

The format and the dev/test rule are benchmarks/data/README.md's (sort the ids as plain strings,
index 0, 2, 4, ... is dev, 1, 3, 5, ... is test); `problems` lists every way a set breaks them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETS = ROOT / "benchmarks" / "data" / "manuals"
MANUALS = ("python", "git", "postgresql")
KINDS = ("answerable", "unanswerable", "off_topic")
COUNTS = {"answerable": 60, "unanswerable": 30, "off_topic": 10}
SPLITS = ("dev", "test")
FIELDS = {"id", "text", "kind", "pages", "answers", "note"}
ANSWER_CHARS = (2, 60)


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    kind: str
    pages: tuple[str, ...]
    answers: tuple[str, ...]
    note: str

    @property
    def answerable(self) -> bool:
        return self.kind == "answerable"


def read_questions(path: Path) -> list[Question]:
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        questions.append(
            Question(
                id=row["id"],
                text=row["text"],
                kind=row["kind"],
                pages=tuple(row.get("pages") or ()),
                answers=tuple(row.get("answers") or ()),
                note=row.get("note", ""),
            )
        )
    return questions


def split_ids(ids: list[str]) -> dict[str, list[str]]:
    """The project's rule: sorted as plain strings, even indexes dev, odd indexes test."""
    ordered = sorted(ids)
    return {"dev": ordered[0::2], "test": ordered[1::2]}


def present(root: Path = SETS) -> list[str]:
    """The manuals whose set is in `root` (a folder with queries.jsonl)."""
    return [m for m in MANUALS if (root / m / "queries.jsonl").is_file()]


def load_split(manual: str, split: str, root: Path = SETS) -> list[Question]:
    return read_questions(root / manual / f"{split}.jsonl")


def problems(manual: str, root: Path = SETS) -> list[str]:
    """Every way the manual's set departs from the shared format (empty: it keeps it)."""
    folder = root / manual
    out: list[str] = []
    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        if set(row) != FIELDS:
            out.append(f"{row.get('id')}: fields {sorted(row)} (want {sorted(FIELDS)})")
    questions = read_questions(folder / "queries.jsonl")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        out.append(f"duplicate ids: {sorted(i for i, n in Counter(ids).items() if n > 1)}")
    counts = Counter(q.kind for q in questions)
    if dict(counts) != COUNTS:
        out.append(f"counts {dict(counts)} (want {COUNTS})")
    for kind in KINDS:
        numbers = sorted(q.id for q in questions if q.kind == kind)
        want = [f"{manual}-{kind}-{n:03d}" for n in range(1, len(numbers) + 1)]
        if numbers != want:
            out.append(f"{kind} ids are not {manual}-{kind}-001 ... in order")
    texts = Counter(" ".join(q.text.lower().split()) for q in questions)
    out += [f"the question {t!r} is asked twice" for t, n in texts.items() if n > 1]
    for q in questions:
        if not q.text.strip() or not q.note.strip():
            out.append(f"{q.id}: empty text or note")
        if q.answerable:
            if not q.pages or not q.answers:
                out.append(f"{q.id}: answerable without pages or answers")
            for answer in q.answers:
                if not ANSWER_CHARS[0] <= len(answer) <= ANSWER_CHARS[1]:
                    out.append(f"{q.id}: answer {answer!r} is not {ANSWER_CHARS[0]}-{ANSWER_CHARS[1]} chars")
            for page in q.pages:
                if page.startswith("/") or "\\" in page or not re.search(r"\.(html?|txt)$", page):
                    out.append(f"{q.id}: page {page!r} is not a relative posix path to an HTML or text page")
        elif q.pages or q.answers:
            out.append(f"{q.id}: a {q.kind} question with pages or answers")
    by_id = {q.id: q for q in questions}
    for split, want_ids in split_ids(ids).items():
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            out.append(f"no {split}.jsonl")
            continue
        got = read_questions(path)
        if sorted(q.id for q in got) != want_ids:
            out.append(f"{split}.jsonl does not hold exactly the {split} ids of the split rule")
        out += [f"{split}.jsonl: {q.id} differs from queries.jsonl" for q in got if by_id.get(q.id) != q]
    if not (folder / "README.md").is_file():
        out.append("no README.md")
    return out
