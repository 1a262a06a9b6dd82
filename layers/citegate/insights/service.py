"""What the documentation is missing: gap groups and the answer summary, from question signals.

- `refresh` folds the signals written since the last refresh into the groups (one lease per
  tenant, a watermark with a look-back for calls that finished late): each gap question is
  embedded once and joins the nearest group above the threshold or starts one (grouping.py); an
  answered question is linked to the nearest group without moving it, so a group marked fixed
  shows whether its questions are now answered. No view recomputes the groups.
- `gaps` and `summary` read the signals of a time window that the caller may see (every knowledge
  base a signal names granted, its scope inside the caller's grant) and aggregate them per group or
  per day; a group's marks (fixed, recheck, improvement task) come from its own item.
- `mark_fixed` re-asks the group's most frequent questions in the caller's scope and keeps the
  result; `open_task` opens (or counts on) the improvement task of the group's representative
  question through citegate.answers.feedback, whose dedupe applies.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from citegate.answers.feedback import normalize_question
from citegate.governance.policy.model import ANY, Policy, normalize_path
from citegate.governance.signals import GAP_KINDS
from citegate.insights.grouping import Centroid, Grouper, decode, encode
from citegate.insights.rollups import (
    CONFIDENCE,
    GROUP_DAY,
    PAGE,
    QUESTION,
    REASON,
    SUMMARY_DAY,
    TEXT,
    Delta,
    as_row,
    counters,
    deltas,
)
from citegate.insights.store import Counted, InsightsStore, group_pk
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import InvalidRequest, NotFound

if TYPE_CHECKING:
    from citegate.governance.calls import Authorized
    from citegate.knowledge.embedding.base import Embedder
    from citegate.platform.settings import Settings

# A call's signal is sorted by the time the call began and written when it ends: later calls may
# have been folded in meanwhile. Answer routes end within API Gateway's 30 s; a minute covers them.
LOOKBACK = dt.timedelta(minutes=1)
LEASE_SECONDS = 60.0
FOLD_BATCH = 200  # signals folded between checks of the time spent
FOLD_BUDGET_SECONDS = 15.0  # a view folds for at most about this long (a backlog takes several views)
SAMPLES_KEPT = 20  # distinct questions kept on a group (for re-asking and tasks)
RECHECK_QUESTIONS = 5
QUESTIONS_SHOWN = 10
PAGES_SHOWN = 5


class InsightsSources(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def insights(self) -> InsightsStore: ...

    @property
    def embedder(self) -> Embedder: ...


# --- the time window and who sees a signal ----------------------------------------------------


@dataclass(frozen=True)
class Window:
    since: str
    until: str
    open_end: bool = False  # until is now (or later): the last day is whole so far

    @classmethod
    def parse(cls, since: str | None, until: str | None, default_days: int) -> Window:
        now = dt.datetime.now(dt.UTC)
        end = _instant(until, "until", end=True) if until else now
        # By default the last `default_days` days, today included, from midnight (UTC): whole
        # days, which the views read from the rollups.
        start = (
            _instant(since, "since", end=False)
            if since
            else dt.datetime.combine(end.date() - dt.timedelta(days=default_days - 1), dt.time(), dt.UTC)
        )
        if start > end:
            raise InvalidRequest("since must not be after until", details={"field": "since"})
        return cls(_iso(start), _iso(end), open_end=end >= now)


def _instant(value: str, name: str, *, end: bool) -> dt.datetime:
    """A date (YYYY-MM-DD: the whole day) or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        if len(value) == 10:
            day = dt.datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=dt.UTC)
            return day + dt.timedelta(days=1, microseconds=-1000) if end else day
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise InvalidRequest(
            f"{name} must be a date (YYYY-MM-DD) or an ISO 8601 time", details={"field": name}
        ) from error
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def _iso(value: dt.datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _within(paths: list[str] | None, granted: list[str] | None) -> bool:
    if granted is None:
        return True
    if paths is None:
        return False  # asked everywhere; the viewer may see only part of it
    prefixes = [normalize_path(g) for g in granted]
    for path in paths:
        p = normalize_path(path)
        if not any(g == "" or p == g or p.startswith(g + "/") for g in prefixes):
            return False
    return True


def visible(signal: dict[str, Any], policy: Policy) -> bool:
    """A viewer sees a signal only when it could have asked it: every knowledge base the signal
    names is granted (none named: only to a viewer granted every knowledge base), and the scope it
    was asked in lies inside the viewer's grant (projects, versions, paths)."""
    kbs = signal.get("kbs") or []
    if not kbs and ANY not in policy.knowledge_bases:
        return False
    if not all(policy.allows_kb(kb) for kb in kbs):
        return False
    grant = policy.scope
    for name, granted in (("projects", grant.projects), ("versions", grant.versions)):
        asked = signal.get(name)
        if granted is not None and (asked is None or not set(asked) <= set(granted)):
            return False
    return _within(signal.get("paths"), grant.path_prefixes)


@dataclass(frozen=True)
class Filters:
    kb: str | None = None
    kind: str | None = None  # a gap kind: declined | low_confidence | not_helpful
    caller: str | None = None  # human | agent

    def validate(self, policy: Policy) -> Filters:
        from citegate.platform.errors import DatasetNotAllowed

        if self.kind is not None and self.kind not in GAP_KINDS:
            raise InvalidRequest(
                "kind must be declined, low_confidence or not_helpful", details={"field": "kind"}
            )
        if self.caller is not None and self.caller not in ("human", "agent"):
            raise InvalidRequest("caller must be human or agent", details={"field": "caller"})
        if self.kb is not None and not policy.allows_kb(self.kb):
            raise DatasetNotAllowed(f"knowledge base {self.kb!r} is not granted", details={"kb_id": self.kb})
        return self

    def admits(self, signal: dict[str, Any]) -> bool:
        if self.kb is not None and self.kb not in (signal.get("kbs") or []):
            return False
        return self.caller is None or signal.get("caller_kind") == self.caller


# --- refresh ---------------------------------------------------------------------------------


@dataclass
class Refreshed:
    seen: int = 0  # signals folded in by this refresh
    gaps: int = 0
    new_groups: int = 0
    linked: int = 0  # answered questions linked to a group
    counted: int = 0  # signals added to the rollups by this refresh (a signal is counted once)
    merged: int = 0  # groups merged into another (their centroids came within the threshold)
    skipped: bool = False  # another refresh held the lease
    remaining: int = 0  # signals left for the next view (a backlog larger than one view's budget)
    ms: float = 0.0


def embed_questions(embedder: Embedder, questions: Iterable[str]) -> list[np.ndarray]:
    vectors = []
    for question in questions:
        row = np.asarray(embedder.embed_query(question), dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(row))
        vectors.append(row / norm if norm else row)
    return vectors


def _group_id(signal: dict[str, Any]) -> str:
    return "g" + hashlib.sha256(str(signal["sk"]).encode()).hexdigest()[:15]


def _since(mark: Any) -> str:
    if not mark:
        return "0000"
    return _iso(dt.datetime.fromisoformat(str(mark)[:23].replace("Z", "+00:00")) - LOOKBACK)


def uncounted(s: InsightsSources, tenant_id: str) -> list[dict[str, Any]]:
    """The signals not in the rollups yet: written since the last fold (or left by its budget)."""
    mark = s.insights.state(tenant_id).get("counted_watermark")
    return s.insights.signals(tenant_id, _since(mark), "9999", uncounted_only=True, view=True)


def refresh(s: InsightsSources, tenant_id: str) -> Refreshed:
    return _refresh(s, tenant_id)[0]


@dataclass
class _Kept:
    token: str
    folder: _Folder
    at: float


# The groups as this process's last fold left them, per (table, tenant): the next fold starts from
# them when no other process has changed the groups since (the state's `groups_token` is still the
# one that fold wrote), instead of reading every group's item and centroid again.
_KEPT: dict[tuple[str, str], _Kept] = {}
_KEPT_LOCK = threading.Lock()
KEEP_SECONDS = 600.0


def _kept_folder(s: InsightsSources, tenant_id: str, token: Any) -> _Folder | None:
    with _KEPT_LOCK:
        kept = _KEPT.pop((s.insights.name, tenant_id), None)  # one fold at a time uses it
    if kept is None or not token or kept.token != token or time.monotonic() - kept.at > KEEP_SECONDS:
        return None
    if kept.folder.s is not s:  # other services (settings, embedder): start afresh
        return None
    return kept.folder


def _refresh(
    s: InsightsSources, tenant_id: str
) -> tuple[Refreshed, list[dict[str, Any]], dict[str, dict[str, Any]] | None]:
    """Fold the signals not counted yet into the groups and the rollups; returns what it did, the
    signals it left for the next view (over its time budget) and the group items as it left them
    (None when another refresh held the lease)."""
    started = time.perf_counter()
    store = s.insights
    owner = uuid.uuid4().hex
    if not store.take_lease(tenant_id, owner, LEASE_SECONDS):
        return Refreshed(skipped=True), [], None
    watermark: str | None = None
    done = Refreshed()
    left: list[dict[str, Any]] = []
    folder: _Folder | None = None
    released = False
    try:
        state = store.state(tenant_id)
        mark = state.get("counted_watermark")
        pending = store.signals(tenant_id, _since(mark), "9999", uncounted_only=True)  # oldest first
        if pending:
            watermark = max(str(mark or ""), max(str(sig["sk"]) for sig in pending))
        folder = _kept_folder(s, tenant_id, state.get("groups_token")) or _Folder(s, tenant_id)
        for start in range(0, len(pending), FOLD_BATCH):
            batch = pending[start : start + FOLD_BATCH]
            folder.fold(batch, done)
            if start + FOLD_BATCH < len(pending) and time.perf_counter() - started > FOLD_BUDGET_SECONDS:
                # Well inside the lease: the rest waits for the next view, from this point on.
                watermark = str(batch[-1]["sk"])
                left = pending[start + len(batch) :]
                done.remaining = len(left)
                break
        folder.merge(done)
        token = uuid.uuid4().hex if folder.wrote or not state.get("groups_token") else state["groups_token"]
        released = store.release(tenant_id, owner, watermark, token)
        if released:
            folder.settle()
            with _KEPT_LOCK:
                _KEPT[(store.name, tenant_id)] = _Kept(token, folder, time.monotonic())
    finally:
        if not released:  # failed, or the lease was lost: leave the watermark where it was
            store.release(tenant_id, owner, None)
    done.ms = round((time.perf_counter() - started) * 1000, 2)
    return done, left, folder.items if folder is not None else None


def _kb_key(record: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(record.get("kbs") or []))


def _after_fix(item: dict[str, Any], kind: str) -> str:
    """The group item's counter of questions after its fix mark (named by the mark: a new mark
    starts from zero)."""
    return f"a:{item.get('fixed_at')}:{kind}"


class _Folder:
    """One refresh's groups (per set of knowledge bases, as centroids) and what it changed."""

    def __init__(self, s: InsightsSources, tenant_id: str) -> None:
        self.s, self.tenant = s, tenant_id
        self.wrote = False  # groups written by this fold (the kept copy's token changes)
        self.items = {g["sk"]: g for g in s.insights.groups(tenant_id)}
        self.threshold = s.settings.insights_threshold
        self.merging = s.settings.insights_merge_threshold
        self.groupers: dict[tuple[str, ...], Grouper] = {}
        for gid, g in self.items.items():
            if g.get("centroid") and not g.get("merged_into"):
                self.groupers.setdefault(_kb_key(g), self._grouper()).centroids.append(
                    Centroid(gid, decode(g["centroid"]), int(g.get("members") or 1))
                )

    def _grouper(self) -> Grouper:
        return Grouper(self.threshold, merge_threshold=self.merging)

    def settle(self) -> None:
        """After a fold: nothing is changed since (the next fold compares only what it changes)."""
        self.wrote = False
        for grouper in self.groupers.values():
            for c in grouper.centroids:
                c.changed = False

    def fold(self, batch: list[dict[str, Any]], done: Refreshed) -> None:
        # Signals grouped before the rollups existed keep their group (no embedding): only counted.
        fresh = [sig for sig in batch if not sig.get("grouped")]
        vectors = dict(
            zip(
                (str(sig["sk"]) for sig in fresh),
                embed_questions(self.s.embedder, (str(sig["question"]) for sig in fresh)),
                strict=True,
            )
        )
        touched: dict[str, dict[str, Any]] = {}
        folded: list[Counted] = []
        group_adds: dict[str, list[Delta]] = {}
        for signal in batch:
            done.seen += 1
            sk = str(signal["sk"])
            if signal.get("grouped"):
                gid = signal.get("group_id")
                grouped = str(signal["grouped"])
            elif not signal.get("gap"):
                found, _ = self.groupers.setdefault(_kb_key(signal), self._grouper()).place(vectors[sk])
                gid = found.group_id if found else None
                grouped = gid or "-"
                done.linked += int(found is not None)
            else:
                gid = self._join(signal, vectors[sk], touched, done)
                grouped = gid
            whole = signal if "pk" in signal and "request_id" in signal else None
            folded.append(Counted(sk, grouped, gid, deltas(self.tenant, signal, gid), whole))
            item = self.items.get(gid or "")
            if item and item.get("fixed_at") and str(signal["at"]) >= str(item["fixed_at"]):
                kind = "gaps" if signal.get("gap") else "answered"
                group_adds[sk] = [Delta(group_pk(self.tenant), str(gid), {}, {_after_fix(item, kind): 1})]
        # The groups first: a signal counted without its group's item would point at nothing.
        for gid in touched:
            self._save(gid)
            self.wrote = True
        counted = self.s.insights.count(self.tenant, folded, group_adds)
        done.counted += len(counted)
        for sk in counted:  # the group items as stored (they are kept for the next fold)
            for delta in group_adds.get(sk, []):
                item = self.items[delta.sk]
                for name, n in delta.counts.items():
                    item[name] = int(item.get(name) or 0) + n

    def _join(
        self, signal: dict[str, Any], vector: np.ndarray, touched: dict[str, dict[str, Any]], done: Refreshed
    ) -> str:
        done.gaps += 1
        group, new = self.groupers.setdefault(_kb_key(signal), self._grouper()).add(_group_id(signal), vector)
        done.new_groups += int(new)
        item = self.items.setdefault(group.group_id, {"sk": group.group_id, "created_at": signal["at"]})
        touched[group.group_id] = item
        if new:
            item["first_question"] = signal["question"]
        item["last_at"] = max(str(item.get("last_at") or ""), str(signal["at"]))
        item["expires_at"] = max(int(item.get("expires_at") or 0), int(signal.get("expires_at") or 0))
        item["kbs"] = sorted(set(item.get("kbs") or []) | set(signal.get("kbs") or []))
        item["samples"] = _sample(item.get("samples") or [], str(signal["question"]))
        item["_centroid"] = group
        return group.group_id

    def _centroid(self, gid: str) -> Centroid:
        item = self.items[gid]
        found = item.get("_centroid")
        if found is None:
            found = next(c for g in self.groupers.values() for c in g.centroids if c.group_id == gid)
            item["_centroid"] = found
        return cast("Centroid", found)

    def _fields(self, gid: str) -> dict[str, Any]:
        item, c = self.items[gid], self._centroid(gid)
        return {
            "centroid": encode(c.vector),
            "members": c.members,
            "created_at": item["created_at"],
            "last_at": item["last_at"],
            "expires_at": item["expires_at"],
            "kbs": item["kbs"],
            "samples": item["samples"],
            "first_question": item.get("first_question") or item["samples"][0]["q"],
            "model": getattr(self.s.embedder, "model_id", ""),
        }

    def _save(self, gid: str) -> None:
        self.s.insights.save_group(self.tenant, gid, self._fields(gid))

    def merge(self, done: Refreshed) -> None:
        """Merge groups whose centroids came within the threshold of each other as questions
        joined them: only groups changed by this refresh are compared (against every group of their
        knowledge bases), so the cost follows the new questions, not the groups."""
        for grouper in self.groupers.values():
            while (pair := grouper.meeting()) is not None:
                if not self._merge_pair(grouper, *pair):
                    break
                done.merged += 1

    def _merge_pair(self, grouper: Grouper, a: Centroid, b: Centroid) -> bool:
        def rank(c: Centroid) -> tuple[int, str, str]:
            return (-c.members, str(self.items[c.group_id].get("created_at") or ""), c.group_id)

        survivor, absorbed = sorted((a, b), key=rank)
        # Their marks as stored now (a mark set meanwhile, answers counted after a fix).
        for gid in (survivor.group_id, absorbed.group_id):
            stored = self.s.insights.group(self.tenant, gid)
            if stored is not None:
                self.items[gid].update({k: v for k, v in stored.items() if k != "centroid"})
        keep, gone = self.items[survivor.group_id], self.items[absorbed.group_id]
        merged = Grouper(
            self.merging,
            [
                Centroid("s", survivor.vector, survivor.members),
                Centroid("a", absorbed.vector, absorbed.members),
            ],
        )
        merged.absorb(*merged.centroids)
        samples = keep.get("samples") or []
        for sample in gone.get("samples") or []:
            for _ in range(int(sample["n"])):
                samples = _sample(samples, str(sample["q"]))
        sets: dict[str, Any] = {
            "centroid": encode(merged.centroids[0].vector),
            "members": survivor.members + absorbed.members,
            "created_at": min(str(keep.get("created_at") or "~"), str(gone.get("created_at") or "~")),
            "last_at": max(str(keep.get("last_at") or ""), str(gone.get("last_at") or "")),
            "expires_at": max(int(keep.get("expires_at") or 0), int(gone.get("expires_at") or 0)),
            "kbs": sorted(set(keep.get("kbs") or []) | set(gone.get("kbs") or [])),
            "samples": samples,
            "merged": [*(keep.get("merged") or []), absorbed.group_id, *(gone.get("merged") or [])],
        }
        sets.update(_merged_marks(keep, gone))
        if not self.s.insights.merge(self.tenant, survivor.group_id, sets, absorbed.group_id, utc_now()):
            return False
        keep.update(sets)
        gone["merged_into"] = survivor.group_id
        grouper.absorb(survivor, absorbed)
        self.wrote = True
        return True


def _merged_marks(keep: dict[str, Any], gone: dict[str, Any]) -> dict[str, Any]:
    """The marks a merged group keeps: its own fix mark, else the absorbed group's (with the
    answers counted after it); every improvement task of both (the survivor's first)."""
    sets: dict[str, Any] = {}
    if not keep.get("fixed_at") and gone.get("fixed_at"):
        for name in ("fixed_at", "fixed_by", "fix_note", "recheck"):
            if gone.get(name) is not None:
                sets[name] = gone[name]
        sets.update({k: v for k, v in gone.items() if k.startswith("a:")})
    elif keep.get("fixed_at") and keep.get("fixed_at") == gone.get("fixed_at"):
        for name in (_after_fix(keep, "answered"), _after_fix(keep, "gaps")):
            sets[name] = int(keep.get(name) or 0) + int(gone.get(name) or 0)
    tasks = [
        t
        for t in dict.fromkeys(
            [
                keep.get("task_record"),
                *(keep.get("task_records") or []),
                gone.get("task_record"),
                *(gone.get("task_records") or []),
            ]
        )
        if t
    ]
    if tasks:
        sets["task_records"] = tasks
        if not keep.get("task_record"):
            sets["task_record"] = tasks[0]
            if gone.get("task_at"):
                sets["task_at"] = gone["task_at"]
    return sets


def _sample(samples: list[dict[str, Any]], question: str) -> list[dict[str, Any]]:
    key = normalize_question(question)
    for sample in samples:
        if normalize_question(str(sample["q"])) == key:
            sample["n"] = int(sample["n"]) + 1
            break
    else:
        samples.append({"q": question, "n": 1})
    samples.sort(key=lambda x: -int(x["n"]))
    return samples[:SAMPLES_KEPT]


# --- views -------------------------------------------------------------------------------------


def _day(value: str, days: int) -> str:
    return (dt.date.fromisoformat(value) + dt.timedelta(days=days)).isoformat()


def split_window(window: Window, now: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """The whole days of a window (read from the rollups) and the partial ranges at its edges
    (read as raw signals: at most a day at each end). A day is whole when the window covers it
    from its start to its end, or to now (nothing is asked in the future)."""
    since, until = window.since, window.until
    first, last = since[:10], until[:10]
    start_whole = since.endswith("T00:00:00.000Z")
    end_whole = until.endswith("T23:59:59.999Z") or window.open_end or until >= now
    if first == last:
        return (first, last, []) if start_whole and end_whole else (None, None, [(since, until)])
    raws: list[tuple[str, str]] = []
    if not start_whole:
        raws.append((since, first + "T23:59:59.999Z"))
        first = _day(first, 1)
    if not end_whole:
        raws.append((last + "T00:00:00.000Z", until))
        last = _day(last, -1)
    return (first, last, raws) if first <= last else (None, None, raws)


@dataclass
class _Read:
    """What a view reads: rollup rows of whole days, plus rows made from raw signals (the partial
    days at the window's edges, counted or not, and signals not counted yet), plus the signals
    not yet folded into a group."""

    rows: list[dict[str, Any]]
    unfolded: list[dict[str, Any]]


def _read(
    s: InsightsSources, tenant: str, window: Window, kind: str, uncounted_signals: list[dict[str, Any]]
) -> _Read:
    first, last, raws = split_window(window, utc_now())
    rows = s.insights.rows(tenant, kind, first, last) if first and last else []
    unfolded: list[dict[str, Any]] = []

    def add(signal: dict[str, Any], counted: bool) -> None:
        made = deltas(tenant, signal, signal.get("group_id") if counted else None)
        if kind == SUMMARY_DAY:
            rows.append(as_row(made[0]))
        elif counted and len(made) > 1:
            rows.append(as_row(made[1]))
        elif not counted:
            unfolded.append(signal)

    for lo, hi in raws:
        for signal in s.insights.signals(tenant, lo, hi, view=True):
            add(signal, bool(signal.get("counted")))
    if first and last:
        low, high = first + "T00:00:00.000Z", last + "T23:59:59.999Z\uffff"
        for signal in uncounted_signals:
            if low <= str(signal["sk"]) <= high and not signal.get("counted"):
                add(signal, False)
    return _Read(rows, unfolded)


@dataclass
class _Agg:
    count: int = 0
    answered: int = 0  # answered questions linked to the group in the window
    first: str = ""
    last: str = ""
    callers: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    questions: Counter[str] = field(default_factory=Counter)
    texts: dict[str, str] = field(default_factory=dict)
    pages: Counter[str] = field(default_factory=Counter)
    kbs: set[str] = field(default_factory=set)
    records: set[str] = field(default_factory=set)

    def add_row(self, row: dict[str, Any]) -> None:
        n = int(row.get("n") or 0)
        if row.get("kind") == "answered":
            self.answered += n
            return
        self.count += n
        first, last = str(row.get("first") or ""), str(row.get("last") or "")
        self.first = min(self.first, first) if self.first and first else self.first or first
        self.last = max(self.last, last)
        self.callers[str(row.get("caller_kind"))] += n
        self.kinds[str(row.get("kind"))] += n
        self.reasons.update(counters(row, REASON))
        for key, count in counters(row, QUESTION).items():
            self.questions[key] += count
            if key not in self.texts and row.get(TEXT + key):
                self.texts[key] = str(row[TEXT + key])
        self.pages.update(counters(row, PAGE))
        self.kbs.update(row.get("kbs") or [])
        self.records.update(row.get("records") or [])


def _final(items: dict[str, dict[str, Any]], gid: str) -> str:
    """The group a (possibly merged) group's questions now count in."""
    for _ in range(32):  # a chain of merges; bounded against a cycle written by hand
        into = (items.get(gid) or {}).get("merged_into")
        if not into:
            break
        gid = str(into)
    return gid


def gaps(
    s: InsightsSources,
    call: Authorized,
    window: Window,
    filters: Filters,
    *,
    limit: int = 100,
    questions: int = QUESTIONS_SHOWN,
) -> dict[str, Any]:
    tenant = call.principal.tenant_id
    refreshed, left, folded = _refresh(s, tenant)
    if refreshed.skipped:  # another view is folding: what it has not counted yet is read raw
        left = uncounted(s, tenant)
    read = _read(s, tenant, window, GROUP_DAY, left)
    # The fold's group items are the stored ones as of its end: not read again.
    items = folded if folded is not None else {g["sk"]: g for g in s.insights.groups(tenant)}
    groups: dict[str, _Agg] = defaultdict(_Agg)

    def shown(record: dict[str, Any], kind: Any) -> bool:
        kind_ok = filters.kind is None or kind == filters.kind
        return kind_ok and visible(record, call.policy) and filters.admits(record)

    for row in read.rows:
        if shown(row, row.get("kind")):
            groups[_final(items, str(row["group_id"]))].add_row(row)
    pending = sum(1 for sig in read.unfolded if sig.get("gap") and shown(sig, sig["gap"]))
    ranked = sorted(
        (
            (gid, agg)
            for gid, agg in groups.items()
            if agg.count or (agg.answered and (items.get(gid) or {}).get("fixed_at"))
        ),
        key=lambda pair: (-pair[1].count, pair[1].first),
    )
    return {
        "window": {"since": window.since, "until": window.until},
        "filters": {k: v for k, v in vars(filters).items() if v is not None},
        "groups": [_group_view(gid, agg, items.get(gid) or {}, questions) for gid, agg in ranked[:limit]],
        "totalGroups": len(ranked),
        "gapQuestions": sum(agg.count for _, agg in ranked),
        "ungrouped": pending,
        "refresh": vars(refreshed),
    }


def _group_view(gid: str, agg: _Agg, item: dict[str, Any], shown: int) -> dict[str, Any]:
    top = sorted(agg.questions.items(), key=lambda kv: (-kv[1], agg.texts.get(kv[0], "")))
    representative = agg.texts.get(top[0][0], "") if top else str(item.get("first_question") or "")
    view: dict[str, Any] = {
        "groupId": gid,
        "representative": representative,
        "count": agg.count,
        "answered": agg.answered,
        "firstSeen": agg.first or None,
        "lastSeen": agg.last or None,
        "callers": dict(agg.callers),
        "kinds": dict(agg.kinds),
        "reasons": dict(agg.reasons),
        "questions": [{"question": agg.texts.get(k, ""), "count": n} for k, n in top[:shown]],
        "distinctQuestions": len(top),
        "pages": [{"path": p, "count": n} for p, n in agg.pages.most_common(PAGES_SHOWN)],
        "knowledgeBases": sorted(agg.kbs),
        "feedbackRecords": sorted(agg.records),
        "improvementTask": item.get("task_record"),
        "improvementTasks": list(
            item.get("task_records") or ([item["task_record"]] if item.get("task_record") else [])
        ),
        "mergedGroups": list(item.get("merged") or []),
        "fix": _fix_view(item),
    }
    return view


def _fix_view(item: dict[str, Any]) -> dict[str, Any] | None:
    """The fix mark, and whether the group's questions are answered since: its re-asked questions
    and every question of the group asked after the mark (counted as they are folded)."""
    if not item.get("fixed_at"):
        return None
    recheck = item.get("recheck") or {}
    asked, answered = int(recheck.get("asked") or 0), int(recheck.get("answered") or 0)
    after_answered = int(item.get(_after_fix(item, "answered")) or 0)
    after_gaps = int(item.get(_after_fix(item, "gaps")) or 0)
    total = asked + after_answered + after_gaps
    good = answered + after_answered
    verdict = (
        "unknown" if total == 0 else "answered" if good == total else "unanswered" if good == 0 else "partly"
    )
    return {
        "fixedAt": item["fixed_at"],
        "fixedBy": item.get("fixed_by"),
        "note": item.get("fix_note"),
        "recheck": recheck or None,
        "afterFix": {"answered": after_answered, "gaps": after_gaps},
        "verdict": verdict,
    }


def summary(s: InsightsSources, call: Authorized, window: Window, filters: Filters) -> dict[str, Any]:
    """Per-day totals from the rollups; it folds nothing (the gaps view does), so signals not
    counted yet are read raw."""
    tenant = call.principal.tenant_id
    days: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    confidence: Counter[str] = Counter()
    callers: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for row in _read(s, tenant, window, SUMMARY_DAY, uncounted(s, tenant)).rows:
        if not (visible(row, call.policy) and filters.admits(row)):
            continue
        day = days[str(row["day"])]
        for name in ("questions", "answered", "declined", "lowConfidence", "notHelpful"):
            n = int(row.get(name) or 0)
            day[name] += n
            totals[name] += n
        callers[str(row.get("caller_kind"))] += int(row.get("questions") or 0)
        reasons.update(counters(row, REASON))
        confidence.update(counters(row, CONFIDENCE))
        pages.update(counters(row, PAGE))
    questions = totals["questions"]

    def rate(n: int) -> float | None:
        return round(n / questions, 4) if questions else None

    return {
        "window": {"since": window.since, "until": window.until},
        "filters": {k: v for k, v in vars(filters).items() if v is not None and k != "kind"},
        "questions": questions,
        "answered": totals["answered"],
        "declined": totals["declined"],
        "notHelpful": totals["notHelpful"],
        "answerRate": rate(totals["answered"]),
        "declineRate": rate(totals["declined"]),
        "declineRateByReason": {r: rate(n) for r, n in reasons.most_common() if n},
        "declinedByReason": {r: n for r, n in reasons.most_common() if n},
        "confidence": {level: confidence[level] for level in ("high", "medium", "low")},
        "callers": {k: n for k, n in callers.items() if n},
        "topCitedPages": [{"path": p, "count": n} for p, n in pages.most_common(10)],
        "perDay": [
            {
                "day": day,
                "questions": c["questions"],
                "answered": c["answered"],
                "declined": c["declined"],
                "lowConfidence": c["lowConfidence"],
                "notHelpful": c["notHelpful"],
            }
            for day, c in sorted(days.items())
            if any(c.values())
        ],
    }


# --- acting on a group ------------------------------------------------------------------------


def actionable_group(s: InsightsSources, call: Authorized, group_id: str) -> dict[str, Any]:
    """The group, when the caller is granted every knowledge base its questions named: acting on
    a group speaks for all its questions. Otherwise it is not found (nothing leaks by the code)."""
    item = s.insights.group(call.principal.tenant_id, group_id) if len(group_id) <= 64 else None
    for _ in range(32):  # a merged group is acted on as the group that absorbed it
        if item is None or not item.get("merged_into"):
            break
        item = s.insights.group(call.principal.tenant_id, str(item["merged_into"]))
    kbs = (item or {}).get("kbs") or []
    if item is None or not all(call.policy.allows_kb(kb) for kb in kbs):
        raise NotFound(f"gap group {group_id!r} not found", details={"group_id": group_id})
    return item


def representative(item: dict[str, Any]) -> str:
    samples = item.get("samples") or []
    return str(samples[0]["q"]) if samples else str(item.get("first_question") or "")


def mark_fixed(
    s: Any, call: Authorized, group_id: str, *, fixed: bool, note: str | None, recheck: bool
) -> dict[str, Any]:
    item = actionable_group(s, call, group_id)
    group_id = str(item["sk"])
    tenant = call.principal.tenant_id
    # The counts of answers after an earlier mark go with it.
    counted_after = [k for k in item if k.startswith("a:")]
    if not fixed:
        s.insights.mark_group(
            tenant, group_id, {}, ["fixed_at", "fixed_by", "fix_note", "recheck", *counted_after]
        )
        return {"groupId": group_id, "fixed": False}
    sets: dict[str, Any] = {"fixed_at": utc_now(), "fixed_by": f"{call.principal.type}:{call.principal.id}"}
    if note:
        sets["fix_note"] = note
    removes = counted_after + ([] if note else ["fix_note"])
    if recheck:
        sets["recheck"] = recheck_group(s, call, item)
    else:
        removes.append("recheck")
    s.insights.mark_group(tenant, group_id, sets, removes)
    return {"groupId": group_id, "fixed": True, **{k: v for k, v in sets.items() if k != "fixed_by"}}


def recheck_group(s: Any, call: Authorized, item: dict[str, Any]) -> dict[str, Any]:
    """Ask the group's most frequent questions again, in the caller's scope, without recording
    them as new questions: does the knowledge base answer them now?"""
    from citegate.answers.answer_api import reported
    from citegate.answers.ask import ask
    from citegate.governance.calls import readable_kbs

    kbs = {kb.kb_id for kb in readable_kbs(s, call, include_working=call.scope.include_working_docs)}
    wanted = set(item.get("kbs") or []) & kbs or kbs
    scope = call.search_scope(frozenset(wanted))
    results = []
    for sample in (item.get("samples") or [])[:RECHECK_QUESTIONS]:
        outcome = ask(s, scope, str(sample["q"]))
        _, _, _, level, _ = reported(outcome)
        answered = not outcome.no_answer and level != "low"
        results.append(
            {
                "question": sample["q"],
                "answered": answered,
                "confidence": level,
                "reason": outcome.no_answer_code if outcome.no_answer else None,
            }
        )
    return {
        "at": utc_now(),
        "asked": len(results),
        "answered": sum(1 for r in results if r["answered"]),
        "results": [{k: v for k, v in r.items() if v is not None} for r in results],
    }


def open_task(
    s: Any,
    call: Authorized,
    group_id: str,
    request_id: str,
    *,
    title: str | None,
    description: str | None,
    idempotency_key: str | None,
) -> dict[str, Any]:
    from citegate.answers.feedback import feedback_service
    from citegate.answers.schemas.feedback import ImprovementTaskBody

    item = actionable_group(s, call, group_id)
    group_id = str(item["sk"])
    question = representative(item)
    others = [str(x["q"]) for x in (item.get("samples") or [])[1:QUESTIONS_SHOWN]]
    text = description or "\n".join(
        [
            f"A gap group found by citegate insights ({group_id}): {int(item.get('members') or 0)} "
            f"questions declined, answered with low confidence or marked not helpful since "
            f"{item.get('created_at')}.",
            *(["Asked also as:", *(f"- {q}" for q in others)] if others else []),
        ]
    )
    body = ImprovementTaskBody(
        question=question,
        title=title or f"Docs gap: {question[:200]}",
        description=text[:8000],
        idempotencyKey=idempotency_key,
    )
    result, replayed = feedback_service(s).report("improvement_task", body, call.principal, request_id)
    s.insights.mark_group(
        call.principal.tenant_id,
        group_id,
        {"task_record": result.record.recordId, "task_at": utc_now()},
        [],
    )
    return {"groupId": group_id, "replayed": replayed, **result.model_dump(mode="json")}
