"""Fixed-window counters in DynamoDB: atomic, so a limit holds under concurrent calls."""

from __future__ import annotations

import time
from typing import Any

from citegate.errors import RateLimited
from citegate.store.dynamo import is_conditional_failure


class Counters:
    def __init__(self, table: Any) -> None:
        self._table = table

    def hit(self, key: str, limit: int, window_seconds: int = 60, amount: int = 1) -> int:
        """Count `amount` against `key` in the current window, or raise RateLimited past `limit`."""
        now = time.time()
        window = int(now // window_seconds)
        retry_after = max(1, int((window + 1) * window_seconds - now) + 1)
        try:
            response = self._table.update_item(
                Key={"counter_key": f"{key}#{window}"},
                UpdateExpression="ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
                ConditionExpression="attribute_not_exists(#n) OR #n <= :room",
                ExpressionAttributeNames={"#n": "count"},
                ExpressionAttributeValues={
                    ":amount": amount,
                    ":room": limit - amount,
                    ":expires": int((window + 2) * window_seconds),
                },
                ReturnValues="UPDATED_NEW",
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise RateLimited(
                    f"rate limit of {limit} per {window_seconds}s reached for {key.split('#')[0]}",
                    details={"limit": limit, "window_seconds": window_seconds, "retry_after": retry_after},
                ) from error
            raise
        return int(response["Attributes"]["count"])

    def current(self, key: str, window_seconds: int) -> int:
        window = int(time.time() // window_seconds)
        item = self._table.get_item(Key={"counter_key": f"{key}#{window}"}, ConsistentRead=True).get("Item")
        return int(item["count"]) if item else 0

    def add(self, key: str, amount: int, window_seconds: int) -> None:
        """Count without a limit (spent tokens are counted even when they overshoot the budget)."""
        window = int(time.time() // window_seconds)
        self._table.update_item(
            Key={"counter_key": f"{key}#{window}"},
            UpdateExpression="ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
            ExpressionAttributeNames={"#n": "count"},
            ExpressionAttributeValues={":amount": amount, ":expires": int((window + 2) * window_seconds)},
        )
