"""Sources and their sync runs in one DynamoDB table, under their knowledge base.

A source is the item ("source#<id>"); its runs sort after it by start time
("run#<source id>#<started>#<run id>"), so a source's latest runs are one query. An S3 source's
event markers ("object#<source id>#<key>") keep the sequencer of the newest event applied to each
object, so an older event arriving late is recognised and dropped. The sync lease
is two attributes of the source item, taken and given back by conditional writes: DynamoDB lets
one writer through, so two syncs of a source never run at once, on one machine or many.
"""

from __future__ import annotations

import builtins
import time
from typing import Any

from boto3.dynamodb.conditions import Attr, Key

from citegate.knowledge.sources.model import Source, SyncRun
from citegate.platform.dynamo import from_item, is_conditional_failure, query_all, scan_all, to_item, utc_now
from citegate.platform.errors import Conflict, NotFound

SOURCE = "source#"
RUN = "run#"
OBJECT = "object#"
LEASE_FIELDS = ("lease_run", "lease_until")


class SourceNotFound(NotFound):
    kind = "source_not_found"


class RunNotFound(NotFound):
    kind = "run_not_found"


class SyncInProgress(Conflict):
    kind = "sync_in_progress"


def _source_key(kb_id: str, source_id: str) -> dict[str, str]:
    return {"kb_id": kb_id, "sk": SOURCE + source_id}


def _run_sk(run: SyncRun) -> str:
    return f"{RUN}{run.source_id}#{run.started_at}#{run.run_id}"


def _source(item: dict[str, Any]) -> Source:
    data = {k: v for k, v in from_item(item).items() if k not in ("sk", *LEASE_FIELDS)}
    return Source.model_validate(data)


class SourceStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    # -- sources -------------------------------------------------------------------------------

    def create(self, source: Source) -> Source:
        item = to_item(source.model_dump())
        item["sk"] = SOURCE + source.source_id
        self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(sk)")
        return source

    def find(self, kb_id: str, source_id: str) -> Source | None:
        item = self._table.get_item(Key=_source_key(kb_id, source_id), ConsistentRead=True).get("Item")
        return _source(item) if item else None

    def get(self, kb_id: str, source_id: str) -> Source:
        source = self.find(kb_id, source_id)
        if source is None:
            raise SourceNotFound(
                f"source {source_id!r} not found in knowledge base {kb_id!r}",
                details={"kb_id": kb_id, "source_id": source_id},
            )
        return source

    def list(self, kb_id: str) -> builtins.list[Source]:
        items = query_all(
            self._table,
            KeyConditionExpression=Key("kb_id").eq(kb_id) & Key("sk").begins_with(SOURCE),
            ConsistentRead=True,
        )
        return [_source(i) for i in items]

    def all(self) -> builtins.list[Source]:
        """Every source of every knowledge base (the local scheduler's pass; a handful of items)."""
        return [_source(i) for i in scan_all(self._table, FilterExpression=Attr("sk").begins_with(SOURCE))]

    def update(
        self, kb_id: str, source_id: str, changes: dict[str, Any], remove: tuple[str, ...] = ()
    ) -> Source:
        changes = dict(changes, updated_at=utc_now())
        expression = "SET " + ", ".join(f"#{k} = :{k}" for k in changes)
        if remove:
            expression += " REMOVE " + ", ".join(f"#{k}" for k in remove)
        try:
            item = self._table.update_item(
                Key=_source_key(kb_id, source_id),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(sk)",
                ExpressionAttributeNames={f"#{k}": k for k in (*changes, *remove)},
                ExpressionAttributeValues={f":{k}": to_item(v) for k, v in changes.items()},
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except Exception as error:
            if is_conditional_failure(error):
                raise SourceNotFound(
                    f"source {source_id!r} not found in knowledge base {kb_id!r}",
                    details={"kb_id": kb_id, "source_id": source_id},
                ) from error
            raise
        return _source(item)

    def delete(self, kb_id: str, source_id: str) -> bool:
        previous = self._table.delete_item(Key=_source_key(kb_id, source_id), ReturnValues="ALL_OLD")
        runs = [
            item
            for prefix in (RUN, OBJECT)
            for item in query_all(
                self._table,
                KeyConditionExpression=Key("kb_id").eq(kb_id)
                & Key("sk").begins_with(f"{prefix}{source_id}#"),
                ProjectionExpression="kb_id, sk",
            )
        ]
        with self._table.batch_writer() as batch:
            for run in runs:
                batch.delete_item(Key={"kb_id": run["kb_id"], "sk": run["sk"]})
        return "Attributes" in previous

    # -- the lease -----------------------------------------------------------------------------

    def acquire(self, kb_id: str, source_id: str, run_id: str, seconds: float) -> Source:
        """Take the source's sync lease for `run_id`, or SyncInProgress while another run holds it.

        A run that dies holding it (a killed process, a timed-out Lambda) blocks the source only
        until the lease's time is up; a live run renews it as it goes (`renew`)."""
        now = time.time()
        try:
            item = self._table.update_item(
                Key=_source_key(kb_id, source_id),
                UpdateExpression="SET lease_run = :run, lease_until = :until",
                ConditionExpression="attribute_exists(sk) AND "
                "(attribute_not_exists(lease_until) OR lease_until < :now)",
                ExpressionAttributeValues={
                    ":run": run_id,
                    ":until": to_item(now + seconds),
                    ":now": to_item(now),
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except Exception as error:
            if not is_conditional_failure(error):
                raise
            current = self._table.get_item(Key=_source_key(kb_id, source_id), ConsistentRead=True).get("Item")
            if current is None:
                raise SourceNotFound(
                    f"source {source_id!r} not found in knowledge base {kb_id!r}",
                    details={"kb_id": kb_id, "source_id": source_id},
                ) from error
            raise SyncInProgress(
                f"source {source_id!r} is already syncing (run {current.get('lease_run')})",
                details={"kb_id": kb_id, "source_id": source_id, "run_id": str(current.get("lease_run"))},
            ) from error
        return _source(item)

    def renew(self, kb_id: str, source_id: str, run_id: str, seconds: float) -> bool:
        """Extend the lease while `run_id` still holds it; False when it was lost."""
        try:
            self._table.update_item(
                Key=_source_key(kb_id, source_id),
                UpdateExpression="SET lease_until = :until",
                ConditionExpression="lease_run = :run",
                ExpressionAttributeValues={":run": run_id, ":until": to_item(time.time() + seconds)},
            )
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def release(self, kb_id: str, source_id: str, run_id: str, last_run: dict[str, Any]) -> None:
        """Give the lease back and record the run's summary on the source, in one write."""
        try:
            self._table.update_item(
                Key=_source_key(kb_id, source_id),
                UpdateExpression="SET last_run = :last REMOVE lease_run, lease_until",
                ConditionExpression="lease_run = :run",
                ExpressionAttributeValues={":run": run_id, ":last": to_item(last_run)},
            )
        except Exception as error:
            if not is_conditional_failure(error):
                raise  # else the lease was lost (or the source deleted): nothing to give back

    # -- runs ----------------------------------------------------------------------------------

    def put_run(self, run: SyncRun) -> None:
        item = to_item(run.model_dump())
        item["sk"] = _run_sk(run)
        self._table.put_item(Item=item)

    def runs(self, kb_id: str, source_id: str, limit: int = 20) -> builtins.list[SyncRun]:
        """The source's latest runs, newest first."""
        response = self._table.query(
            KeyConditionExpression=Key("kb_id").eq(kb_id) & Key("sk").begins_with(f"{RUN}{source_id}#"),
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [
            SyncRun.model_validate({k: v for k, v in from_item(i).items() if k != "sk"})
            for i in response.get("Items", [])
        ]

    def find_run(self, kb_id: str, source_id: str, run_id: str) -> SyncRun | None:
        """One run by its id (a source keeps few runs: one query over them)."""
        items = query_all(
            self._table,
            KeyConditionExpression=Key("kb_id").eq(kb_id) & Key("sk").begins_with(f"{RUN}{source_id}#"),
            FilterExpression=Attr("run_id").eq(run_id),
            ConsistentRead=True,
        )
        for item in items:
            return SyncRun.model_validate({k: v for k, v in from_item(item).items() if k != "sk"})
        return None

    # -- S3 event order ------------------------------------------------------------------------

    def advance_object(self, kb_id: str, source_id: str, key: str, sequencer: str) -> str | None:
        """Record `sequencer` as the newest event applied to object `key`, unless an equal or
        newer one was: then None (the event is stale). Else the previous sequencer ("" if none),
        to hand back to `restore_object` if applying the event fails."""
        sk = f"{OBJECT}{source_id}#{key}"
        try:
            item = self._table.update_item(
                Key={"kb_id": kb_id, "sk": sk},
                UpdateExpression="SET #seq = :seq, updated_at = :now",
                ConditionExpression="attribute_not_exists(#seq) OR #seq < :seq",
                ExpressionAttributeNames={"#seq": "sequencer"},
                ExpressionAttributeValues={":seq": sequencer, ":now": utc_now()},
                ReturnValues="UPDATED_OLD",
            )
        except Exception as error:
            if is_conditional_failure(error):
                return None
            raise
        return str(item.get("Attributes", {}).get("sequencer", ""))

    def restore_object(self, kb_id: str, source_id: str, key: str, sequencer: str, previous: str) -> None:
        """Undo `advance_object` (the event could not be applied, so its retry must not be dropped),
        unless a newer event has advanced the marker since."""
        sk = f"{OBJECT}{source_id}#{key}"
        try:
            if previous:
                self._table.update_item(
                    Key={"kb_id": kb_id, "sk": sk},
                    UpdateExpression="SET #seq = :previous",
                    ConditionExpression="#seq = :seq",
                    ExpressionAttributeNames={"#seq": "sequencer"},
                    ExpressionAttributeValues={":seq": sequencer, ":previous": previous},
                )
            else:
                self._table.delete_item(
                    Key={"kb_id": kb_id, "sk": sk},
                    ConditionExpression="#seq = :seq",
                    ExpressionAttributeNames={"#seq": "sequencer"},
                    ExpressionAttributeValues={":seq": sequencer},
                )
        except Exception as error:
            if not is_conditional_failure(error):
                raise
