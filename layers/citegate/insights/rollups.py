"""Per-day totals written while folding signals, so the views read a few rows per day instead of
every signal of their window.

Two kinds of rows, each keyed by what a viewer may filter on or must be allowed to see:

- a **group day** (`{tenant}#gday`, `{day}#{group}#{scope}#{caller}#{kind}`): one group's gap
  questions of one kind (declined, low_confidence, not_helpful; or "answered": answered questions
  linked to the group) asked in one scope (knowledge bases, projects, versions, paths) by one caller
  kind on one day: the count, first and last time, the decline reasons, the pages cited or found
  nearby, each distinct question's count and text, the feedback records;
- a **summary day** (`{tenant}#sday`, `{day}#{scope}#{caller}`): every question of one scope and
  caller kind on one day: questions, answered, declined (by reason), the confidence mix, low
  confidence, not helpful, the cited pages.

A viewer sees a row when it could have asked its scope (the same rule as for a signal:
citegate.insights.service.visible), so rows carry their scope's knowledge bases, projects, versions
and paths. `deltas` turns one signal into its rows' increments; the fold adds them in DynamoDB
transactions with the signal's "counted" mark (a signal is counted once), and a view adds the same
increments of raw signals where it reads them (the partial days at a window's edges, and signals
not folded yet), so both paths count alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from citegate.answers.feedback import normalize_question

GROUP_DAY = "gday"
SUMMARY_DAY = "sday"
SCOPE_FIELDS = ("kbs", "projects", "versions", "paths")
# Counter attributes are top-level (DynamoDB's ADD takes no nested paths), named by prefix.
REASON, PAGE, QUESTION, TEXT, CONFIDENCE = "r:", "p:", "q:", "t:", "c:"
PAGES_PER_SIGNAL = 25
IDENTITY, DATA, VERSION = "id", "data", "v"  # a stored row's JSON attributes and its version


def rows_pk(tenant_id: str, kind: str) -> str:
    return f"{tenant_id}#{kind}"


def scope_of(signal: dict[str, Any]) -> dict[str, Any]:
    """The fields a viewer's grant is checked against (an absent field: not narrowed)."""
    return {k: sorted(signal[k]) for k in SCOPE_FIELDS if signal.get(k)}


def scope_key(scope: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(scope, sort_keys=True).encode()).hexdigest()[:12]


def question_key(question: str) -> str:
    return hashlib.sha1(normalize_question(question).encode()).hexdigest()[:12]


@dataclass
class Delta:
    """What one or more signals add to one row: counters (ADD), the earliest and latest time,
    texts kept once (if_not_exists), a string set (ADD) and fixed attributes (the row's identity)."""

    pk: str
    sk: str
    fixed: dict[str, Any]
    counts: dict[str, int] = field(default_factory=dict)
    first: str | None = None
    last: str | None = None
    texts: dict[str, str] = field(default_factory=dict)
    records: set[str] = field(default_factory=set)

    def add(self, other: Delta) -> None:
        for name, n in other.counts.items():
            self.counts[name] = self.counts.get(name, 0) + n
        if other.first is not None:
            self.first = other.first if self.first is None else min(self.first, other.first)
        if other.last is not None:
            self.last = other.last if self.last is None else max(self.last, other.last)
        for name, text in other.texts.items():
            self.texts.setdefault(name, text)
        self.records |= other.records
        self.fixed["expires_at"] = max(
            int(self.fixed.get("expires_at") or 0), int(other.fixed.get("expires_at") or 0)
        )


def _count(counts: dict[str, int], name: str, n: int = 1) -> None:
    counts[name] = counts.get(name, 0) + n


def deltas(tenant_id: str, signal: dict[str, Any], group_id: str | None) -> list[Delta]:
    """The rows one signal adds to: its day's summary row, and its group's day row when it is a
    gap in a group or an answered question linked to one (`group_id`)."""
    scope = scope_of(signal)
    skey = scope_key(scope)
    day = str(signal.get("day") or str(signal["at"])[:10])
    caller = str(signal.get("caller_kind") or "human")
    # A row outlives its day's first signal by a day: no later signal of that day expires after it.
    expires = int(signal.get("expires_at") or 0)
    fixed = {"day": day, "caller_kind": caller, **scope, "expires_at": expires + 86400 if expires else 0}
    outcome = str(signal.get("outcome"))
    counts: dict[str, int] = {}
    if outcome in ("feedback", "improvement_task"):
        _count(counts, "notHelpful")
    else:
        _count(counts, "questions")
        _count(counts, outcome)
        if outcome == "declined":
            _count(counts, REASON + str(signal.get("reason") or "no_answer"))
        else:
            level = str(signal.get("confidence") or "low")
            _count(counts, CONFIDENCE + level)
            if level == "low":
                _count(counts, "lowConfidence")
            for page in dict.fromkeys(signal.get("cited_paths") or []):
                _count(counts, PAGE + str(page))
    found = [Delta(rows_pk(tenant_id, SUMMARY_DAY), f"{day}#{skey}#{caller}", dict(fixed), counts)]
    if group_id is None:
        return found
    kind = str(signal.get("gap") or "answered")
    at = str(signal["at"])
    row = Delta(
        rows_pk(tenant_id, GROUP_DAY),
        f"{day}#{group_id}#{skey}#{caller}#{kind}",
        {**fixed, "group_id": group_id, "kind": kind},
        {"n": 1},
        first=at,
        last=at,
    )
    if kind != "answered":
        if signal.get("reason"):
            _count(row.counts, REASON + str(signal["reason"]))
        pages = list(signal.get("cited_paths") or []) + list(signal.get("nearby_paths") or [])
        for page in pages[:PAGES_PER_SIGNAL]:
            _count(row.counts, PAGE + str(page))
        qkey = question_key(str(signal["question"]))
        _count(row.counts, QUESTION + qkey)
        row.texts[TEXT + qkey] = str(signal["question"])
        if signal.get("feedback_record"):
            row.records.add(str(signal["feedback_record"]))
    found.append(row)
    return found


def combine(items: Iterable[Delta]) -> dict[tuple[str, str], Delta]:
    """Deltas of the same row added together (a transaction names each item once)."""
    combined: dict[tuple[str, str], Delta] = {}
    for delta in items:
        key = (delta.pk, delta.sk)
        if key in combined:
            combined[key].add(delta)
        else:
            combined[key] = Delta(delta.pk, delta.sk, dict(delta.fixed))
            combined[key].add(delta)
    return combined


def as_row(delta: Delta) -> dict[str, Any]:
    """A delta read as a stored row (how a view adds raw signals to the rows it read)."""
    row: dict[str, Any] = {"pk": delta.pk, "sk": delta.sk, **delta.fixed, **delta.counts, **delta.texts}
    if delta.first is not None:
        row["first"] = delta.first
    if delta.last is not None:
        row["last"] = delta.last
    if delta.records:
        row["records"] = sorted(delta.records)
    return row


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def stored_row(delta: Delta, version: int) -> dict[str, Any]:
    """A row as it is stored: its identity (day, scope, caller kind, group, kind) and its counts
    are two JSON attributes, its times and TTL plain ones, `v` its version. The fold writes a row
    whole (read, add, put on the condition that `v` is unchanged): counters as attributes would be
    one update clause each, and the embedded endpoint's cost grows with clauses times attributes."""
    item: dict[str, Any] = {
        "pk": delta.pk,
        "sk": delta.sk,
        IDENTITY: _dump({k: v for k, v in delta.fixed.items() if k != "expires_at"}),
        DATA: _dump({"c": delta.counts, "t": delta.texts, "r": sorted(delta.records)}),
        VERSION: version,
    }
    if delta.fixed.get("expires_at"):  # none: no TTL (0 would read as long expired)
        item["expires_at"] = int(delta.fixed["expires_at"])
    if delta.first is not None:
        item["first"] = delta.first
    if delta.last is not None:
        item["last"] = delta.last
    return item


# A stored row's attributes that are no counter (rows of the first rollups kept counters as
# attributes; `from_row` reads both shapes).
_NOT_COUNTERS = {"pk", "sk", IDENTITY, DATA, VERSION, "first", "last", "records", "expires_at"}
_FIXED = {"day", "caller_kind", "group_id", "kind", *SCOPE_FIELDS}


def read_row(item: dict[str, Any]) -> dict[str, Any]:
    """A stored row as the views read it: identity fields, counters and texts as plain keys."""
    identity = item.pop(IDENTITY, None)
    if isinstance(identity, str):
        for key, v in json.loads(identity).items():
            item.setdefault(key, v)
    data = item.pop(DATA, None)
    if isinstance(data, str):
        loaded = json.loads(data)
        for key, n in (loaded.get("c") or {}).items():
            item[key] = int(item.get(key) or 0) + int(n)
        for key, text in (loaded.get("t") or {}).items():
            item.setdefault(key, text)
        if loaded.get("r"):
            item["records"] = sorted(set(item.get("records") or []) | set(loaded["r"]))
    return item


def from_row(item: dict[str, Any]) -> Delta:
    """A stored row (either shape) as the delta that would make it: the fold adds to it."""
    row = read_row(dict(item))
    fixed = {k: row[k] for k in _FIXED if k in row}
    if row.get("expires_at"):
        fixed["expires_at"] = int(row["expires_at"])
    delta = Delta(str(row["pk"]), str(row["sk"]), fixed)
    for key, v in row.items():
        if key in _NOT_COUNTERS or key in _FIXED:
            continue
        if key.startswith(TEXT):
            delta.texts[key] = str(v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            delta.counts[key] = int(v)
    delta.first = str(row["first"]) if row.get("first") else None
    delta.last = str(row["last"]) if row.get("last") else None
    delta.records = set(row.get("records") or [])
    return delta


def counters(row: dict[str, Any], prefix: str) -> dict[str, int]:
    """A row's counters of one prefix, by name without the prefix."""
    return {k[len(prefix) :]: int(v) for k, v in row.items() if k.startswith(prefix) and k != prefix}
