"""Search results (1 h) and read pages (6 h) in DynamoDB (spec 001 8.1).

An entry is fresh until `fresh_until`; after that a page entry with an ETag or Last-Modified is
revalidated (a 304 makes it fresh again), so DynamoDB's TTL (`expires_at`) keeps it longer than
its freshness. Bodies are zlib-compressed; an entry still above DynamoDB's item limit is not
cached. A cache that fails never fails the request: it is only a cache.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from citegate.platform.observability import logger

SEARCH_TTL_SECONDS = 3600
PAGE_TTL_SECONDS = 6 * 3600
REVALIDATE_GRACE_SECONDS = 24 * 3600  # how long a stale page is kept for a conditional request
_MAX_ITEM_BYTES = 350 * 1024  # below DynamoDB's 400 KB, with room for the other attributes


def cache_key(kind: str, *parts: Any) -> str:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"{kind}#{digest}"


@dataclass
class CacheEntry:
    key: str
    value: dict[str, Any]
    fresh_until: float
    etag: str | None = None
    last_modified: str | None = None

    def fresh(self, now: float) -> bool:
        return now < self.fresh_until

    @property
    def revalidatable(self) -> bool:
        return bool(self.etag or self.last_modified)


class WebCache:
    def __init__(self, table: Any, *, clock: Callable[[], float] = time.time) -> None:
        self._table = table
        self.clock = clock

    def get(self, key: str) -> CacheEntry | None:
        try:
            item = self._table.get_item(Key={"cache_key": key}).get("Item")
        except Exception:
            logger.warning("web cache read failed", extra={"cache_key": key})
            return None
        # DynamoDB deletes expired items lazily, so expiry is checked here as well.
        if not item or int(item.get("expires_at", 0)) <= self.clock():
            return None
        try:
            body = item["body"]
            value = json.loads(zlib.decompress(bytes(getattr(body, "value", body))))
        except (zlib.error, ValueError, KeyError):
            return None
        return CacheEntry(
            key=key,
            value=value,
            fresh_until=float(item.get("fresh_until", 0)),
            etag=item.get("etag"),
            last_modified=item.get("last_modified"),
        )

    def put(
        self,
        key: str,
        value: dict[str, Any],
        ttl_seconds: int,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> bool:
        now = self.clock()
        body = zlib.compress(json.dumps(value, ensure_ascii=False).encode(), 6)
        if len(body) > _MAX_ITEM_BYTES:
            return False
        keep = ttl_seconds + (REVALIDATE_GRACE_SECONDS if (etag or last_modified) else 0)
        item: dict[str, Any] = {
            "cache_key": key,
            "body": body,
            "fresh_until": int(now + ttl_seconds),
            "expires_at": int(now + keep),
            "stored_at": int(now),
        }
        if etag:
            item["etag"] = etag
        if last_modified:
            item["last_modified"] = last_modified
        try:
            self._table.put_item(Item=item)
        except Exception:
            logger.warning("web cache write failed", extra={"cache_key": key})
            return False
        return True

    def refresh(self, entry: CacheEntry, ttl_seconds: int) -> None:
        """A 304: the stored page is current again for another `ttl_seconds`."""
        self.put(entry.key, entry.value, ttl_seconds, etag=entry.etag, last_modified=entry.last_modified)
