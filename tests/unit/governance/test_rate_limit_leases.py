"""A process keeps at most LEASES_KEPT rate-limit leases once their windows have ended (issue 18:
every source address has a lease of its own; a long-running process kept each one forever)."""

from __future__ import annotations

from typing import Any

from citegate.governance import ratelimit
from citegate.governance.ratelimit import Counters


class Table:
    name = "counters"

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        return {}


def test_leases_of_ended_windows_are_dropped(monkeypatch: Any) -> None:
    monkeypatch.setattr(ratelimit, "LEASES_KEPT", 100)
    clock = [1_000_000.0]
    monkeypatch.setattr(ratelimit.time, "time", lambda: clock[0])
    counters = Counters(Table())
    for minute in range(10):  # 60 new addresses a minute: 600 leases without the bound
        for address in range(60):
            counters.hit_all([(f"ip:10.0.{minute}.{address}", 1000)])
        clock[0] += 60
    clock[0] -= 60  # still in the last minute
    assert len(counters._leases) <= 100 + 60
    current = int(clock[0] // 60)
    kept = {key for (key, _), lease in counters._leases.items() if lease.window == current}
    assert kept == {f"ip:10.0.9.{address}" for address in range(60)}  # the window's own are all kept
