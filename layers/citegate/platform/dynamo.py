"""Small helpers around the boto3 DynamoDB resource API."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_in(days: int) -> int:
    return int((dt.datetime.now(dt.UTC) + dt.timedelta(days=days)).timestamp())


def to_item(value: Any) -> Any:
    """Python values to what the resource API accepts (floats become Decimals, None is dropped)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: to_item(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [to_item(v) for v in value]
    return value


def from_item(value: Any) -> Any:
    """DynamoDB values back to plain Python (Decimals become int or float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: from_item(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_item(v) for v in value]
    if isinstance(value, set):
        return sorted(from_item(v) for v in value)
    return value


def query_all(table: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = table.query(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return [from_item(i) for i in items]
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def scan_all(table: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = table.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return [from_item(i) for i in items]
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def is_conditional_failure(error: Exception) -> bool:
    response = getattr(error, "response", None) or {}
    return bool(response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def cancellation_reasons(error: Exception) -> list[str] | None:
    """The per-action codes of a cancelled transaction ("None" for an action that was fine), or
    None when the error is not a cancelled transaction."""
    response = getattr(error, "response", None) or {}
    if response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return None
    return [str(reason.get("Code") or "None") for reason in response.get("CancellationReasons") or []]


def batch_get(table: Any, keys: list[dict[str, Any]], *, consistent: bool = False) -> list[dict[str, Any]]:
    """Items by key, 100 per request, retrying what DynamoDB leaves unprocessed; `consistent`:
    strongly consistent reads. The resource's client returns them deserialised (numbers as
    Decimal, binary as Binary)."""
    client = table.meta.client
    items: list[dict[str, Any]] = []
    for start in range(0, len(keys), 100):
        chunk: dict[str, Any] = {"Keys": keys[start : start + 100]}
        if consistent:
            chunk["ConsistentRead"] = True
        request: dict[str, Any] = {table.name: chunk}
        while request:
            response = client.batch_get_item(RequestItems=request)
            items.extend(response.get("Responses", {}).get(table.name, []))
            request = response.get("UnprocessedKeys") or {}
    return items
