"""Fixed-window counters in DynamoDB: atomic, so a limit holds under concurrent calls.

Rate limits (`hit_all`) are counted with leases: a process claims a share of a limit's window in
one conditional write and spends it locally, so most calls cost no round trip, and the count in
DynamoDB never passes the limit. A process's first claim is one call; each claim after doubles,
up to `lease_size` (1/20 of the limit, at most 50 calls), and a new window starts from half the
last size. So a short-lived process claims about what it spends, a busy one claims rarely, and
small limits (under 40 a minute) lease one call at a time and stay exact. What a lease leaves
unspent at the end of its window is lost: a caller may be refused up to 1/20 of its limit early
per process holding a lease. Once a window's limit is reached, this process refuses further
calls in that window without asking again (counts only grow within a window).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from citegate.platform.dynamo import cancellation_reasons, is_conditional_failure
from citegate.platform.errors import RateLimited

LEASE_SHARE = 20  # a lease is at most 1/LEASE_SHARE of the limit ...
LEASE_MAX = 50  # ... and at most this many calls
# Leases kept before those of ended windows are dropped: every source address has a key of its
# own, and a long-running process must not keep one for each of them forever.
LEASES_KEPT = 4096


def lease_size(limit: int) -> int:
    """How many calls one claim counts for a limit (1 keeps small limits exact)."""
    return max(1, min(LEASE_MAX, limit // LEASE_SHARE))


class _NoRoom(Exception):
    """A claim that would pass `key`'s limit: nothing of the claim was counted."""

    def __init__(self, key: str, limit: int) -> None:
        super().__init__(f"no room under {limit} for {key}")
        self.key, self.limit = key, limit


@dataclass
class _Lease:
    window: int
    remaining: int = 0  # claimed in DynamoDB, not yet spent by this process
    exhausted: bool = False  # the window's limit was reached
    claim: int = 1  # the next claim's size (before lease_size caps it)


class Counters:
    def __init__(self, table: Any) -> None:
        self._table = table
        self._leases: dict[tuple[str, int], _Lease] = {}
        self._lock = threading.Lock()

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
    def _count(key: str, window: int, window_seconds: int, amount: int) -> dict[str, Any]:
        """The ADD that counts `amount` against `key` in `window` (the item expires a window later)."""
        return {
            "Key": {"counter_key": f"{key}#{window}"},
            "UpdateExpression": "ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
            "ExpressionAttributeNames": {"#n": "count"},
            "ExpressionAttributeValues": {":amount": amount, ":expires": int((window + 2) * window_seconds)},
        }

    @classmethod
    def _update(cls, key: str, limit: int, window: int, window_seconds: int, amount: int) -> dict[str, Any]:
        """The conditional ADD that counts `amount` unless it would pass `limit`."""
        update = cls._count(key, window, window_seconds, amount)
        update["ConditionExpression"] = "attribute_not_exists(#n) OR #n <= :room"
        update["ExpressionAttributeValues"][":room"] = limit - amount
        return update

    def hit_all(self, limits: Sequence[tuple[str, int]], window_seconds: int = 60) -> None:
        """Count one call against every (key, limit), or against none of them when any is reached
        (a refused call spends nothing). Calls are spent from this process's leases; keys without
        one are claimed together in one round trip (see the module's docstring)."""
        if not limits:
            return
        window, retry_after = self._window(window_seconds)
        reserved, short = self._reserve(limits, window, window_seconds, retry_after)
        if not short:
            return
        with self._lock:
            claims = [
                (key, limit, min(lease_size(limit), self._lease(key, window, window_seconds).claim))
                for key, limit in short
            ]
        try:
            claims = self._claim_or_last_calls(claims, window, window_seconds)
        except Exception as error:
            with self._lock:
                for key in reserved:  # given back: a call that is not made spends nothing
                    self._lease(key, window, window_seconds).remaining += 1
                if isinstance(error, _NoRoom):
                    self._lease(error.key, window, window_seconds).exhausted = True
            if isinstance(error, _NoRoom):
                raise self._limited(error.key, error.limit, window_seconds, retry_after) from error
            raise
        with self._lock:
            for key, limit, amount in claims:
                lease = self._lease(key, window, window_seconds)
                lease.remaining += amount - 1  # one is this call's
                lease.claim = min(lease_size(limit), amount * 2)

    def _lease(self, key: str, window: int, window_seconds: int) -> _Lease:
        """This process's lease on `key` for `window`; a lease of an earlier window is dropped, and
        the new one starts claiming half as much."""
        lease = self._leases.get((key, window_seconds))
        if lease is None or lease.window != window:
            claim = max(1, lease.claim // 2) if lease is not None else 1
            if lease is None and len(self._leases) >= LEASES_KEPT:
                self._drop_ended()
            lease = self._leases[(key, window_seconds)] = _Lease(window, claim=claim)
        return lease

    def _drop_ended(self) -> None:
        """Drop the leases of windows that have ended (their calls can no longer be spent)."""
        now = time.time()
        for found, lease in list(self._leases.items()):
            if lease.window < int(now // found[1]):
                del self._leases[found]

    def _reserve(
        self, limits: Sequence[tuple[str, int]], window: int, window_seconds: int, retry_after: int
    ) -> tuple[list[str], list[tuple[str, int]]]:
        """Spend one leased call per key that has one; returns those keys and the ones to claim.
        Refuses at once a key whose limit this process saw reached in this window."""
        with self._lock:
            for key, limit in limits:
                if self._lease(key, window, window_seconds).exhausted:
                    raise self._limited(key, limit, window_seconds, retry_after)
            reserved: list[str] = []
            short: list[tuple[str, int]] = []
            for key, limit in limits:
                lease = self._lease(key, window, window_seconds)
                if lease.remaining > 0:
                    lease.remaining -= 1
                    reserved.append(key)
                else:
                    short.append((key, limit))
            return reserved, short

    def _claim_or_last_calls(
        self, claims: list[tuple[str, int, int]], window: int, window_seconds: int
    ) -> list[tuple[str, int, int]]:
        """The claims as made: when whole leases find no room, the limit's last calls are claimed
        one at a time."""
        try:
            self._claim(claims, window, window_seconds)
        except _NoRoom:
            if all(amount == 1 for _, _, amount in claims):
                raise
            claims = [(key, limit, 1) for key, limit, _ in claims]
            self._claim(claims, window, window_seconds)
        return claims

    def _claim(self, claims: Sequence[tuple[str, int, int]], window: int, window_seconds: int) -> None:
        """Count every (key, limit, amount) in one round trip, or raise _NoRoom for the first key
        whose limit has no room; then nothing was counted."""
        if len(claims) == 1:
            key, limit, amount = claims[0]
            try:
                self._table.update_item(**self._update(key, limit, window, window_seconds, amount))
            except Exception as error:
                if is_conditional_failure(error):
                    raise _NoRoom(key, limit) from error
                raise
            return
        actions = [
            {
                "Update": {
                    "TableName": self._table.name,
                    **self._update(key, limit, window, window_seconds, amount),
                }
            }
            for key, limit, amount in claims
        ]
        try:
            self._table.meta.client.transact_write_items(TransactItems=actions)
        except Exception as error:
            reasons = cancellation_reasons(error)
            if reasons is None or "ConditionalCheckFailed" not in reasons:
                raise
            key, limit, _ = claims[reasons.index("ConditionalCheckFailed")]
            raise _NoRoom(key, limit) from error

    def current(self, key: str, window_seconds: int) -> int:
        window, _ = self._window(window_seconds)
        item = self._table.get_item(Key={"counter_key": f"{key}#{window}"}, ConsistentRead=True).get("Item")
        return int(item["count"]) if item else 0

    def add(self, key: str, amount: int, window_seconds: int) -> None:
        """Count without a limit (spent tokens are counted even when they overshoot the budget)."""
        window, _ = self._window(window_seconds)
        self._table.update_item(**self._count(key, window, window_seconds, amount))
