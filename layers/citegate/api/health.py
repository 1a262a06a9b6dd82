"""What /healthz reports: each backend the service needs, checked cheaply."""

from __future__ import annotations

import time
from typing import Any, Protocol

from citegate import __version__
from citegate.knowledge.ports import HasIndex, HasKbs
from citegate.platform.ports import Configured


class Checked(Configured, HasIndex, HasKbs, Protocol):
    """What /healthz checks: the settings, the search index, the knowledge base table."""


def health(s: Checked) -> dict[str, Any]:
    checks: dict[str, Any] = {}

    def check(name: str, probe: Any) -> None:
        started = time.perf_counter()
        try:
            detail = probe()
            checks[name] = {
                "ok": True,
                "ms": round((time.perf_counter() - started) * 1000, 1),
                **(detail or {}),
            }
        except Exception as error:  # a health probe reports; it never raises
            checks[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}

    check("metadata", lambda: (s.kbs.find("__healthz__"), None)[1])
    check("search", lambda: {"engine": s.index.engine, "chunks": s.index.count()})
    ok = all(c["ok"] for c in checks.values())
    return {
        "status": "ok" if ok else "degraded",
        "version": __version__,
        "runtime": s.settings.runtime,
        "embedder": s.settings.embedder,
        "checks": checks,
    }
