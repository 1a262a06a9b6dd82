"""`citegate` client commands as a user runs them: subprocesses against a real `citegate serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from citegate.knowledge.ingest.selection import select_files
from tests.e2e.conftest import ROOT, TOKEN

SAMPLES = ROOT / "samples"


@pytest.fixture
def server(server_factory: Any) -> Any:
    return server_factory({"CITEGATE_EMBEDDER": "hashing"}).start()


def run(server: Any, *args: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CITEGATE_URL": server.url, "RAG_API_TOKEN": token}
    return subprocess.run(
        [sys.executable, "-m", "citegate.clients.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ingest_ask_retrieve_and_resume(server: Any, tmp_path: Path) -> None:
    created = run(server, "kb", "create", "CLI docs", "--id", "cli", "--status", "approved")
    assert created.returncode == 0, created.stderr
    listed = run(server, "kb", "list", "--json")
    assert [kb["kb_id"] for kb in json.loads(listed.stdout)["knowledge_bases"]] == ["cli"]

    state = tmp_path / "state.json"
    first = run(server, "ingest", str(SAMPLES), "--kb", "cli", "--state", str(state))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "failed 0" in first.stdout and "skipped 0" in first.stdout
    assert (
        f"{len(select_files([SAMPLES]).files)}/" in first.stderr and "files done" in first.stderr
    )  # the bar
    done = json.loads(state.read_text())[f"{server.url}|cli"]
    assert {"solar-system.md", "lighthouses.pdf", "tea-guide.txt", "长城.md"} <= set(done)

    again = run(server, "ingest", str(SAMPLES), "--kb", "cli", "--state", str(state))
    assert again.returncode == 0 and f"skipped {len(done)}" in again.stdout and "ingested 0" in again.stdout

    asked = run(server, "ask", "How high is Olympus Mons?", "--kb", "cli")
    assert asked.returncode == 0, asked.stderr
    # samples/README.md quotes the demo questions ("about 22 km"), so it may be cited too; any cited
    # source will do (solar-system.md says "22 kilometres").
    assert any(h in asked.stdout for h in ("22 km", "22 kilometres")), asked.stdout
    assert "\n[1] " in asked.stdout, asked.stdout

    as_json = json.loads(run(server, "ask", "How high is Olympus Mons?", "--kb", "cli", "--json").stdout)
    assert as_json["no_answer"] is False and as_json["citations"]
    assert {"ref_id", "source_name", "snippet"} <= set(as_json["citations"][0])

    found = json.loads(run(server, "retrieve", "Olympus Mons", "--kb", "cli", "--json").stdout)
    assert found["results"] and found["results"][0]["ref_id"].startswith("r_")

    documents = server.client().get("/v1/kb/cli/documents").json()["documents"]
    task = run(server, "tasks", documents[0]["task_id"], "--json")
    assert task.returncode == 0 and json.loads(task.stdout)["status"] == "succeeded"


def test_ingest_json_prints_one_object_per_file_and_a_summary(server: Any, tmp_path: Path) -> None:
    """`ingest --json`, as `--json` elsewhere: JSON on stdout, here one object per line: each file
    when its task ends (name, status succeeded|skipped|failed, task_id, chunks, error), then the
    summary. The progress bar on stderr counts what is done, what was sent and what failed."""
    assert run(server, "kb", "create", "JSON", "--id", "json").returncode == 0
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tea.md").write_text("# Tea\n\nGreen tea is brewed at 80 degrees for two minutes.")
    (folder / "notes.txt").write_text("Coffee is brewed at 93 degrees. " * 20)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    # A page and the markup it was built from, as documentation builds ship them: only the page goes.
    (folder / "guide.html").write_text(
        "<html><body><h1>Guide</h1><p>Steep white tea for three minutes.</p></body></html>"
    )
    (folder / "guide.txt").write_text("Guide\n=====\n\nSteep white tea for three minutes.\n")
    state = str(tmp_path / "state.json")

    first = run(server, "ingest", str(folder), "--kb", "json", "--state", state, "--json")
    assert first.returncode == 1, first.stdout + first.stderr  # one file failed
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    files = {f["name"]: f for f in lines if f["type"] == "file"}
    assert set(files) == {"tea.md", "notes.txt", "broken.pdf", "guide.html"}
    assert lines[-1] == {
        "type": "summary",
        "kb": "json",
        "total": 4,
        "succeeded": 3,
        "skipped": 0,
        "failed": 1,
        "chunks": sum(files[name]["chunks"] for name in ("tea.md", "notes.txt", "guide.html")),
        "left_out": 1,
    }
    assert "left out 1 source copy of rendered pages" in first.stderr
    assert files["tea.md"]["status"] == "succeeded" and files["tea.md"]["chunks"] >= 1
    assert files["tea.md"]["task_id"].startswith("t_") and files["tea.md"]["error"] is None
    assert files["broken.pdf"]["status"] == "failed" and "PDF" in files["broken.pdf"]["error"]
    assert "4/4 files done" in first.stderr and "4 sent" in first.stderr and "1 failed" in first.stderr

    again = run(server, "ingest", str(folder), "--kb", "json", "--state", state, "--json")
    statuses = {
        f["name"]: f["status"] for f in map(json.loads, again.stdout.splitlines()) if f["type"] == "file"
    }
    assert statuses == {
        "tea.md": "skipped",
        "notes.txt": "skipped",
        "broken.pdf": "failed",
        "guide.html": "skipped",
    }


def test_failures_are_reported_with_exit_code_1(server: Any, tmp_path: Path) -> None:
    assert run(server, "kb", "create", "Mixed", "--id", "mixed").returncode == 0
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nTea is brewed at 80 degrees for green tea.")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    result = run(server, "ingest", str(folder), "--kb", "mixed", "--state", str(tmp_path / "s.json"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED broken.pdf" in result.stderr and "ingested 1" in result.stdout


def test_exit_codes_for_auth_usage_and_unavailable(server: Any, tmp_path: Path) -> None:
    refused = run(server, "kb", "list", token="not-the-token")
    assert refused.returncode == 3 and "401" in refused.stderr
    assert run(server, "ask").returncode == 2  # argparse: the question and --kb are missing
    assert run(server, "ingest", str(tmp_path / "nothing"), "--kb", "x").returncode == 2
    missing_kb = run(server, "ask", "anything?", "--kb", "no-such-kb")
    assert missing_kb.returncode == 1 and "kb_not_found" in missing_kb.stderr

    class Down:
        url = "http://127.0.0.1:9"  # the discard port: nothing listens

    assert run(Down(), "kb", "list").returncode == 4


def test_sources_and_ingest_sync_mirror_a_folder(server_factory: Any, tmp_path: Path) -> None:
    """`citegate sources add|list|sync|runs` and `citegate ingest FOLDER --sync` (issue 29)."""
    root = tmp_path / "root"
    docs = root / "docs"
    docs.mkdir(parents=True)
    page = "# {0}\n\n" + "The {0} keeper lights the lamp at dusk and logs the weather. " * 10
    for name in ("alpha", "beta", "gamma"):
        (docs / f"{name}.md").write_text(page.format(name))
    server = server_factory({"CITEGATE_EMBEDDER": "hashing", "CITEGATE_LOCAL_INGEST_ROOT": str(root)}).start()
    assert run(server, "kb", "create", "Mirror", "--id", "mirror").returncode == 0

    added = run(server, "sources", "add", "docs", "--kb", "mirror", "--folder", str(docs), "--project", "p")
    assert added.returncode == 0, added.stderr
    source_id = added.stdout.split("\t")[0]
    assert source_id.startswith("src_") and "folder" in added.stdout
    listed = run(server, "sources", "list", "--kb", "mirror")
    assert source_id in listed.stdout and "on demand" in listed.stdout
    first = run(server, "sources", "sync", source_id, "--kb", "mirror", "--wait")
    assert first.returncode == 0, first.stderr
    assert "succeeded" in first.stdout and "added 3" in first.stdout
    (docs / "beta.md").unlink()
    second = run(server, "sources", "sync", source_id, "--kb", "mirror", "--wait", "--json")
    assert json.loads(second.stdout)["counts"]["deleted"] == 1
    runs = run(server, "sources", "runs", source_id, "--kb", "mirror")
    assert runs.returncode == 0 and len(runs.stdout.strip().splitlines()) == 2

    # ingest --sync mirrors a folder without a source: what is gone from it is deleted.
    assert run(server, "kb", "create", "Plain", "--id", "plain").returncode == 0
    state = str(tmp_path / "state.json")
    once = run(server, "ingest", str(docs), "--kb", "plain", "--sync", "--state", state)
    assert once.returncode == 0 and "ingested 2" in once.stdout, once.stdout + once.stderr
    (docs / "alpha.md").unlink()
    twice = run(
        server, "ingest", str(docs), "--kb", "plain", "--sync", "--state", str(tmp_path / "other.json")
    )
    assert twice.returncode == 0, twice.stderr
    assert "skipped 1" in twice.stdout and "deleted 1 gone from the folder" in twice.stdout, twice.stdout
    names = [d["source_name"] for d in server.client().get("/v1/kb/plain/documents").json()["documents"]]
    assert names == ["gamma.md"]
