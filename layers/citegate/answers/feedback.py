"""No-answer feedback and improvement tasks (spec 000 8 and 8.1): deduplicated, idempotent, counted.

- `dedupe_key` names one knowledge gap: a SHA-256 of the normalised event type, question, scope and
  citation paths, so it carries no plaintext and survives case, width, spacing and punctuation.
- One OPEN record per (tenant, kind, dedupeKey), under the id `{kind}:{tenant}:{dedupeKey}`. A
  report is absorbed by a conditional UpdateItem on that id (ADD count, append the caller's type
  and time); only when no open record exists is one created, with a conditional put, so concurrent
  first reports make exactly one record. Closing moves the record to
  `{kind}:{tenant}:{dedupeKey}:closed:{epoch_ms}` in one transaction; a later report then opens a
  new record instead of reviving the closed one.
- `idempotencyKey` (per caller and tool) goes through Powertools idempotency: a retry returns the
  first answer and is not counted again. Without it every call counts.
- Optionally a GitHub issue mirrors each open record (CITEGATE_GITHUB_*): opened once, then one
  comment per absorbed report. Sink failures never lose a report; they are noted on the record.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from citegate.answers.schemas.feedback import (
    AdminReportEntry,
    FeedbackBody,
    FeedbackRecord,
    FeedbackRecordAdmin,
    Kind,
    ReportEntry,
    ReportResult,
    Status,
)
from citegate.governance.calls import current_call, readable_kbs
from citegate.governance.policy.model import InvalidPath, normalize_path
from citegate.platform import resources
from citegate.platform.dynamo import from_item, is_conditional_failure, to_item, utc_now
from citegate.platform.errors import Conflict, InvalidRequest, NotFound, StorageUnavailable
from citegate.platform.observability import logger
from citegate.platform.ports import Configured, Tables
from citegate.platform.principal import Principal
from citegate.platform.settings import from_environ

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

    from citegate.governance.calls import Authorized
    from citegate.governance.ports import Governing


KINDS: tuple[Kind, ...] = ("feedback", "improvement_task")
CALLER_TYPES = ("human", "agent", "service", "anonymous")
REPORTS_KEPT = 50  # the newest reports kept on a record; older ones survive only in the counters
RECENT_SHOWN = 10  # reports a caller sees (type and time only)
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
IN_PROGRESS_LEASE_MS = 60_000  # when the Lambda's own remaining time is unknown
IN_PROGRESS_WAIT_SECONDS = 15.0  # how long a duplicate waits for the first call with its key
SINK_CLAIM_SECONDS = 60  # a claim to open the GitHub issue older than this is considered abandoned
_TRAILING = "?？。.!！,，;；:：、…~～ \t\r\n"


# --- the dedupe key -------------------------------------------------------------------------


def _text(value: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def normalize_question(question: str) -> str:
    """NFKC, casefolded, whitespace collapsed, trailing punctuation (ASCII and CJK) dropped."""
    return _text(question).rstrip(_TRAILING)


def _path(path: str) -> str:
    try:
        return normalize_path(path.strip())
    except InvalidPath:
        return path  # a path that cannot be normalised is still part of what was asked


def _canonical(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        # None and False are the scope's defaults: {"includeWorkingDocs": false} equals absent.
        items = {k: _canonical(v, k) for k, v in value.items() if v is not None and v is not False}
        return {k: v for k, v in items.items() if v is not None} or None
    if isinstance(value, list | tuple | set | frozenset):
        members = [_path(v) if key == "paths" and isinstance(v, str) else _canonical(v) for v in value]
        unique = {json.dumps(m, sort_keys=True, ensure_ascii=False): m for m in members}
        return [unique[k] for k in sorted(unique)]
    if isinstance(value, str):
        return _path(value) if key == "paths" else unicodedata.normalize("NFKC", value).strip()
    return value


# A scope is what it covers, whichever shape it is written in: spec 000's request (`paths`,
# `version`) and citegate's effective scope (`path_prefixes`, `versions`) hash alike.
_SCOPE_ALIASES = {
    "path_prefixes": "paths",
    "version": "versions",
    "include_working_docs": "includeWorkingDocs",
}


def canonical_scope(scope: dict[str, Any] | None) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for name, value in (scope or {}).items():
        if value is None:
            continue
        name = _SCOPE_ALIASES.get(name, name)
        if name == "versions" and isinstance(value, str):
            value = [value]
        if isinstance(merged.get(name), list) and isinstance(value, list):
            value = merged[name] + value
        merged[name] = value
    return cast("dict[str, Any] | None", _canonical(merged))


def dedupe_key(
    event_type: str, question: str, scope: dict[str, Any] | None, citation_paths: Sequence[str]
) -> str:
    """sha256 hex of the normalised (eventType, question, scope, citation paths); no plaintext in it."""
    material = {
        "eventType": _text(event_type),
        "question": normalize_question(question),
        "scope": canonical_scope(scope),
        "citationPaths": sorted({p for p in (_path(c) for c in citation_paths) if p}),
    }
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def open_record_id(kind: Kind, tenant_id: str, key: str) -> str:
    return f"{kind}:{tenant_id}:{key}"


# --- the GitHub sink --------------------------------------------------------------------------


class GitHubSinkSettings(BaseModel):
    """Read per call (cheap), so a deployment or a test can switch the sink on without a restart.

    These belong in citegate.platform.settings.Settings; they live here until that file grows them."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    repository: str | None = Field(None, alias="CITEGATE_GITHUB_REPOSITORY")  # "owner/repo"
    token: SecretStr | None = Field(None, alias="CITEGATE_GITHUB_TOKEN")
    token_secret_arn: str | None = Field(None, alias="CITEGATE_GITHUB_TOKEN_SECRET_ARN")
    api_url: str = Field("https://api.github.com", alias="CITEGATE_GITHUB_API_URL")
    timeout_seconds: float = Field(5.0, alias="CITEGATE_GITHUB_TIMEOUT")

    @property
    def enabled(self) -> bool:
        return bool(self.repository and "/" in self.repository and (self.token or self.token_secret_arn))

    def token_value(self) -> str | None:
        from citegate.platform.secrets import secret_value

        return secret_value(self.token, self.token_secret_arn)


class SinkError(Exception):
    """The issue tracker could not be reached or refused the call."""


class GitHubSink:
    def __init__(self, settings: GitHubSinkSettings) -> None:
        self._settings = settings

    def _call(self, method: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        import httpx

        s = self._settings
        token = s.token_value()
        assert s.repository and token
        url = f"{s.api_url.rstrip('/')}/repos/{s.repository}{path}"
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "citegate",
        }
        try:
            response = httpx.request(method, url, json=payload, headers=headers, timeout=s.timeout_seconds)
        except httpx.HTTPError as error:
            raise SinkError(f"{type(error).__name__} calling the issue tracker") from error
        if response.status_code >= 300:
            raise SinkError(f"the issue tracker answered {response.status_code} to {method} {path}")
        try:
            data = response.json()
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}

    def open_issue(self, item: dict[str, Any]) -> tuple[int, str]:
        data = self._call("POST", "/issues", {"title": _issue_title(item), "body": _issue_body(item)})
        number, url = data.get("number"), data.get("html_url")
        if not isinstance(number, int):
            raise SinkError("the issue tracker did not return an issue number")
        return number, str(url or "")

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/issues/{number}/comments", {"body": body})

    def close_issue(self, number: int, resolution: str | None) -> None:
        self.comment(number, f"Closed in citegate. Resolution: {resolution or '(none given)'}")
        self._call("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": "completed"})


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _issue_title(item: dict[str, Any]) -> str:
    label = "No answer" if item["event_type"] == "qa_no_answer" else item["event_type"]
    subject = item.get("title") or " ".join(str(item["question"]).split())
    return f"[citegate] {label}: {_clip(subject, 90)} ({item['dedupe_key'][:12]})"


def _issue_body(item: dict[str, Any]) -> str:
    # Content only: no caller ids, no tokens; the reporter is named by type.
    cited = ", ".join(f"`{c['path']}`" for c in item.get("citations") or [])
    quoted = "\n".join(f"> {line}" for line in _clip(str(item["question"]), 2000).splitlines())
    lines = [
        f"**{item['kind'].replace('_', ' ').capitalize()}** recorded by citegate.",
        "",
        quoted,
        "",
        f"- Event type: `{item['event_type']}`",
        f"- Scope: `{json.dumps(item.get('scope') or {}, ensure_ascii=False, sort_keys=True)}`",
        f"- Cited paths: {cited or 'none'}",
        f"- First seen: {item['first_seen']} (by a {item['reports'][0]['caller_type']} caller)",
        f"- Reports so far: {item['count']}",
        f"- dedupeKey: `{item['dedupe_key']}`",
    ]
    if item.get("description"):
        lines += ["", _clip(str(item["description"]), 4000)]
    if item["reports"][0].get("comment"):
        lines += ["", "Comment:", "", _clip(str(item["reports"][0]["comment"]), 2000)]
    lines += ["", f"<!-- citegate:dedupeKey={item['dedupe_key']} record={item['record_id']} -->"]
    return "\n".join(lines)


def _comment_body(item: dict[str, Any], entry: dict[str, Any]) -> str:
    text = f"Reported again by a {entry['caller_type']} caller at {entry['at']} (count {item['count']})."
    if entry.get("comment"):
        text += "\n\n" + _clip(str(entry["comment"]), 2000)
    return text + f"\n\n<!-- citegate:dedupeKey={item['dedupe_key']} -->"


# --- the store ------------------------------------------------------------------------------


class FeedbackStore:
    """The feedback table: one item per record, `by_kind` (kind, last_seen) lists them."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def get(self, record_id: str) -> dict[str, Any] | None:
        item = self._table.get_item(Key={"record_id": record_id}, ConsistentRead=True).get("Item")
        return cast("dict[str, Any]", from_item(item)) if item else None

    def create(self, item: dict[str, Any]) -> bool:
        """Put a new open record; False when one with that id already exists (a concurrent report)."""
        try:
            self._table.put_item(Item=to_item(item), ConditionExpression="attribute_not_exists(record_id)")
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def absorb(self, record_id: str, entry: dict[str, Any]) -> dict[str, Any] | None:
        """Count one more report on the open record; None when there is no open record to absorb it."""
        try:
            response = self._table.update_item(
                Key={"record_id": record_id},
                UpdateExpression=(
                    "ADD #count :one, caller_counts.#ct :one "
                    "SET last_seen = :at, reports = list_append(reports, :entry)"
                ),
                ConditionExpression="attribute_exists(record_id) AND #status = :open",
                ExpressionAttributeNames={
                    "#count": "count",
                    "#ct": entry["caller_type"],
                    "#status": "status",
                },
                ExpressionAttributeValues={
                    ":one": 1,
                    ":at": entry["at"],
                    ":entry": [to_item(entry)],
                    ":open": "open",
                },
                ReturnValues="ALL_NEW",
            )
        except Exception as error:
            if is_conditional_failure(error):
                return None
            raise
        return cast("dict[str, Any]", from_item(response["Attributes"]))

    def trim_reports(self, record_id: str, seen: int, keep: int) -> None:
        """Drop the oldest reports beyond `keep`. Conditional on the length seen, so two trims never
        remove more than intended; a trim that loses a race is left to the next report."""
        if seen <= keep:
            return
        removals = ", ".join(f"reports[{i}]" for i in range(seen - keep))
        try:
            self._table.update_item(
                Key={"record_id": record_id},
                UpdateExpression=f"REMOVE {removals}",
                ConditionExpression="size(reports) = :seen",
                ExpressionAttributeValues={":seen": seen},
            )
        except Exception as error:
            if not is_conditional_failure(error):
                raise

    def claim_sink(self, record_id: str, claim: str, now: float) -> bool:
        """Claim the right to open the record's issue, so concurrent reports never open two."""
        try:
            self._table.update_item(
                Key={"record_id": record_id},
                UpdateExpression="SET sink_claim = :claim, sink_claimed_at = :now",
                ConditionExpression=(
                    "attribute_exists(record_id) AND attribute_not_exists(github_issue_number) "
                    "AND (attribute_not_exists(sink_claim) OR sink_claimed_at < :stale)"
                ),
                ExpressionAttributeValues={
                    ":claim": claim,
                    ":now": int(now),
                    ":stale": int(now) - SINK_CLAIM_SECONDS,
                },
            )
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def set_sink_result(
        self,
        record_id: str,
        *,
        issue: tuple[int, str] | None = None,
        error: str | None = None,
        release_claim: bool = False,
    ) -> dict[str, Any] | None:
        sets: list[str] = []
        removes: list[str] = ["sink_claim", "sink_claimed_at"] if release_claim else []
        values: dict[str, Any] = {}
        if issue is not None:
            sets += ["github_issue_number = :number", "github_issue_url = :url"]
            values.update({":number": issue[0], ":url": issue[1]})
        if error is not None:
            sets += ["sink_error = :error", "sink_error_at = :at"]
            values.update({":error": error, ":at": utc_now()})
        else:
            removes += ["sink_error", "sink_error_at"]
        expression = ("SET " + ", ".join(sets) if sets else "") + (
            " REMOVE " + ", ".join(removes) if removes else ""
        )
        try:
            response = self._table.update_item(
                Key={"record_id": record_id},
                UpdateExpression=expression.strip(),
                ConditionExpression="attribute_exists(record_id)",
                ReturnValues="ALL_NEW",
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except Exception as failure:
            if is_conditional_failure(failure):
                return None  # closed (moved) in the meantime
            raise
        return cast("dict[str, Any]", from_item(response["Attributes"]))

    def list(self, tenant_id: str, kind: Kind, status: Status | None, limit: int) -> list[dict[str, Any]]:
        """The tenant's records of one kind, most recently seen first."""
        names = {"#tenant": "tenant_id"}
        values: dict[str, Any] = {":kind": kind, ":tenant": tenant_id}
        condition = "#tenant = :tenant"
        if status is not None:
            names["#status"] = "status"
            values[":status"] = status
            condition += " AND #status = :status"
        kwargs: dict[str, Any] = {
            "IndexName": "by_kind",
            "KeyConditionExpression": "kind = :kind",
            "FilterExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
        }
        found: list[dict[str, Any]] = []
        while len(found) < limit:  # the filter applies after Limit, so page until enough matched
            page = self._table.query(Limit=max(limit, 25), **kwargs)
            found += [from_item(i) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found[:limit]

    def close(self, item: dict[str, Any], closed: dict[str, Any]) -> bool:
        """Move the open record to its closed id in one transaction. False if a report (or another
        close) changed it since it was read, so nothing absorbed in between is lost."""
        # The resource's client takes plain Python values (boto3 serialises them, as for the Table).
        client = self._table.meta.client
        name = self._table.name
        try:
            client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": name,
                            "Key": {"record_id": item["record_id"]},
                            "ConditionExpression": "#status = :open AND #count = :count",
                            "ExpressionAttributeNames": {"#status": "status", "#count": "count"},
                            "ExpressionAttributeValues": {":open": "open", ":count": item["count"]},
                        }
                    },
                    {
                        "Put": {
                            "TableName": name,
                            "Item": to_item(closed),
                            "ConditionExpression": "attribute_not_exists(record_id)",
                        }
                    },
                ]
            )
        except client.exceptions.TransactionCanceledException:
            return False
        return True


# --- the service ----------------------------------------------------------------------------


class _Lease:
    """What Powertools reads from a Lambda context: how long an in-progress record may block retries."""

    def __init__(self, remaining_ms: int) -> None:
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


def _caller_key(principal: Principal) -> str:
    return f"{principal.tenant_id}:{principal.type}:{principal.id}"


def _mark_replay(response: Any, idempotent_data: DataRecord) -> Any:
    # Powertools calls this only when it answers from the store: the body stays the first one's,
    # the flag lets the handler say so in a header.
    return {"replayed": True, "result": response} if isinstance(response, dict) else response


def public_record(item: dict[str, Any]) -> FeedbackRecord:
    return FeedbackRecord(**_record_fields(item))


def admin_record(item: dict[str, Any]) -> FeedbackRecordAdmin:
    reports = [
        AdminReportEntry(
            callerType=r["caller_type"],
            callerId=r["caller_id"],
            at=r["at"],
            requestId=r.get("request_id"),
            answerRequestId=r.get("answer_request_id"),
            comment=r.get("comment"),
        )
        for r in item.get("reports") or []
    ]
    return FeedbackRecordAdmin(
        **_record_fields(item),
        tenantId=item["tenant_id"],
        question=item["question"],
        scope=item.get("scope"),
        citations=item.get("citations") or [],
        title=item.get("title"),
        description=item.get("description"),
        reports=reports,
        closedBy=item.get("closed_by"),
    )


def _record_fields(item: dict[str, Any]) -> dict[str, Any]:
    reports = item.get("reports") or []
    return {
        "recordId": item["record_id"],
        "kind": item["kind"],
        "status": item["status"],
        "eventType": item["event_type"],
        "dedupeKey": item["dedupe_key"],
        "count": int(item["count"]),
        "firstSeen": item["first_seen"],
        "lastSeen": item["last_seen"],
        "callers": {k: int(v) for k, v in (item.get("caller_counts") or {}).items() if v},
        "recent": [ReportEntry(callerType=r["caller_type"], at=r["at"]) for r in reports[-RECENT_SHOWN:]],
        "issueNumber": item.get("github_issue_number"),
        "issueUrl": item.get("github_issue_url"),
        "sinkError": item.get("sink_error"),
        "closedAt": item.get("closed_at"),
        "resolution": item.get("resolution"),
    }


class FeedbackService:
    def __init__(
        self,
        store: FeedbackStore,
        *,
        idempotency_table: str,
        dynamodb_client: Callable[[], Any],
        sink_settings: Callable[[], GitHubSinkSettings] = lambda: from_environ(GitHubSinkSettings),
    ) -> None:
        self.store = store
        self._idempotency_table = idempotency_table
        self._dynamodb_client = dynamodb_client
        self._sink_settings = sink_settings
        self._persistence_layer: Any = None
        self._lock = threading.Lock()

    # - reporting -

    def report(
        self,
        kind: Kind,
        body: FeedbackBody,
        caller: Principal,
        request_id: str,
        *,
        remaining_ms: int | None = None,
    ) -> tuple[ReportResult, bool]:
        """Record one report. Returns the result and whether it was replayed from an earlier call
        with the same idempotencyKey (then nothing was counted)."""
        key = dedupe_key(body.eventType, body.question, body.scope_dict(), body.citation_paths())
        if not body.idempotencyKey:
            return self._report(kind, body, caller, request_id, key), False
        return self._idempotent_report(kind, body, caller, request_id, key, remaining_ms)

    def _persistence(self) -> Any:
        with self._lock:
            if self._persistence_layer is None:
                from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

                self._persistence_layer = DynamoDBPersistenceLayer(
                    table_name=self._idempotency_table, boto3_client=self._dynamodb_client()
                )
            return self._persistence_layer

    def _idempotent_report(
        self,
        kind: Kind,
        body: FeedbackBody,
        caller: Principal,
        request_id: str,
        key: str,
        remaining_ms: int | None,
    ) -> tuple[ReportResult, bool]:
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
            IdempotencyValidationError,
        )

        # The key is scoped to the caller and the tool; the content's dedupeKey is validated, so the
        # same idempotencyKey reused for a different report is refused rather than silently replayed.
        material = {
            "tool": f"create_{kind}",
            "caller": _caller_key(caller),
            "idempotencyKey": body.idempotencyKey,
            "dedupeKey": key,
        }
        config = IdempotencyConfig(
            event_key_jmespath="[tool, caller, idempotencyKey]",
            payload_validation_jmespath="dedupeKey",
            expires_after_seconds=IDEMPOTENCY_TTL_SECONDS,
            hash_function="sha256",
            # In-progress records expire with the invocation, so a crashed call does not block
            # retries for the whole TTL. A fresh config per call: Powertools keeps the context on it.
            lambda_context=cast(Any, _Lease(remaining_ms or IN_PROGRESS_LEASE_MS)),
            response_hook=_mark_replay,
        )

        def record_report(material: dict[str, Any]) -> dict[str, Any]:
            return self._report(kind, body, caller, request_id, key).model_dump(mode="json")

        run = idempotent_function(
            record_report,
            data_keyword_argument="material",
            persistence_store=self._persistence(),
            config=config,
            key_prefix="citegate.answers.feedback",
        )
        deadline = time.monotonic() + IN_PROGRESS_WAIT_SECONDS
        pause = 0.05
        while True:
            try:
                answer = run(material=material)
                break
            except IdempotencyValidationError as error:
                raise InvalidRequest(
                    "this idempotencyKey was already used for a different report",
                    details={"field": "idempotencyKey", "reason": "idempotency_key_reused"},
                ) from error
            except IdempotencyPersistenceLayerError as error:
                # Raised only around the idempotency table itself (our own errors pass through).
                raise StorageUnavailable("the idempotency store is unavailable; retry") from error
            except IdempotencyAlreadyInProgressError as error:
                # The first call with this key is still running: wait for its answer, then replay it.
                if time.monotonic() + pause > deadline:
                    raise Conflict(
                        "a report with this idempotencyKey is still being recorded; retry shortly",
                        details={"reason": "idempotency_in_progress", "retry_after": 1},
                    ) from error
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        if isinstance(answer, dict) and answer.get("replayed"):
            return ReportResult.model_validate(answer["result"]), True
        return ReportResult.model_validate(answer), False

    def _report(
        self, kind: Kind, body: FeedbackBody, caller: Principal, request_id: str, key: str
    ) -> ReportResult:
        record_id = open_record_id(kind, caller.tenant_id, key)
        now = utc_now()
        entry = {
            "caller_type": caller.type,
            "caller_id": caller.id,
            "at": now,
            "request_id": request_id or None,
            "answer_request_id": body.answerRequestId,
            "comment": body.comment,
        }
        entry = {k: v for k, v in entry.items() if v is not None}
        item: dict[str, Any] | None = None
        created = False
        for _ in range(5):  # absorb, else create; a lost create race means the record now exists
            item = self.store.absorb(record_id, entry)
            if item is not None:
                break
            fresh = self._new_item(kind, body, caller, record_id, key, entry)
            if self.store.create(fresh):
                item, created = fresh, True
                break
        if item is None:
            raise Conflict("the feedback record kept changing; retry", details={"retry_after": 1})
        if not created:
            self.store.trim_reports(record_id, len(item.get("reports") or []), REPORTS_KEPT)
        item = self._sync_sink(item, entry, request_id)
        return ReportResult(
            record=public_record(item),
            created=created,
            duplicateOf=None if created else record_id,
            dedupeKey=key,
            clientDedupeKey=body.dedupeKey if body.dedupeKey and body.dedupeKey != key else None,
        )

    @staticmethod
    def _new_item(
        kind: Kind,
        body: FeedbackBody,
        caller: Principal,
        record_id: str,
        key: str,
        entry: dict[str, Any],
    ) -> dict[str, Any]:
        counts = dict.fromkeys(CALLER_TYPES, 0)
        counts[caller.type] = 1
        return {
            "record_id": record_id,
            "tenant_id": caller.tenant_id,
            "kind": kind,
            "status": "open",
            "event_type": body.eventType,
            "dedupe_key": key,
            "question": body.question,
            "scope": body.scope_dict(),
            "citations": [c.model_dump(exclude_none=True) for c in body.citations],
            "title": body.title,
            "description": body.description,
            "count": 1,
            "caller_counts": counts,
            "reports": [entry],
            "first_seen": entry["at"],
            "last_seen": entry["at"],
        }

    def _sync_sink(self, item: dict[str, Any], entry: dict[str, Any], request_id: str) -> dict[str, Any]:
        settings = self._sink_settings()
        if not settings.enabled:
            return item
        sink = GitHubSink(settings)
        record_id = item["record_id"]
        number = item.get("github_issue_number")
        if number is not None:  # an absorbed report: the issue exists, add to it
            try:
                sink.comment(int(number), _comment_body(item, entry))
            except SinkError as error:
                logger.warning(
                    "feedback sink comment failed", extra={"record": record_id, "reason": str(error)}
                )
                return self.store.set_sink_result(record_id, error=str(error)) or item
            return (self.store.set_sink_result(record_id) or item) if item.get("sink_error") else item
        # No issue yet: on the first report, or because an earlier attempt failed. One claimant opens it.
        if not self.store.claim_sink(record_id, request_id or entry["at"], time.time()):
            return item
        try:
            issue = sink.open_issue(item)
        except SinkError as error:
            logger.warning("feedback sink issue failed", extra={"record": record_id, "reason": str(error)})
            return self.store.set_sink_result(record_id, error=str(error), release_claim=True) or item
        return self.store.set_sink_result(record_id, issue=issue, release_claim=True) or item

    # - administration -

    def list(
        self, tenant_id: str, kind: Kind | None = None, status: Status | None = None, limit: int = 100
    ) -> list[FeedbackRecordAdmin]:
        items: list[dict[str, Any]] = []
        for one in (kind,) if kind else KINDS:
            items += self.store.list(tenant_id, one, status, limit)
        items.sort(key=lambda i: str(i["last_seen"]), reverse=True)
        return [admin_record(i) for i in items[:limit]]

    def close(
        self, tenant_id: str, record_id: str, resolution: str | None, closed_by: str
    ) -> FeedbackRecordAdmin:
        for _ in range(5):  # a report absorbed between the read and the move makes us read again
            item = self.store.get(record_id)
            if item is None or item.get("tenant_id") != tenant_id:
                raise NotFound(f"feedback record {record_id!r} not found", details={"record_id": record_id})
            if item.get("status") != "open":
                raise Conflict(
                    f"feedback record {record_id!r} is already closed", details={"record_id": record_id}
                )
            now = utc_now()
            closed = {
                **item,
                "record_id": f"{record_id}:closed:{int(time.time() * 1000)}",
                "status": "closed",
                "closed_at": now,
                "closed_by": closed_by,
                "resolution": resolution,
                "open_record_id": record_id,
            }
            closed.pop("sink_claim", None)
            closed.pop("sink_claimed_at", None)
            if self.store.close(item, closed):
                return admin_record(self._close_issue(closed, resolution))
        raise Conflict("the feedback record kept changing; retry", details={"retry_after": 1})

    def _close_issue(self, closed: dict[str, Any], resolution: str | None) -> dict[str, Any]:
        settings = self._sink_settings()
        number = closed.get("github_issue_number")
        if number is None or not settings.enabled:
            return closed
        try:
            GitHubSink(settings).close_issue(int(number), resolution)
        except SinkError as error:
            logger.warning(
                "feedback sink close failed", extra={"record": closed["record_id"], "reason": str(error)}
            )
            return self.store.set_sink_result(closed["record_id"], error=str(error)) or closed
        return closed


def note_report(s: Governing, call: Authorized, body: FeedbackBody, kind: Kind, result: ReportResult) -> None:
    """What the report's audit record keeps for citegate.insights: a question marked not helpful (or
    turned into a task), the knowledge bases the caller reads, the answer it is about and the record
    it counted on. A replayed report notes nothing: it was counted the first time."""
    kbs = readable_kbs(s, call, include_working=call.scope.include_working_docs)
    current_call().note(
        knowledge_bases=sorted(kb.kb_id for kb in kbs),
        outcome=kind,
        cited_paths=list(dict.fromkeys(body.citation_paths())),
        answer_request_id=body.answerRequestId,
        feedback_record=result.record.recordId,
    )


class FeedbackSources(Configured, Tables, Protocol):
    """What `build_feedback_service` builds the service from: the settings and the table."""


class HasFeedback(Protocol):
    @property
    def feedback(self) -> FeedbackService: ...


def build_feedback_service(s: FeedbackSources) -> FeedbackService:
    def dynamodb_client() -> Any:
        import boto3
        from botocore.config import Config

        # boto3 honours AWS_ENDPOINT_URL, so this reaches the embedded endpoint locally too.
        session = boto3.session.Session(region_name=s.settings.region)
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=32)
        return session.client("dynamodb", config=config)

    return FeedbackService(
        FeedbackStore(s.table(resources.FEEDBACK)),
        idempotency_table=resources.IDEMPOTENCY.physical_name(s.settings.stage),
        dynamodb_client=dynamodb_client,
    )


def feedback_service(s: HasFeedback) -> FeedbackService:
    """The process's feedback service: the composition root builds and keeps it."""
    return s.feedback
