"""Fixed-window counters in DynamoDB: atomic, so a limit holds under concurrent calls."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from citegate.errors import RateLimited
from citegate.store.dynamo import cancellation_reasons, is_conditional_failure


class Counters:
    def __init__(self, table: Any) -> None:
        self._table = table

    @staticmethod
    def _window(window_seconds: int) -> tuple[int, int]:
        """The current window's number and the seconds until the next one starts."""
        now = time.time()
        window = int(now // window_seconds)
        return window, max(1, int((window + 1) * window_seconds - now) + 1)

    @staticmethod
    def _limited(key: str, limit: int, window_seconds: int, retry_after: int) -> RateLimited:
        return RateLimited(
            f"rate limit of {limit} per {window_seconds}s reached for {key.split('#')[0]}",
            details={"limit": limit, "window_seconds": window_seconds, "retry_after": retry_after},
        )

    @staticmethod
    def _update(key: str, limit: int, window: int, window_seconds: int, amount: int) -> dict[str, Any]:
        """The conditional ADD that counts `amount` unless it would pass `limit`."""
        return {
            "Key": {"counter_key": f"{key}#{window}"},
            "UpdateExpression": "ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
            "ConditionExpression": "attribute_not_exists(#n) OR #n <= :room",
            "ExpressionAttributeNames": {"#n": "count"},
            "ExpressionAttributeValues": {
                ":amount": amount,
                ":room": limit - amount,
                ":expires": int((window + 2) * window_seconds),
            },
        }

    def hit(self, key: str, limit: int, window_seconds: int = 60, amount: int = 1) -> int:
        """Count `amount` against `key` in the current window, or raise RateLimited past `limit`."""
        window, retry_after = self._window(window_seconds)
        try:
            response = self._table.update_item(
                **self._update(key, limit, window, window_seconds, amount), ReturnValues="UPDATED_NEW"
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise self._limited(key, limit, window_seconds, retry_after) from error
            raise
        return int(response["Attributes"]["count"])

    def hit_all(self, limits: Sequence[tuple[str, int]], window_seconds: int = 60) -> None:
        """Count one call against every (key, limit) at once, or none of them when any is reached:
        one round trip (a transaction) instead of one per key, and a refused call spends nothing."""
        if not limits:
            return
        if len(limits) == 1:
            self.hit(*limits[0], window_seconds=window_seconds)
            return
        window, retry_after = self._window(window_seconds)
        actions = [
            {"Update": {"TableName": self._table.name, **self._update(key, limit, window, window_seconds, 1)}}
            for key, limit in limits
        ]
        try:
            self._table.meta.client.transact_write_items(TransactItems=actions)
        except Exception as error:
            reasons = cancellation_reasons(error)
            if reasons is None or "ConditionalCheckFailed" not in reasons:
                raise
            key, limit = limits[reasons.index("ConditionalCheckFailed")]
            raise self._limited(key, limit, window_seconds, retry_after) from error

    def current(self, key: str, window_seconds: int) -> int:
        window, _ = self._window(window_seconds)
        item = self._table.get_item(Key={"counter_key": f"{key}#{window}"}, ConsistentRead=True).get("Item")
        return int(item["count"]) if item else 0

    def add(self, key: str, amount: int, window_seconds: int) -> None:
        """Count without a limit (spent tokens are counted even when they overshoot the budget)."""
        window, _ = self._window(window_seconds)
        self._table.update_item(
            Key={"counter_key": f"{key}#{window}"},
            UpdateExpression="ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
            ExpressionAttributeNames={"#n": "count"},
            ExpressionAttributeValues={":amount": amount, ":expires": int((window + 2) * window_seconds)},
        )
