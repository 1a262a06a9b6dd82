"""`citegate eval` as a user runs it: a tiny labelled set against a real `citegate serve` over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import run

PASSAGES = {
    "mars": ("Mars", "Olympus Mons on Mars is the tallest volcano in the solar system, about 22 km high."),
    "tea": ("Tea", "Green tea is brewed with water at 80 degrees Celsius for two minutes."),
    "pharos": ("Pharos", "The Pharos of Alexandria was a lighthouse built in the third century BC."),
    "wall": ("Great Wall", "The Great Wall of China is more than 21,000 km long."),
    "penguins": ("Penguins", "Emperor penguins breed during the Antarctic winter on sea ice."),
    "espresso": ("Espresso", "Espresso is made by forcing hot water through finely ground coffee beans."),
}
DEV = [
    {"id": "d1", "text": "Which lighthouse stood at Alexandria?", "answers": ["Pharos"]},
    {"id": "d2", "text": "How long is the Great Wall of China?", "answers": ["21,000 km"]},
]
TEST = [
    {"id": "t1", "text": "How high is the Olympus Mons volcano on Mars?", "answers": ["22 km"]},
    {"id": "t2", "text": "At what temperature is green tea brewed?", "answers": ["80 degrees"]},
    {"id": "t3", "text": "What is the population of Reykjavik?", "answers": [], "is_impossible": True},
]
QRELS = {"d1": "pharos", "d2": "wall", "t1": "mars", "t2": "tea"}


@pytest.fixture
def server(server_factory: Any) -> Any:
    return server_factory({"CITEGATE_EMBEDDER": "hashing"}).start()


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    corpus = [{"id": pid, "title": title, "text": text} for pid, (title, text) in PASSAGES.items()]
    for name, rows in (("corpus", corpus), ("dev", DEV), ("test", TEST), ("queries", DEV + TEST)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    qrels = "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def test_eval_ingests_then_scores_retrieval_honesty_and_latency(
    server: Any, tiny: Path, tmp_path: Path
) -> None:
    state, out = tmp_path / "state.json", tmp_path / "report.json"
    args = ["eval", str(tiny), "--kb", "tiny", "--split", "both", "--ask", "--state", str(state)]
    first = run(server, *args, "--ingest", "--json", "--out", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)
    assert json.loads(out.read_text()) == report
    assert report["ingest"] | {"seconds": 0} == {
        "passages": 6,
        "ingested": 6,
        "skipped": 0,
        "failed": 0,
        "chunks": report["ingest"]["chunks"],
        "seconds": 0,
    }
    assert report["ingest"]["chunks"] >= 6
    assert report["metrics"] == ["ndcg@10", "recall@5", "recall@10", "recall@50", "mrr@10"]
    test = report["splits"]["test"]
    assert test["queries"] == 3
    for method in ("max", "top2"):
        # Each answerable test question names its only relevant passage: retrieved in the top 5.
        assert test["retrieval"][method]["queries"] == 2  # the unanswerable one has no qrels
        assert test["retrieval"][method]["recall@5"] == 1.0
        assert test["retrieval"][method]["mrr@10"] == 1.0
    assert report["splits"]["dev"]["retrieval"]["max"]["recall@5"] == 1.0
    assert report["aggregation_chosen_on_dev"] in ("max", "top2")
    honesty = test["honesty"]
    assert (honesty["questions"], honesty["answerable"], honesty["unanswerable"]) == (3, 2, 1)
    # Deterministic here (hashing embedder, extractive answerer): both answered from the gold passage,
    # whose text holds the answer; nothing in the corpus is about Reykjavik, so it is declined.
    for share in ("answered_gold", "citation_precision", "evidence_recall", "declined_unanswerable"):
        assert honesty[share] == 1.0, honesty
    latency = report["latency"]
    assert latency["retrieve"]["calls"] == 5 and latency["ask"]["calls"] == 5
    assert latency["resolve_refs"]["calls"] >= 1
    assert 0 < latency["retrieve"]["p50_ms"] <= latency["retrieve"]["p95_ms"]
    assert report["retrieval_fallbacks"] == 0 and report["unresolved_refs"] == 0

    # Again, as a table: the corpus is skipped (resumable) and the figures are the same.
    again = run(server, *args, "--ingest")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 ingested, 6 skipped (unchanged)" in again.stdout
    assert "R@50" in again.stdout and "unanswerable questions declined" in again.stdout
    recall_line = next(line for line in again.stdout.splitlines() if line.startswith("test  max"))
    assert recall_line.split()[2:4] == ["3", "2"]  # queries, judged


def test_eval_exit_codes(server: Any, tiny: Path, tmp_path: Path) -> None:
    missing = run(server, "eval", str(tmp_path / "nowhere"), "--kb", "tiny")
    assert missing.returncode == 2 and "no such data folder" in missing.stderr
    (tiny / "dev.jsonl").unlink()
    no_split = run(server, "eval", str(tiny), "--kb", "tiny", "--split", "dev")
    assert no_split.returncode == 2 and "has no dev.jsonl" in no_split.stderr
    too_deep = run(server, "eval", str(tiny), "--kb", "tiny", "--top-k", "100")
    assert too_deep.returncode == 2 and "--top-k" in too_deep.stderr
    no_kb = run(server, "eval", str(tiny), "--kb", "absent")  # not ingested, so not there
    assert no_kb.returncode == 1 and "kb_not_found" in no_kb.stderr
    denied = run(server, "eval", str(tiny), "--kb", "tiny", token="wrong-token")
    assert denied.returncode == 3
