"""The rollups on the embedded DynamoDB endpoint: a signal is counted once however many folds see
it (retried or concurrent), the views over rollups and raw edges count what the raw signals say,
signals not counted yet still show, and groups whose centroids come within the threshold merge,
keeping the absorbed group's fix mark and improvement task (idempotently).

Each test has its own tenant, and an embedder whose vectors the test chooses."""

from __future__ import annotations

import math
import threading
import uuid
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from citegate.governance.audit import AuditRecord
from citegate.governance.calls import Authorized
from citegate.governance.policy.model import EffectiveScope, Policy
from citegate.governance.signals import SignalLog
from citegate.insights import service
from citegate.insights.service import Filters, Refreshed, Window
from citegate.platform import resources
from citegate.platform.principal import Principal


class Vectors:
    """embed_query by a table: a question's vector is the angle the test gave it (in a plane)."""

    model_id = "test-angles"

    def __init__(self) -> None:
        self.angles: dict[str, float] = {}

    def embed_query(self, text: str) -> list[float]:
        angle = math.radians(self.angles[text])
        return [math.cos(angle), math.sin(angle), 0.0]


@pytest.fixture
def world(stack: Any) -> SimpleNamespace:
    tenant = "t-" + uuid.uuid4().hex[:10]
    vectors = Vectors()
    # Merging at the join threshold (the product merges only near-identical groups, at 0.8).
    settings = stack.services.settings.model_copy(update={"insights_merge_threshold": 0.65})
    s = SimpleNamespace(settings=settings, insights=stack.services.insights, embedder=vectors)
    log = SignalLog(stack.services.table(resources.INSIGHTS))
    policy = Policy.model_validate(
        {"principal_key": "agent:v", "tenant_id": tenant, "knowledge_bases": ["*"]}
    )
    call = Authorized(Principal(type="agent", id="v", tenant_id=tenant), policy, EffectiveScope())
    asked: list[dict[str, Any]] = []

    def ask(question: str, angle: float, at: str, outcome: str = "declined", confidence: str = "low") -> None:
        vectors.angles[question] = angle
        record = AuditRecord(
            request_id=uuid.uuid4().hex,
            timestamp=at,
            tenant_id=tenant,
            caller_type="anonymous",
            caller_id="x",
            route="POST /answer/ask",
            status=200,
            knowledge_bases=["kb1"],
            query=question,
            outcome=outcome,
            no_answer_code="no_evidence" if outcome == "declined" else None,
            confidence=confidence,
        )
        assert log.record(record, 4_000_000_000)
        asked.append({"at": at, "outcome": outcome, "gap": outcome == "declined" or confidence == "low"})

    return SimpleNamespace(tenant=tenant, s=s, call=call, ask=ask, asked=asked, vectors=vectors)


def _day(n: int, hour: int) -> str:
    return f"2026-10-{n:02d}T{hour:02d}:00:00.000Z"


def test_a_signal_is_counted_once_by_concurrent_and_retried_folds(world: SimpleNamespace) -> None:
    for i in range(24):
        answered = i % 3 == 0
        world.ask(
            f"q{i}",
            0.0 if i % 2 else 90.0,
            _day(1 + i % 3, 8 + i),
            "answered" if answered else "declined",
            "high",
        )
    store, tenant = world.s.insights, world.tenant
    pending = store.signals(tenant, "0000", "9999", uncounted_only=True)
    assert len(pending) == 24
    # Two folds of the same signals at once (a lease that expired under a slow fold): each signal is
    # counted by one of them only.
    done = [Refreshed(), Refreshed()]
    folds = [
        threading.Thread(target=service._Folder(world.s, tenant).fold, args=(pending, done[i]))
        for i in range(2)
    ]
    for fold in folds:
        fold.start()
    for fold in folds:
        fold.join()
    assert done[0].counted + done[1].counted == 24
    # A retried write of the same batch adds nothing.
    again = service._Folder(world.s, tenant)
    replay = Refreshed()
    again.fold(pending, replay)
    assert replay.seen == 24 and replay.counted == 0
    window = Window.parse("2026-10-01", "2026-10-03", 30)
    summary = service.summary(world.s, world.call, window, Filters())
    assert (summary["questions"], summary["answered"], summary["declined"]) == (24, 8, 16)
    assert [d["questions"] for d in summary["perDay"]] == [8, 8, 8]
    view = service.gaps(world.s, world.call, window, Filters())
    assert view["gapQuestions"] == 16 and view["ungrouped"] == 0


def test_views_over_rollups_and_raw_edges_count_what_the_signals_say(world: SimpleNamespace) -> None:
    for day in (1, 2, 3, 4):
        for hour in (3, 9, 15, 21):
            outcome = "answered" if hour == 9 else "declined"
            world.ask(f"d{day}h{hour}", 10.0 * (hour % 2), _day(day, hour), outcome, "medium")
    store, tenant = world.s.insights, world.tenant
    first = service.gaps(world.s, world.call, Window.parse("2026-10-01", "2026-10-04", 30), Filters())
    assert first["refresh"]["counted"] == 16 and first["gapQuestions"] == 12
    # A window with partial days at both ends: rollups for days 2 and 3, raw signals for the rest.
    window = Window.parse("2026-10-01T12:00:00Z", "2026-10-04T10:00:00Z", 30)
    inside = [a for a in world.asked if window.since <= a["at"] <= window.until]
    summary = service.summary(world.s, world.call, window, Filters())
    assert summary["questions"] == len(inside) == 12
    assert summary["answered"] == sum(a["outcome"] == "answered" for a in inside)
    view = service.gaps(world.s, world.call, window, Filters())
    assert view["gapQuestions"] == sum(a["gap"] for a in inside)
    # A question not counted yet (another view holds the fold's lease): the summary reads it raw,
    # the gaps view shows it as not grouped yet.
    world.ask("late one", 45.0, _day(4, 23))
    through = Window.parse("2026-10-01T12:00:00Z", "2026-10-04", 30)
    inside = [a for a in world.asked if through.since <= a["at"] <= through.until]
    assert store.take_lease(tenant, "another-view", 60)
    try:
        held = service.gaps(world.s, world.call, through, Filters())
        assert held["refresh"]["skipped"] and held["ungrouped"] == 1
        assert held["gapQuestions"] == sum(a["gap"] for a in inside) - 1
        assert service.summary(world.s, world.call, through, Filters())["questions"] == len(inside) == 15
    finally:
        store.release(tenant, "another-view", None)
    folded = service.gaps(world.s, world.call, through, Filters())
    assert folded["ungrouped"] == 0 and folded["gapQuestions"] == held["gapQuestions"] + 1


def test_groups_whose_centroids_meet_merge_keeping_the_fix_and_the_task(world: SimpleNamespace) -> None:
    store, tenant = world.s.insights, world.tenant
    window = Window.parse("2026-10-01", "2026-10-05", 30)
    world.ask("alpha", 0.0, _day(1, 1))
    world.ask("beta", 60.0, _day(1, 2))  # cos 60 = 0.5: its own group
    view = service.gaps(world.s, world.call, window, Filters())
    assert view["totalGroups"] == 2
    by_question = {g["representative"]: g["groupId"] for g in view["groups"]}
    beta = by_question["beta"]
    store.mark_group(
        tenant,
        beta,
        {"fixed_at": "2026-10-01T03:00:00.000Z", "fixed_by": "agent:v", "task_record": "task-1"},
        [],
    )
    # A question between them joins alpha (0.906 against 0.819) and pulls its centroid to 12.5
    # degrees: 0.676 from beta's, within the threshold, so the two merge.
    world.ask("between", 25.0, _day(2, 1))
    merged = service.gaps(world.s, world.call, window, Filters())
    assert merged["refresh"]["merged"] == 1, merged["refresh"]
    assert merged["totalGroups"] == 1
    # A merge keeps the totals: every question of both groups counts once, in the survivor.
    assert merged["gapQuestions"] == view["gapQuestions"] + 1 == 3
    assert service.summary(world.s, world.call, window, Filters())["questions"] == 3
    group = merged["groups"][0]
    assert group["groupId"] == by_question["alpha"] and group["mergedGroups"] == [beta]
    assert group["count"] == 3 and {q["question"] for q in group["questions"]} == {"alpha", "beta", "between"}
    assert group["improvementTask"] == "task-1" and group["improvementTasks"] == ["task-1"]
    assert group["fix"] is not None and group["fix"]["fixedAt"] == "2026-10-01T03:00:00.000Z"
    # "between" joined alpha before alpha had a fix mark: nothing counted against the mark yet.
    assert group["fix"]["afterFix"] == {"answered": 0, "gaps": 0}
    # The absorbed group's id still reaches the group that absorbed it.
    assert service.actionable_group(world.s, world.call, beta)["sk"] == by_question["alpha"]
    # Idempotent: nothing merges again, and the merged group's centroid is not folded into.
    world.ask("beta again", 60.0, _day(3, 1))
    again = service.gaps(world.s, world.call, window, Filters())
    assert again["refresh"]["merged"] == 0 and again["totalGroups"] == 1
    assert again["groups"][0]["count"] == 4
    # A gap after the mark it took over counts against it.
    assert again["groups"][0]["fix"]["afterFix"] == {"answered": 0, "gaps": 1}
    assert again["groups"][0]["fix"]["verdict"] == "unanswered"
    items = {g["sk"]: g for g in store.groups(tenant)}
    assert items[beta]["merged_into"] == by_question["alpha"]
    centroid = np.frombuffer(bytes(items[beta]["centroid"]), dtype="<f4")
    assert abs(float(centroid[1]) - math.sin(math.radians(60))) < 1e-5  # untouched since the merge


def test_folds_of_other_signals_at_once_add_to_the_same_rows_and_lose_nothing(world: SimpleNamespace) -> None:
    # Rows are written whole on the condition that their version is the one read: two folds adding
    # to the same rows at once (a lease that expired under a slow fold) retry, and no count is lost.
    store, tenant = world.s.insights, world.tenant
    world.ask("first", 0.0, _day(5, 0))
    service.refresh(world.s, tenant)  # one group, which both folds below load
    for i in range(30):
        world.ask(f"same {i}", 1.0, _day(5, 1 + i % 20), "declined" if i % 3 else "answered", "high")
    pending = store.signals(tenant, "0000", "9999", uncounted_only=True)
    assert len(pending) == 30
    done = [Refreshed(), Refreshed()]
    folds = [
        threading.Thread(target=service._Folder(world.s, tenant).fold, args=(pending[i::2], done[i]))
        for i in range(2)
    ]
    for fold in folds:
        fold.start()
    for fold in folds:
        fold.join()
    assert done[0].counted == done[1].counted == 15
    rows = store.rows(tenant, "sday", "2026-10-05", "2026-10-05")
    assert len(rows) == 1 and rows[0]["questions"] == 31 and rows[0]["answered"] == 10
    assert rows[0]["v"] >= 3  # written by the first refresh and by both folds
    window = Window.parse("2026-10-05", "2026-10-05", 30)
    view = service.gaps(world.s, world.call, window, Filters())
    assert view["gapQuestions"] == 21 and view["totalGroups"] == 1 and view["groups"][0]["answered"] == 10
    assert view["refresh"]["seen"] == 0  # nothing left to fold


def test_a_fold_starts_from_the_groups_it_left_unless_they_changed(
    world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, tenant = world.s.insights, world.tenant
    window = Window.parse("2026-10-06", "2026-10-06", 30)
    reads: list[str] = []
    groups = store.groups

    def counted_groups(tenant_id: str) -> list[dict[str, Any]]:
        if tenant_id == tenant:
            reads.append(tenant_id)
        return groups(tenant_id)

    monkeypatch.setattr(store, "groups", counted_groups)
    world.ask("kept one", 0.0, _day(6, 1))
    first = service.gaps(world.s, world.call, window, Filters())
    assert first["totalGroups"] == 1 and len(reads) == 1
    # The next view folds from memory: no group is read again, and the question joins its group.
    world.ask("kept two", 2.0, _day(6, 2))
    second = service.gaps(world.s, world.call, window, Filters())
    assert len(reads) == 1 and second["refresh"]["seen"] == 1
    assert second["totalGroups"] == 1 and second["groups"][0]["count"] == 2
    # A mark (here: fixed) changes the groups outside a fold: the next fold reads them, so an
    # answer after the mark counts against it.
    gid = second["groups"][0]["groupId"]
    store.mark_group(tenant, gid, {"fixed_at": "2026-10-06T03:00:00.000Z", "fixed_by": "agent:v"}, [])
    world.ask("kept three", 1.0, _day(6, 4), "answered", "high")
    third = service.gaps(world.s, world.call, window, Filters())
    assert len(reads) == 2
    assert third["groups"][0]["fix"]["afterFix"] == {"answered": 1, "gaps": 0}
    # Kept from there on, the count after the mark included.
    world.ask("kept four", 1.5, _day(6, 5))
    fourth = service.gaps(world.s, world.call, window, Filters())
    assert len(reads) == 2 and fourth["groups"][0]["fix"]["afterFix"] == {"answered": 1, "gaps": 1}
    assert store.group(tenant, gid)["a:2026-10-06T03:00:00.000Z:gaps"] == 1
    # Another process's fold (a new token in the state): read again.
    store.groups_changed(tenant)
    world.ask("kept five", 0.5, _day(6, 6))
    fifth = service.gaps(world.s, world.call, window, Filters())
    assert len(reads) == 3 and fifth["groups"][0]["count"] == 4


def test_a_row_of_the_first_rollups_is_counted_on(world: SimpleNamespace) -> None:
    # Rows written by the first rollups kept their counters as attributes: the fold adds to them.
    from citegate.insights.rollups import deltas, rows_pk

    store, tenant = world.s.insights, world.tenant
    signal = {"at": _day(7, 1), "kbs": ["kb1"], "caller_kind": "human", "outcome": "answered"}
    summary_row = deltas(tenant, signal, None)[0]
    table = world.s.insights._table
    table.put_item(
        Item={
            "pk": rows_pk(tenant, "sday"),
            "sk": summary_row.sk,
            "day": "2026-10-07",
            "caller_kind": "human",
            "kbs": ["kb1"],
            "questions": 5,
            "answered": 5,
            "c:high": 5,
        }
    )
    world.ask("upgraded", 0.0, _day(7, 2), "answered", "high")
    service.refresh(world.s, tenant)
    [row] = store.rows(tenant, "sday", "2026-10-07", "2026-10-07")
    assert (row["questions"], row["answered"], row["c:high"], row["v"]) == (6, 6, 6, 1)
    assert "id" not in row and row["kbs"] == ["kb1"]
