"""The remote runner (citegate.clients.evaluation.remote) and its table, with a scripted client in place
of HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citegate.clients.evaluation import remote
from citegate.clients.evaluation.dataset import Dataset, Query
from citegate.clients.evaluation.remote import RemoteOptions, run_remote
from citegate.clients.evaluation.report import render_table

# ref id -> (corpus id, chunk text); r9 was deleted after it was retrieved.
REFS = {
    "r1": ("paris", "Paris is the capital of France."),
    "r2": ("lyon", "Lyon is on the Rhone."),
    "r3": ("lyon", "Lyon has silk workers."),
    "r4": ("paris", "The Seine crosses Paris."),
}


class ScriptedClient:
    """Answers the three routes the runner calls, from fixed tables, and records the calls."""

    url = "http://scripted"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        # query text -> (ref, score) best first
        self.retrieve = {
            "capital of France": [("r1", 0.9), ("r2", 0.5), ("r3", 0.45)],
            "silk city": [("r9", 0.7), ("r1", 0.6), ("r3", 0.55), ("r2", 0.5)],
            "moon base": [("r2", 0.2)],
        }

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((path, body))
        route = path.rsplit("/", 1)[1]
        if route == "retrieve":
            hits = self.retrieve[body["query"]][: body["top_k"]]
            results = [{"ref_id": r, "chunk_text": REFS.get(r, ("", "gone"))[1], "score": s} for r, s in hits]
            return {"results": results, "stats": {"fallbacks": []}}
        if route == "resolve_refs":
            known = [r for r in body["ref_ids"] if r in REFS]
            return {
                "citations": [{"ref_id": r, "source_name": REFS[r][0], "snippet": "…"} for r in known],
                "missing": [r for r in body["ref_ids"] if r not in REFS],
            }
        assert route == "ask"
        if body["question"] == "moon base":
            return {"no_answer": True, "citations": [], "answer": "no"}
        cited = "r1" if body["question"] == "capital of France" else "r2"
        return {
            "no_answer": False,
            "answer": "…",
            "citations": [{"ref_id": cited, "source_name": REFS[cited][0], "snippet": "short"}],
        }


def _dataset() -> Dataset:
    queries = {
        "dev": [Query("d1", "silk city", ("silk",), False, frozenset({"lyon"}))],
        "test": [
            Query("t1", "capital of France", ("Paris",), False, frozenset({"paris"})),
            Query("t2", "moon base", (), True, frozenset()),
        ],
    }
    qrels = {"d1": {"lyon"}, "t1": {"paris"}}
    return Dataset("tiny", {k: ("", v) for k, v in REFS.values()}, qrels, queries)


def _run(client: ScriptedClient, **options: Any) -> dict[str, Any]:
    return run_remote(client, _dataset(), RemoteOptions(kb="kb1", **options))  # type: ignore[arg-type]


def test_retrieval_scores_per_split_and_aggregation() -> None:
    client = ScriptedClient()
    report = _run(client, splits=("dev", "test"))
    dev = report["splits"]["dev"]["retrieval"]
    # Children count by rank (1 / rank; r9 is gone but held rank 1). max: paris (1/2) before lyon
    # (1/3); top2: lyon (1/3 + 1/4) before paris.
    assert dev["max"]["mrr@10"] == 0.5 and dev["top2"]["mrr@10"] == 1.0
    assert report["aggregation_chosen_on_dev"] == "top2"
    test = report["splits"]["test"]
    assert test["queries"] == 2 and test["retrieval"]["max"]["queries"] == 1  # t2 has no qrels
    assert test["retrieval"]["max"]["recall@5"] == 1.0 and test["retrieval"]["max"]["ndcg@10"] == 1.0
    assert report["metrics"] == ["ndcg@10", "recall@5", "recall@10", "recall@50", "mrr@10"]
    assert report["unresolved_refs"] == 1  # r9
    assert "honesty" not in test and report["ask_top_k"] is None


def test_refs_are_resolved_once_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "RESOLVE_BATCH", 3)
    client = ScriptedClient()
    _run(client, splits=("dev", "test"))
    resolved = [body["ref_ids"] for path, body in client.calls if path.endswith("/resolve_refs")]
    # dev retrieves r9, r1, r3, r2 (two batches of at most 3); test's refs are all known by then.
    assert resolved == [["r9", "r1", "r3"], ["r2"]]
    assert all(path.startswith("/v1/kb/kb1/") for path, _ in client.calls)


def test_ask_scores_honesty_and_latency_per_call_type() -> None:
    client = ScriptedClient()
    report = _run(client, splits=("test",), ask=True)
    h = report["splits"]["test"]["honesty"]
    assert (h["questions"], h["answerable"], h["unanswerable"]) == (2, 1, 1)
    assert h["declined_unanswerable"] == 1.0 and h["answered_gold"] == 1.0
    # The cited text is the retrieved chunk's full text, not the citation's snippet ("short").
    assert h["citation_precision"] == 1.0 and h["evidence_recall"] == 1.0
    asked = [body for path, body in client.calls if path.endswith("/ask")]
    assert [b["top_k"] for b in asked] == [8, 8]
    assert set(report["latency"]) == {"retrieve", "resolve_refs", "ask"}
    assert report["latency"]["retrieve"]["calls"] == 2 and report["latency"]["ask"]["calls"] == 2
    json.dumps(report, allow_nan=False)  # NaN would not be JSON


def test_empty_denominators_are_null_and_limit_and_top_k_apply() -> None:
    client = ScriptedClient()
    report = _run(client, splits=("test",), ask=True, limit=1, top_k=5)
    h = report["splits"]["test"]["honesty"]
    assert h["questions"] == 1 and "declined_unanswerable" not in h
    report = _run(ScriptedClient(), splits=("dev",), ask=True, top_k=5)
    assert report["metrics"] == ["ndcg@10", "recall@5", "mrr@10"]  # no recall deeper than retrieved
    retrieved = [b["top_k"] for p, b in client.calls if p.endswith("/retrieve")]
    assert retrieved == [5]


def test_table_shows_every_figure() -> None:
    report = _run(ScriptedClient(), splits=("dev", "test"), ask=True)
    report["ingest"] = {"passages": 4, "ingested": 3, "skipped": 1, "failed": 0, "chunks": 4, "seconds": 1.0}
    table = render_table(report)
    assert "top2*" in table and "chosen on dev" in table
    assert "R@50" in table and "nDCG@10" in table
    assert "unanswerable questions declined" in table
    assert "3 ingested, 1 skipped" in table
    for kind in ("retrieve", "resolve_refs", "ask"):
        assert f"  {kind} " in table


def test_ask_on_a_set_without_answers_is_skipped_with_a_note() -> None:
    ds = _dataset()
    ds.splits = {"test": [Query("t1", "capital of France", (), False, frozenset({"paris"}))]}
    client = ScriptedClient()
    report = run_remote(client, ds, RemoteOptions(kb="kb1", ask=True))  # type: ignore[arg-type]
    assert "honesty" not in report["splits"]["test"] and report["ask_skipped"]
    assert not any(path.endswith("/ask") for path, _ in client.calls)
    assert "ask not scored" in render_table(report)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_one_split_has_no_chosen_aggregation_unless_dev(split: str) -> None:
    report = _run(ScriptedClient(), splits=(split,))
    assert ("aggregation_chosen_on_dev" in report) is (split == "dev")
