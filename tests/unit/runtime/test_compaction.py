"""Compacting the journal keeps each item's last record, loses nothing appended meanwhile, and a
failure at any point leaves a journal that restores to the same state (issue 18)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from citegate.runtime import compaction
from citegate.runtime.compaction import Compactor, last_records
from citegate.runtime.journal import Journal

TABLE = "citegate-unit-counters"


def _item(key: str, value: int) -> dict[str, Any]:
    k = json.dumps([{"S": key}, None], separators=(",", ":"))
    return {"t": "item", "table": TABLE, "k": k, "item": {"counter_key": {"S": key}, "n": {"N": str(value)}}}


def _deleted(key: str) -> dict[str, Any]:
    return {"t": "del", "table": TABLE, "k": json.dumps([{"S": key}, None], separators=(",", ":"))}


def _fold(path: Path) -> dict[str, int]:
    """The state a journal of item records restores to."""
    state: dict[str, int] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        key = json.loads(record["k"])[0]["S"]
        if record["t"] == "item":
            state[key] = int(record["item"]["n"]["N"])
        else:
            state.pop(key, None)
    return state


def _no_objects(journal: Journal, digests: Any) -> Iterator[dict[str, Any]]:
    """No S3 objects: these journals hold items only (moto's S3 in this process may hold another
    test's objects)."""
    return iter(())


def _journal(tmp_path: Path, records: list[dict[str, Any]]) -> Journal:
    journal = Journal(tmp_path)
    journal.open()
    for record in records:
        journal.append(record)
    return journal


def _history() -> list[dict[str, Any]]:
    records = []
    for i in range(300):
        records.append(_item(f"k{i % 40}", i))
        if i % 7 == 0:
            records.append(_deleted(f"k{(i * 3) % 40}"))
    return records


def test_each_item_keeps_its_last_record(tmp_path: Path) -> None:
    journal = _journal(tmp_path, _history())
    before = _fold(journal.path)
    result = Compactor(journal, objects=_no_objects).compact()
    assert _fold(journal.path) == before
    assert result.lines_after == len(before) == len(journal.path.read_text().splitlines())
    assert result.lines_before == len(_history())
    journal.append(_item("after", 1))  # appends go on, to the new file
    assert _fold(journal.path) == {**before, "after": 1}


def test_records_appended_during_a_compaction_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _journal(tmp_path, _history())
    expected = _fold(journal.path)
    folding = compaction.last_records
    appended: list[int] = []

    def append_while_folding(path: Path, end: int | None = None) -> Any:
        found = folding(path, end)
        for i in range(50):  # other writers, between the fold and the swap
            with journal.lock:
                journal.append(_item(f"new{i}", i))
                appended.append(i)
        return found

    monkeypatch.setattr(compaction, "last_records", append_while_folding)
    Compactor(journal, objects=_no_objects).compact()
    assert len(appended) == 50
    assert _fold(journal.path) == {**expected, **{f"new{i}": i for i in range(50)}}


def test_concurrent_appends_and_compactions(tmp_path: Path) -> None:
    journal = _journal(tmp_path, [])
    compactor = Compactor(journal, objects=_no_objects)
    expected: dict[str, int] = {}
    stop = threading.Event()

    def write(writer: int) -> None:
        for i in range(2000):
            with journal.lock:  # as the middleware does: apply and journal under the lock
                key = f"w{writer}-{i % 25}"
                if i % 11 == 10:
                    journal.append(_deleted(key))
                    expected.pop(key, None)
                else:
                    journal.append(_item(key, i))
                    expected[key] = i

    writers = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for w in writers:
        w.start()
    compactions = 0
    while any(w.is_alive() for w in writers) and not stop.is_set():
        compactor.compact()
        compactions += 1
    for w in writers:
        w.join()
    assert compactions >= 2
    assert _fold(journal.path) == expected


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_compaction_leaves_the_journal_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    journal = _journal(tmp_path, _history())
    before = journal.path.read_bytes()

    def crash(*args: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError):
        Compactor(journal, objects=_no_objects).compact()
    monkeypatch.undo()
    assert journal.path.read_bytes() == before
    journal.append(_item("still-writing", 1))  # the journal is still the one appended to
    assert _fold(journal.path)["still-writing"] == 1
    assert (tmp_path / "journal.compacting").exists()  # left behind, as by a crash
    Compactor(journal, objects=_no_objects)  # the next start removes it
    assert not (tmp_path / "journal.compacting").exists()


def test_a_torn_last_line_is_cut_off_before_appending(tmp_path: Path) -> None:
    journal = _journal(tmp_path, [_item("a", 1), _item("b", 2)])
    journal.close()
    with journal.path.open("ab") as file:
        file.write(b'{"t":"item","table":"x","k":"[{\\"S\\":\\"c\\"}')  # a crash midway through a write
    reopened = Journal(tmp_path)
    assert len(list(reopened.records())) == 2 and reopened.lines == 2
    assert last_records(reopened.path).live == 2
    reopened.open()
    reopened.append(_item("c", 3))
    assert _fold(reopened.path) == {"a": 1, "b": 2, "c": 3}
    assert len(list(reopened.records())) == 3


def test_compaction_is_due_once_the_journal_has_grown(tmp_path: Path) -> None:
    journal = _journal(tmp_path, [_item(f"k{i}", i) for i in range(100)])
    compactor = Compactor(journal, growth=1.5, min_lines=120, objects=_no_objects)
    compactor.baseline = 100
    assert not compactor.due()
    for i in range(49):
        journal.append(_item(f"k{i}", i))
    assert not compactor.due()  # 149 lines: below 1.5 x 100
    journal.append(_item("k0", 0))
    assert compactor.due()
    compactor.compact()
    assert compactor.baseline == 100 and not compactor.due()
