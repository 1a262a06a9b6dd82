"""The workflow batch: execution names, inline or S3 work data, and the consumer's per-message outcomes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from citegate.knowledge.ingest.batch import (
    INLINE_LIMIT_BYTES,
    BatchState,
    DocumentRef,
    batch_id,
    stash_json,
    stash_vectors,
    unstash_json,
    unstash_vectors,
)
from citegate.knowledge.ingest.consumer import StartedBatch, pack, task_id_of


class Blobs:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, key: str, body: bytes, content_type: str = "") -> None:
        self.objects[key] = body

    def get(self, key: str) -> bytes:
        return self.objects[key]

    def get_json(self, key: str) -> Any:
        return json.loads(self.objects[key])


class Services:
    def __init__(self) -> None:
        self.blobs = Blobs()


def _state() -> BatchState:
    return BatchState(
        batch_id=batch_id(["t1"]), documents=[DocumentRef(task_id="t1", kb_id="k", document_id="d")]
    )


def test_a_batch_is_named_by_its_tasks_in_any_order() -> None:
    assert batch_id(["t1", "t2"]) == batch_id(["t2", "t1", "t2"]) != batch_id(["t1"])
    assert len(batch_id([f"t_{i:032x}" for i in range(100)])) <= 80  # Step Functions' name limit


def test_small_work_data_travels_inline_and_large_through_s3() -> None:
    s, state = Services(), _state()
    small = {"t1": {"text": "short"}}
    stash = stash_json(s, state, "chunks", small)  # type: ignore[arg-type]
    assert stash.inline == small and stash.key is None and not state.work_files
    large = {"t1": {"text": "x" * (INLINE_LIMIT_BYTES + 1)}}
    stash = stash_json(s, state, "chunks", large)  # type: ignore[arg-type]
    assert stash.key == f"work/{state.batch_id}/chunks.json" and state.work_files
    assert unstash_json(s, stash) == large


@pytest.mark.parametrize("rows", [3, 200])
def test_vectors_round_trip_inline_or_through_s3(rows: int) -> None:
    s, state = Services(), _state()
    vectors = np.random.default_rng(0).random((rows, 64), dtype=np.float32)
    stash = stash_vectors(s, state, vectors)  # type: ignore[arg-type]
    assert (stash.key is None) == (rows == 3)
    assert np.array_equal(unstash_vectors(s, stash), vectors)  # type: ignore[arg-type]


def test_a_failed_document_keeps_its_reason() -> None:
    state = _state()
    state.fail(state.documents[0], "the PDF is corrupt")
    dumped = BatchState.model_validate(json.loads(json.dumps(state.dump())))
    assert dumped.failed[0].error == "the PDF is corrupt" and dumped.failed[0].task_id == "t1"


def test_each_message_reports_its_own_outcome() -> None:
    started = StartedBatch(outcomes={"t1": "started"}, error=ConnectionError("no answer"))
    assert started.outcome(json.dumps({"task_id": "t1"})) == "started"
    with pytest.raises(RuntimeError, match="no answer"):
        started.outcome(json.dumps({"task_id": "t2"}))
    for bad in ["{not json", "[]", json.dumps({"task_id": 3}), json.dumps({})]:
        with pytest.raises(ValueError):
            task_id_of(bad)


def _refs(n: int) -> list[DocumentRef]:
    return [DocumentRef(task_id=f"t{i}", kb_id="kb", document_id=f"d{i}") for i in range(n)]


def _task_ids(packs: list[list[DocumentRef]]) -> list[list[str]]:
    return [[d.task_id for d in p] for p in packs]


def test_small_documents_share_executions_up_to_the_document_cap() -> None:
    packs = pack(_refs(7), {}, max_documents=3, max_bytes=1000)
    assert _task_ids(packs) == [["t0", "t1", "t2"], ["t3", "t4", "t5"], ["t6"]]


def test_executions_are_cut_by_stored_size_and_a_large_document_goes_alone() -> None:
    sizes = {"t0": 400, "t1": 400, "t2": 5000, "t3": 300, "t4": 300, "t5": 300}
    packs = pack(_refs(6), sizes, max_documents=10, max_bytes=1000)
    assert _task_ids(packs) == [["t0", "t1"], ["t2"], ["t3", "t4", "t5"]]


def test_nothing_pending_starts_nothing() -> None:
    assert pack([], {}) == []


class _ExecutionExists(Exception):
    pass


class _StepFunctions:
    """Step Functions' start_execution as the consumer meets it: names are unique."""

    class exceptions:
        ExecutionAlreadyExists = _ExecutionExists

    def __init__(self) -> None:
        self.started: dict[str, Any] = {}

    def start_execution(self, stateMachineArn: str, name: str, input: str) -> dict[str, str]:
        if name in self.started:
            raise _ExecutionExists(name)
        self.started[name] = json.loads(input)
        return {"executionArn": f"{stateMachineArn}:{name}"}


class _Starting:
    def __init__(self) -> None:
        self.stepfunctions = _StepFunctions()
        self.state_machine_arn = "arn:aws:states:us-east-1:1:stateMachine:m"

    @property
    def aws(self) -> Any:
        return self


def test_a_source_sync_message_starts_one_execution_named_after_its_run() -> None:
    """Issue 29: a sync requested over the API or by the schedule travels on the ingestion queue;
    the consumer starts it (no table read) as an execution named after the run, so a redelivery
    finds it started; a message that only looks like one is a malformed message."""
    from citegate.knowledge.ingest.consumer import message_key, start_batch, sync_of

    sync = {"kb_id": "kb", "source_id": "src_1", "run_id": "run_abc"}
    body = json.dumps({"source_sync": sync})
    s = _Starting()
    started = start_batch(s, [body])  # type: ignore[arg-type]
    assert s.stepfunctions.started == {"run_abc": {"source_sync": sync}}
    assert started.outcome(body) == "started" and message_key(body) == "sync:run_abc"
    assert start_batch(s, [body]).outcome(body) == "already-started"  # redelivered
    for bad in [
        {"source_sync": {"kb_id": "kb"}},
        {"source_sync": "run_abc"},
        {"source_sync": {**sync, "run_id": ""}},
    ]:
        assert sync_of(json.dumps(bad)) is None
        with pytest.raises(ValueError):
            message_key(json.dumps(bad))
