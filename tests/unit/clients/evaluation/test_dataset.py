"""The set-folder loader (citegate.clients.evaluation.dataset) on a folder written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citegate.clients.evaluation.dataset import DatasetError, load_dataset, passage_document, read_qrels


def _write_set(folder: Path, *, test: bool = True) -> Path:
    folder.mkdir(parents=True)
    rows = [{"id": "p1", "title": " Paris ", "text": "Paris is the capital."}, {"id": 7, "text": "untitled"}]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tp1\t1\nq1\t7\t0\nq2\t7\t2\n")
    dev = [{"id": "q1", "text": "capital?", "answers": ["Paris"]}]
    (folder / "dev.jsonl").write_text("\n".join(json.dumps(r) for r in dev))
    if test:
        rows = [{"id": "q2", "text": "x"}, {"id": "q3", "text": "y", "answers": [], "is_impossible": True}]
        (folder / "test.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return folder


def test_loads_corpus_qrels_and_splits(tmp_path: Path) -> None:
    ds = load_dataset(_write_set(tmp_path / "tiny"))
    assert ds.name == "tiny"
    assert ds.passages == {"p1": (" Paris ", "Paris is the capital."), "7": ("", "untitled")}
    assert ds.qrels == {"q1": {"p1"}, "q2": {"7"}}  # score 0 is not relevant
    assert [q.id for q in ds.dev] == ["q1"] and ds.dev[0].answers == ("Paris",)
    assert ds.dev[0].gold == frozenset({"p1"})
    impossible = ds.test[1]
    assert impossible.impossible and impossible.gold == frozenset() and impossible.answers == ()
    assert ds.has_answers


def test_only_requested_splits_are_needed(tmp_path: Path) -> None:
    folder = _write_set(tmp_path / "devonly", test=False)
    assert list(load_dataset(folder, ("dev",)).splits) == ["dev"]
    with pytest.raises(DatasetError, match=r"has no test\.jsonl"):
        load_dataset(folder, ("dev", "test"))


def test_missing_folder_unknown_split_and_bad_lines_are_dataset_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such data folder"):
        load_dataset(tmp_path / "absent")
    folder = _write_set(tmp_path / "s")
    with pytest.raises(DatasetError, match="unknown split 'train'"):
        load_dataset(folder, ("train",))
    (folder / "dev.jsonl").write_text('{"id": "q1"}\n')  # no text
    with pytest.raises(DatasetError, match="unreadable set"):
        load_dataset(folder, ("dev",))


def test_read_qrels_tolerates_a_missing_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("h\th\th\nq\td\t1")
    assert read_qrels(path) == {"q": {"d"}}


def test_passage_document_is_a_markdown_title_then_the_text() -> None:
    assert passage_document(" Paris ", "Text.") == "# Paris\n\nText."
    assert passage_document("", "Text.") == "Text."
