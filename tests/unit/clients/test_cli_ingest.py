"""`citegate ingest`'s progress tells the truth (issue 27, issue 28): each file is counted when its
task ends, not when every file sent before it has ended, also while files are still being sent;
and finding out costs one document list per pass (plus one task read per failure), never one
request per pending task."""

from __future__ import annotations

import argparse
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from citegate.clients import cli
from citegate.clients.http_client import ApiError, CitegateClient, Credentials


class FakeService:
    """A citegate whose tasks end at set times of a fake clock; every request is recorded."""

    def __init__(self, ends: dict[str, tuple[float, str]], list_allowed: bool = True) -> None:
        self.ends = ends  # source name -> (time its task ends, "succeeded" | "failed")
        self.now = 0.0
        self.tasks: dict[str, str] = {}  # task id -> source name
        self.requests: list[tuple[float, str, str]] = []
        self.list_allowed = list_allowed

    def ended(self, name: str) -> bool:
        return self.now >= self.ends[name][0]

    def request(self, client: CitegateClient, method: str, path: str, body: Any = None) -> dict[str, Any]:
        self.requests.append((self.now, method, path))
        self.now += 0.01  # a request takes a moment
        if method == "POST" and path.endswith("/documents"):
            task_id = f"t_{len(self.tasks)}"
            self.tasks[task_id] = body["source_name"]
            self.now += 0.2  # sending a file takes longer
            return {"task_id": task_id, "status": "queued"}
        if path.endswith("/documents"):
            if not self.list_allowed:
                raise ApiError(403, {"error": "forbidden", "details": {"reason": "forbidden_tool"}})
            documents = []
            for task_id, name in self.tasks.items():
                status = "queued"
                if self.ended(name):
                    status = "indexed" if self.ends[name][1] == "succeeded" else "failed"
                documents.append(
                    {"source_name": name, "task_id": task_id, "status": status, "counts": {"children": 3}}
                )
            return {"documents": documents}
        task_id = path.rsplit("/", 1)[-1]
        name = self.tasks[task_id]
        status = self.ends[name][1] if self.ended(name) else "running"
        return {
            "task_id": task_id,
            "status": status,
            "counts": {"children": 3},
            "error": "corrupt PDF" if status == "failed" else None,
        }

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(state=str(tmp_path / "state.json"), force=False, timeout=600.0, quiet=False)


def _run(
    service: FakeService, args: argparse.Namespace, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[float, cli.FileOutcome]]:
    monkeypatch.setattr(CitegateClient, "request", lambda c, m, p, b=None: service.request(c, m, p, b))
    monkeypatch.setattr(cli.time, "sleep", service.sleep)
    monkeypatch.setattr(cli.time, "monotonic", lambda: service.now)
    seen: list[tuple[float, cli.FileOutcome]] = []
    submissions = [
        cli.Submission(
            name,
            lambda name=name: name.encode(),
            lambda c, data, name=name: str(c.post("/v1/kb/kb/documents", {"source_name": name})["task_id"]),
        )
        for name in service.ends
    ]
    with CitegateClient("http://citegate.test", Credentials()) as client:
        outcome = cli._ingest(
            client, "kb", submissions, args, "files", on_file=lambda f: seen.append((service.now, f))
        )
    assert len(outcome.files) == len(service.ends)
    return seen


# The first file's task is slow; the ones sent after it end long before it (one fails). Sending
# the eight takes about 1.7 s of the fake clock, so the first quick ones end while others are sent.
ENDS = {
    "slow.pdf": (30.0, "succeeded"),
    "a.md": (0.6, "succeeded"),
    "b.md": (1.0, "succeeded"),
    "broken.pdf": (2.0, "failed"),
    "c.md": (3.0, "succeeded"),
    "d.md": (3.2, "succeeded"),
    "e.md": (3.4, "succeeded"),
    "f.md": (3.6, "succeeded"),
}


def test_each_file_is_counted_when_its_task_ends_not_when_the_ones_before_it_do(
    args: argparse.Namespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    service = FakeService(dict(ENDS))
    seen = _run(service, args, monkeypatch)
    order = [f.name for _, f in seen]
    assert order[-1] == "slow.pdf", "the slow head does not hold back the files that ended before it"
    for at, file in seen:
        ended_at = ENDS[file.name][0]
        assert ended_at <= at <= ended_at + 1.0, (file.name, ended_at, at)  # within a pass or so
    assert {f.name: f.status for _, f in seen}["broken.pdf"] == "failed"
    assert next(f for _, f in seen if f.name == "broken.pdf").error == "corrupt PDF"
    # a.md ended while the others were still being sent, and was counted then.
    sent_last = max(t for t, method, path in service.requests if method == "POST")
    assert next(t for t, f in seen if f.name == "a.md") < sent_last
    bar = capsys.readouterr().err
    assert "8/8 files done" in bar and "8 sent" in bar and "1 failed" in bar and "24 chunks" in bar


def test_a_pass_costs_one_list_not_one_request_per_pending_task(
    args: argparse.Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = FakeService(dict(ENDS))
    _run(service, args, monkeypatch)
    lists = [t for t, method, path in service.requests if method == "GET" and path.endswith("/documents")]
    task_reads = [path for _, method, path in service.requests if method == "GET" and "/v1/tasks/" in path]
    assert len(lists) >= 5, "the slow task was watched over many passes"
    assert task_reads == ["/v1/tasks/t_3"], "only the failed task is read, for its error"
    gaps = [b - a for a, b in pairwise(lists)]
    assert min(gaps) >= cli.MIN_WATCH_INTERVAL_S - 1e-9


def test_without_the_document_list_tasks_are_read_in_order_up_to_the_first_running(
    args: argparse.Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token granted ingestion but not the document list: one task read per finished task and
    one for the first still running, per pass (the cost the code's note promises)."""
    ends = {"a.md": (0.5, "succeeded"), "b.md": (5.0, "succeeded"), "c.md": (1.0, "succeeded")}
    service = FakeService(ends, list_allowed=False)
    seen = _run(service, args, monkeypatch)
    assert [f.name for _, f in seen] == ["a.md", "b.md", "c.md"]
    reads = [(t, path) for t, method, path in service.requests if "/v1/tasks/" in path]
    by_pass: dict[float, int] = {}
    for t, _ in reads:
        by_pass[round(t, 1)] = by_pass.get(round(t, 1), 0) + 1
    assert max(by_pass.values()) <= 3
    assert sum(1 for _, path in reads if path == "/v1/tasks/t_2") <= 2, "c.md waits behind b.md"
