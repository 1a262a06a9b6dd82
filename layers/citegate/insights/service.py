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
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from citegate.answers.feedback import normalize_question
from citegate.governance.policy.model import ANY, Policy, normalize_path
from citegate.governance.signals import GAP_KINDS
from citegate.insights.grouping import Centroid, Grouper, decode, encode
from citegate.insights.store import InsightsStore
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

    @classmethod
    def parse(cls, since: str | None, until: str | None, default_days: int) -> Window:
        now = dt.datetime.now(dt.UTC)
        end = _instant(until, "until", end=True) if until else now
        start = _instant(since, "since", end=False) if since else end - dt.timedelta(days=default_days)
        if start > end:
            raise InvalidRequest("since must not be after until", details={"field": "since"})
        return cls(_iso(start), _iso(end))


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


# --- refresh -----------------------------------------------------------------------------------


@dataclass
class Refreshed:
    seen: int = 0  # signals folded in by this refresh
    gaps: int = 0
    new_groups: int = 0
    linked: int = 0  # answered questions linked to a group
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


def refresh(s: InsightsSources, tenant_id: str) -> Refreshed:
    started = time.perf_counter()
    store = s.insights
    owner = uuid.uuid4().hex
    if not store.take_lease(tenant_id, owner, LEASE_SECONDS):
        return Refreshed(skipped=True)
    watermark: str | None = None
    done = Refreshed()
    try:
        state = store.state(tenant_id)
        mark = state.get("watermark")
        since = (
            _iso(dt.datetime.fromisoformat(str(mark)[:23].replace("Z", "+00:00")) - LOOKBACK)
            if mark
            else "0000"
        )
        signals = store.signals(tenant_id, since, "9999", pending_only=True)  # oldest first
        if signals:
            watermark = max(str(mark or ""), max(str(sig["sk"]) for sig in signals))
        pending = signals
        for start in range(0, len(pending), FOLD_BATCH):
            batch = pending[start : start + FOLD_BATCH]
            _fold(s, tenant_id, batch, done)
            if start + FOLD_BATCH < len(pending) and time.perf_counter() - started > FOLD_BUDGET_SECONDS:
                # Well inside the lease: the rest waits for the next view, from this point on.
                watermark = str(batch[-1]["sk"])
                done.remaining = len(pending) - start - len(batch)
                break
    finally:
        store.release(tenant_id, owner, watermark)
    done.ms = round((time.perf_counter() - started) * 1000, 2)
    return done


def _kb_key(record: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(record.get("kbs") or []))


def _fold(s: InsightsSources, tenant_id: str, pending: list[dict[str, Any]], done: Refreshed) -> None:
    store = s.insights
    items = {g["sk"]: g for g in store.groups(tenant_id) if g.get("centroid")}
    # Groups are per set of knowledge bases: a reader of one knowledge base sees, and may act on, a
    # group whole; a like question asked of another knowledge base is another knowledge base's gap.
    threshold = s.settings.insights_threshold
    groupers: dict[tuple[str, ...], Grouper] = {}
    for gid, g in items.items():
        groupers.setdefault(_kb_key(g), Grouper(threshold)).centroids.append(
            Centroid(gid, decode(g["centroid"]), int(g.get("members") or 1))
        )
    vectors = embed_questions(s.embedder, (str(sig["question"]) for sig in pending))
    touched: dict[str, dict[str, Any]] = {}
    marks: list[tuple[str, str, str | None]] = []
    for signal, vector in zip(pending, vectors, strict=True):
        done.seen += 1
        grouper = groupers.setdefault(_kb_key(signal), Grouper(threshold))
        if not signal.get("gap"):
            found, _ = grouper.place(vector)
            if found is not None:
                done.linked += 1
            marks.append((signal["sk"], found.group_id if found else "-", found.group_id if found else None))
            continue
        done.gaps += 1
        group, new = grouper.add(_group_id(signal), vector)
        done.new_groups += int(new)
        item = touched.get(group.group_id) or items.get(group.group_id) or {"created_at": signal["at"]}
        touched[group.group_id] = item
        if new:
            item["first_question"] = signal["question"]
        item["last_at"] = max(str(item.get("last_at") or ""), str(signal["at"]))
        item["expires_at"] = max(int(item.get("expires_at") or 0), int(signal.get("expires_at") or 0))
        item["kbs"] = sorted(set(item.get("kbs") or []) | set(signal.get("kbs") or []))
        item["samples"] = _sample(item.get("samples") or [], str(signal["question"]))
        marks.append((signal["sk"], group.group_id, group.group_id))
    centroids = {c.group_id: c for g in groupers.values() for c in g.centroids if c.changed}
    for gid, item in touched.items():
        c = centroids[gid]
        fields = {
            "centroid": encode(c.vector),
            "members": c.members,
            "created_at": item["created_at"],
            "last_at": item["last_at"],
            "expires_at": item["expires_at"],
            "kbs": item["kbs"],
            "samples": item["samples"],
            "first_question": item.get("first_question") or item["samples"][0]["q"],
            "model": getattr(s.embedder, "model_id", ""),
        }
        store.save_group(tenant_id, gid, fields)
    for sk, grouped, group_id in marks:  # after the groups: a lost mark only folds a signal again
        store.mark_signal(tenant_id, sk, grouped, group_id)


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


@dataclass
class _Agg:
    count: int = 0
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
    after_gaps: int = 0
    after_answered: int = 0

    def add_gap(self, signal: dict[str, Any]) -> None:
        at = str(signal["at"])
        self.count += 1
        self.first = min(self.first, at) if self.first else at
        self.last = max(self.last, at)
        self.callers[str(signal.get("caller_kind"))] += 1
        self.kinds[str(signal.get("gap"))] += 1
        if signal.get("reason"):
            self.reasons[str(signal["reason"])] += 1
        key = normalize_question(str(signal["question"]))
        self.questions[key] += 1
        self.texts.setdefault(key, str(signal["question"]))
        for page in list(signal.get("cited_paths") or []) + list(signal.get("nearby_paths") or []):
            self.pages[page] += 1
        self.kbs.update(signal.get("kbs") or [])
        if signal.get("feedback_record"):
            self.records.add(str(signal["feedback_record"]))


def _signals(s: InsightsSources, call: Authorized, window: Window, filters: Filters) -> list[dict[str, Any]]:
    found = s.insights.signals(call.principal.tenant_id, window.since, window.until, view=True)
    return [sig for sig in found if visible(sig, call.policy) and filters.admits(sig)]


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
    refreshed = refresh(s, tenant)
    groups: dict[str, _Agg] = defaultdict(_Agg)
    pending = 0
    signals = _signals(s, call, window, filters)
    items = {g["sk"]: g for g in s.insights.groups(tenant)}
    for signal in signals:
        gid, gap = signal.get("group_id"), signal.get("gap")
        if gap and filters.kind is not None and gap != filters.kind:
            continue
        if gap and not gid:
            pending += 1  # not folded in yet (another view holds the lease, or a backlog)
            continue
        if not gid:
            continue
        if gap:
            groups[gid].add_gap(signal)
        fixed_at = (items.get(gid) or {}).get("fixed_at")
        if fixed_at and str(signal["at"]) >= str(fixed_at):
            if gap:
                groups[gid].after_gaps += 1
            else:
                groups[gid].after_answered += 1
    ranked = sorted(
        ((gid, agg) for gid, agg in groups.items() if agg.count or agg.after_answered),
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
    top = agg.questions.most_common()
    representative = agg.texts[top[0][0]] if top else str(item.get("first_question") or "")
    view: dict[str, Any] = {
        "groupId": gid,
        "representative": representative,
        "count": agg.count,
        "firstSeen": agg.first or None,
        "lastSeen": agg.last or None,
        "callers": dict(agg.callers),
        "kinds": dict(agg.kinds),
        "reasons": dict(agg.reasons),
        "questions": [{"question": agg.texts[k], "count": n} for k, n in top[:shown]],
        "distinctQuestions": len(top),
        "pages": [{"path": p, "count": n} for p, n in agg.pages.most_common(PAGES_SHOWN)],
        "knowledgeBases": sorted(agg.kbs),
        "feedbackRecords": sorted(agg.records),
        "improvementTask": item.get("task_record"),
        "fix": _fix_view(agg, item),
    }
    return view


def _fix_view(agg: _Agg, item: dict[str, Any]) -> dict[str, Any] | None:
    if not item.get("fixed_at"):
        return None
    recheck = item.get("recheck") or {}
    asked, answered = int(recheck.get("asked") or 0), int(recheck.get("answered") or 0)
    total = asked + agg.after_answered + agg.after_gaps
    good = answered + agg.after_answered
    verdict = (
        "unknown" if total == 0 else "answered" if good == total else "unanswered" if good == 0 else "partly"
    )
    return {
        "fixedAt": item["fixed_at"],
        "fixedBy": item.get("fixed_by"),
        "note": item.get("fix_note"),
        "recheck": recheck or None,
        "afterFix": {"answered": agg.after_answered, "gaps": agg.after_gaps},
        "verdict": verdict,
    }


def summary(s: InsightsSources, call: Authorized, window: Window, filters: Filters) -> dict[str, Any]:
    days: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    confidence: Counter[str] = Counter()
    callers: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for signal in _signals(s, call, window, filters):
        day = days[str(signal.get("day") or str(signal["at"])[:10])]
        outcome = str(signal["outcome"])
        if outcome in ("feedback", "improvement_task"):
            day["notHelpful"] += 1
            totals["notHelpful"] += 1
            continue
        day["questions"] += 1
        totals["questions"] += 1
        callers[str(signal.get("caller_kind"))] += 1
        day[outcome] += 1
        totals[outcome] += 1
        if outcome == "declined":
            reasons[str(signal.get("reason") or "no_answer")] += 1
        else:
            level = str(signal.get("confidence") or "low")
            confidence[level] += 1
            if level == "low":
                day["lowConfidence"] += 1
            for page in dict.fromkeys(signal.get("cited_paths") or []):
                pages[page] += 1
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
        "declineRateByReason": {r: rate(n) for r, n in reasons.most_common()},
        "declinedByReason": dict(reasons.most_common()),
        "confidence": {level: confidence[level] for level in ("high", "medium", "low")},
        "callers": dict(callers),
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
        ],
    }


# --- acting on a group ------------------------------------------------------------------------


def actionable_group(s: InsightsSources, call: Authorized, group_id: str) -> dict[str, Any]:
    """The group, when the caller is granted every knowledge base its questions named: acting on
    a group speaks for all its questions. Otherwise it is not found (nothing leaks by the code)."""
    item = s.insights.group(call.principal.tenant_id, group_id) if len(group_id) <= 64 else None
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
    tenant = call.principal.tenant_id
    if not fixed:
        s.insights.mark_group(tenant, group_id, {}, ["fixed_at", "fixed_by", "fix_note", "recheck"])
        return {"groupId": group_id, "fixed": False}
    sets: dict[str, Any] = {"fixed_at": utc_now(), "fixed_by": f"{call.principal.type}:{call.principal.id}"}
    if note:
        sets["fix_note"] = note
    removes = [] if note else ["fix_note"]
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
