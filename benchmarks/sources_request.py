"""A sync requested over the API answers before the work ends (issue 29): the local stack behind its
gateway, a folder source over a documentation folder, then

1. `POST …/sync`: the time to its 202 (the run `queued`), and the time until the run, done by the
   sync function (queue -> consumer -> state machine -> source_sync_worker), ends with its counts;
2. a second `POST …/sync` while the first runs: 409 `sync_in_progress`, and its time;
3. a sync with nothing changed: the 202's time and the run's.

    uv run python benchmarks/sources_request.py FOLDER [--limit N] [--embedder hashing]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _follow(client: Any, link: str, timeout: float = 7200) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = dict(client.get(link).json())
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="only the first N .html files (sorted)")
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "hashing"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/sources-request.json"))
    args = parser.parse_args()

    from starlette.testclient import TestClient

    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="citegate-sources-request-") as root:
        folder = Path(root) / "docs"
        if args.limit:
            folder.mkdir()
            for page in sorted(args.folder.glob("*.html"))[: args.limit]:
                shutil.copy(page, folder / page.name)
        else:
            shutil.copytree(args.folder, folder)
        os.environ.update(
            {
                "RAG_DATA_ROOT": str(Path(root) / "data"),
                "CITEGATE_EMBEDDER": args.embedder,
                "RAG_API_TOKEN": "bench",
                "CITEGATE_LOCAL_INGEST_ROOT": root,
            }
        )
        reset_settings()
        stack = LocalStack(get_settings()).start()
        from citegate.runtime.gateway import create_app

        results: dict[str, Any] = {"folder": str(args.folder), "limit": args.limit, "embedder": args.embedder}
        try:
            with TestClient(create_app(), headers={"Authorization": "Bearer bench"}) as client:
                assert client.post("/v1/kb", json={"kb_id": "bench", "name": "bench"}).status_code == 201
                source = client.post(
                    "/v1/kb/bench/sources",
                    json={"name": "docs", "settings": {"kind": "folder", "path": str(folder)}},
                ).json()
                sync = f"/v1/kb/bench/sources/{source['source_id']}/sync"
                files = sum(1 for p in folder.rglob("*") if p.is_file())
                print(f"{files} files from {args.folder} (load {_load()})", flush=True)
                for label in ("first", "unchanged"):
                    began = time.perf_counter()
                    answer = client.post(sync)
                    answered = time.perf_counter() - began
                    assert answer.status_code == 202, answer.text
                    again = time.perf_counter()
                    second = client.post(sync)
                    refused = time.perf_counter() - again
                    run = _follow(client, answer.json()["links"]["self"])
                    ended = time.perf_counter() - began
                    row = {
                        "sync": label,
                        "answered_ms": round(answered * 1000, 1),
                        "second_request": second.status_code,
                        "second_ms": round(refused * 1000, 1),
                        "run_status": run["status"],
                        "run_ended_s": round(ended, 1),
                        "run_duration_s": round((run["duration_ms"] or 0) / 1000, 1),
                        "counts": run["counts"],
                        "load": _load(),
                    }
                    results[label] = row
                    print(json.dumps(row), flush=True)
        finally:
            stack.stop()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
