"""The README's main command, end to end: `citegate demo` on the embedded defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ROOT, _free_port


def test_the_demo_answers_with_citations_declines_and_streams_the_agents(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "RAG_DATA_ROOT": str(tmp_path / "data"),
        "RAG_API_TOKEN": "demo-token",
        "PORT": str(_free_port()),
    }
    env.pop("CITEGATE_EMBEDDER", None)  # the real default embedder
    done = subprocess.run(
        [sys.executable, "-m", "citegate.clients.cli", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.count("children  ok") == 4, out
    answered, declined = out.split("Q: How high is Olympus Mons?")[1].split(
        "Q: What is the boiling point of tungsten?"
    )
    assert "22 kilometres" in answered and "[1] solar-system.md" in answered, out
    declined, agents = declined.split("Q (/api/v2/query, streamed):")
    assert "(no answer)" in declined and "reason:" in declined, out
    assert agents.count("[search]") >= 2 and "双智能体正在工作" in agents, out
    assert "[1] " in agents and "A: " in agents, out
    # Where a person takes over: the example docs with the widget, the script, the console.
    assert "/example/" in agents and "/widget.js" in agents and "/console/" in agents, out
