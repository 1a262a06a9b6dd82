"""A labelled set in the BEIR-like folder format (see benchmarks/data/README.md).

corpus.jsonl        {"id", "title", "text"} per passage (any .jsonl may be stored gzipped as .jsonl.gz)
qrels.tsv           query-id<TAB>corpus-id<TAB>score, with a header; score > 0 is relevant
dev.jsonl/test.jsonl {"id", "text", "answers"?, "is_impossible"?, ...}: dev for tuning, test for reporting
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPLITS = ("dev", "test")


class DatasetError(ValueError):
    """The folder is not a set in the expected format (missing file, unreadable line)."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    answers: tuple[str, ...]  # accepted answer strings; empty when none are given
    impossible: bool  # SQuAD 2.0's unanswerable questions
    gold: frozenset[str]  # corpus ids judged relevant (qrels score > 0)


@dataclass
class Dataset:
    name: str
    passages: dict[str, tuple[str, str]]  # corpus id -> (title, text), in corpus order
    qrels: dict[str, set[str]]
    splits: dict[str, list[Query]] = field(default_factory=dict)

    @property
    def dev(self) -> list[Query]:
        return self.splits["dev"]

    @property
    def test(self) -> list[Query]:
        return self.splits["test"]

    @property
    def has_answers(self) -> bool:
        """Whether the ask path can be scored: some query carries answers or is marked unanswerable."""
        return any(q.answers or q.impossible for queries in self.splits.values() for q in queries)


def data_file(path: Path) -> Path:
    """`path`, or its gzipped twin `path.gz` when only that exists (large files travel compressed)."""
    if path.is_file() or path.suffix == ".gz":
        return path
    packed = path.with_name(path.name + ".gz")
    return packed if packed.is_file() else path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per non-blank line; reads `path.gz` when only the gzipped file is there."""
    path = data_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path: Path) -> dict[str, set[str]]:
    """query id -> relevant corpus ids (binary relevance: score > 0)."""
    qrels: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as f:
        next(f, None)  # header
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3 and float(parts[2]) > 0:
                qrels.setdefault(parts[0], set()).add(parts[1])
    return qrels


def passage_document(title: str, text: str) -> str:
    """A corpus passage as one Markdown document, the way every harness of this repository ingests it."""
    title = title.strip()
    return f"# {title}\n\n{text}" if title else text


def load_dataset(folder: Path, splits: Sequence[str] = SPLITS) -> Dataset:
    """The corpus, qrels and the requested splits of one set folder; DatasetError says what is missing."""
    if not folder.is_dir():
        raise DatasetError(f"no such data folder: {folder}")
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise DatasetError(f"unknown split {unknown[0]!r} (expected one of {', '.join(SPLITS)})")
    needed = ["corpus.jsonl", "qrels.tsv", *(f"{s}.jsonl" for s in splits)]
    missing = [name for name in needed if not data_file(folder / name).is_file()]
    if missing:
        raise DatasetError(f"{folder} has no {', '.join(missing)}")
    try:
        passages = {
            str(r["id"]): (str(r.get("title") or ""), str(r["text"]))
            for r in read_jsonl(folder / "corpus.jsonl")
        }
        qrels = read_qrels(folder / "qrels.tsv")
        queries = {s: _queries(read_jsonl(folder / f"{s}.jsonl"), qrels) for s in splits}
    except (json.JSONDecodeError, KeyError, ValueError, UnicodeDecodeError, OSError) as error:
        raise DatasetError(f"{folder}: unreadable set ({type(error).__name__}: {error})") from error
    return Dataset(folder.name, passages, qrels, queries)


def _queries(rows: list[dict[str, Any]], qrels: dict[str, set[str]]) -> list[Query]:
    out = []
    for r in rows:
        qid = str(r["id"])
        answers = r.get("answers") or []
        if not isinstance(answers, list):
            raise ValueError(f"query {qid}: answers must be a list")
        out.append(
            Query(
                id=qid,
                text=str(r["text"]),
                answers=tuple(str(a) for a in answers),
                impossible=bool(r.get("is_impossible", False)),
                gold=frozenset(qrels.get(qid, set())),
            )
        )
    return out
