"""Where a figure comes from: the commit it was measured on, when, and how busy the machine was."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def git_commit() -> str:
    """The short commit, with "+dirty" when the working tree has changes."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def stamp() -> dict[str, str]:
    return {
        "commit": git_commit(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average": loadavg(),
    }
