"""The per-process policy cache holds at most POLICY_CACHE_ENTRIES principals (issue 18: every
person signing in has a key of their own; a long-running process kept each one forever)."""

from __future__ import annotations

from typing import Any

from citegate.governance.policy import store
from citegate.governance.policy.store import PolicyStore


class Policies:
    def __init__(self) -> None:
        self.reads = 0

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.reads += 1
        return {}  # no policy of its own


def test_the_policy_cache_keeps_the_most_recently_read_principals(monkeypatch: Any) -> None:
    monkeypatch.setattr(store, "POLICY_CACHE_ENTRIES", 100)
    policies = Policies()
    cache = PolicyStore(policies, credentials=None, cache_seconds=60)
    for i in range(1000):
        cache.find(f"human:user-{i}")
    assert len(cache._cache) == 100
    assert set(cache._cache) == {f"human:user-{i}" for i in range(900, 1000)}
    reads = policies.reads
    cache.find("human:user-999")  # still cached
    assert policies.reads == reads
    cache.find("human:user-0")  # dropped: read again
    assert policies.reads == reads + 1 and len(cache._cache) == 100
