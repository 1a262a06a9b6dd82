"""Sources (issue 29): a real documentation folder synced three times, and the same files as a
website on a loopback static server (a benchmark: prints figures, asserts nothing).

On the in-process local stack (`citegate serve`'s, with its queue consumer running), a copy of
the folder is a folder source of a fresh knowledge base:

1. first sync: every file is new; the sync's own time (list, hash, store, queue) and then the
   time until every queued ingestion finished;
2. second sync, nothing changed: its time, and the embedder's calls and texts embedded (0);
3. third sync after 10 files changed and 5 deleted: what it found, its time, and the
   embedder's texts (only the changed files' chunks that were not in the embedding cache).

With --website, the same three syncs of a website source crawling the same files from a loopback
static server (Last-Modified / If-Modified-Since: unchanged pages answer 304).

    uv run python benchmarks/sources_sync.py FOLDER [--website] [--embedder hashing]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def wait_indexed(s: Any, kb_id: str, timeout: float = 7200) -> tuple[int, int]:
    """Until no document of the knowledge base is queued: (indexed, failed)."""
    deadline = time.monotonic() + timeout
    while True:
        documents = s.documents.list(kb_id)
        if not any(d.status in ("queued", "running") for d in documents) or time.monotonic() > deadline:
            return sum(d.status == "indexed" for d in documents), sum(d.status == "failed" for d in documents)
        time.sleep(1.0)


class Counting:
    """Counts the embedder's calls (embed_documents) around the real one."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.texts = inner, 0, 0

    def embed_documents(self, texts: list[str]) -> Any:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def three_syncs(s: Any, kb: Any, source: Any, change: Any, counting: Counting) -> list[dict[str, Any]]:
    figures = []
    for label in ("first", "unchanged", "10 changed, 5 deleted"):
        if label.startswith("10"):
            change()
        calls, texts, misses = counting.calls, counting.texts, s.embedder.misses
        started = time.perf_counter()
        run = s.source_service.sync(kb, source.source_id, trigger="cli")
        sync_s = time.perf_counter() - started
        indexed, failed = wait_indexed(s, kb.kb_id)
        total_s = time.perf_counter() - started
        figures.append(
            {
                "sync": label,
                "status": run.status,
                "counts": run.counts.model_dump(),
                "sync_s": round(sync_s, 2),
                "until_indexed_s": round(total_s, 2),
                "embedder_calls": counting.calls - calls,
                "texts_embedded": s.embedder.misses - misses,
                "texts_sent_to_embedder": counting.texts - texts,
                "documents_indexed": indexed,
                "documents_failed": failed,
                "chunks_in_index": s.index.count(kb_id=kb.kb_id),
                "load": _load(),
            }
        )
        print(json.dumps(figures[-1]), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "hashing"))
    parser.add_argument("--website", action="store_true", help="also sync it as a website on loopback")
    parser.add_argument("--all-files", action="store_true", help="keep source copies (Sphinx _sources/)")
    parser.add_argument("--website-only", action="store_true", help="only the website's three syncs")
    parser.add_argument("--out", type=Path, default=Path("bench-results/sources.json"))
    args = parser.parse_args()

    from citegate.knowledge.sources.model import CreateSourceRequest
    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="citegate-sources-bench-") as root:
        folder = Path(root) / "docs"
        shutil.copytree(args.folder, folder)
        os.environ.update(
            {
                "RAG_DATA_ROOT": str(Path(root) / "data"),
                "CITEGATE_EMBEDDER": args.embedder,
                "RAG_API_TOKEN": "bench",
                "CITEGATE_LOCAL_INGEST_ROOT": root,
                "CITEGATE_WEB_ALLOW_LOOPBACK": "true",
            }
        )
        reset_settings()
        stack = LocalStack(get_settings()).start()
        results: dict[str, Any] = {"folder": str(args.folder), "embedder": args.embedder}
        try:
            s = stack.services
            counting = Counting(s.embedder.inner)
            s.embedder.inner = counting
            from citegate.knowledge.bases import create_kb
            from citegate.knowledge.schemas.kb import CreateKbRequest
            from citegate.platform.principal import Principal

            admin = Principal(id="bench", type="human", tenant_id=s.settings.default_tenant)
            kb = create_kb(s, CreateKbRequest(kb_id="bench", name="bench"), admin)
            request = CreateSourceRequest.model_validate(
                {
                    "name": "docs",
                    "settings": {"kind": "folder", "path": str(folder), "keep_source_copies": args.all_files},
                }
            )
            source = s.source_service.create(kb, request, "bench")
            from citegate.knowledge.sources.kinds import folder_listing

            names = [e.path for e in folder_listing(source.typed_settings(), s.settings).entries]
            results["files"] = len(names)
            print(f"{len(names)} files in {args.folder} (load {_load()})", flush=True)
            html = sorted(n for n in names if n.endswith(".html"))

            def change() -> None:
                for name in html[:10]:
                    path = folder / name
                    path.write_text(
                        path.read_text(errors="replace").replace("</body>", "<p>Changed today.</p></body>")
                    )
                for name in html[-5:]:
                    (folder / name).unlink()

            if not args.website_only:
                results["folder_syncs"] = three_syncs(s, kb, source, change, counting)

            if args.website or args.website_only:
                site = Path(root) / "site"
                shutil.copytree(args.folder, site)
                handler = functools.partial(_Quiet, directory=str(site))
                server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
                threading.Thread(target=server.serve_forever, daemon=True).start()
                base = f"http://127.0.0.1:{server.server_address[1]}/"
                web_kb = create_kb(s, CreateKbRequest(kb_id="bench-web", name="bench web"), admin)
                start = base + ("index.html" if (site / "index.html").exists() else "")
                request = CreateSourceRequest.model_validate(
                    {
                        "name": "site",
                        "settings": {
                            "kind": "website",
                            "start_url": start,
                            "prefix": base,
                            "max_pages": 5000,
                            "requests_per_second": 100,
                        },
                    }
                )
                web_source = s.source_service.create(web_kb, request, "bench")
                web_html = sorted(str(p.relative_to(site)) for p in site.rglob("*.html"))

                def change_site() -> None:
                    later = time.time() + 5
                    for name in web_html[1:11]:
                        path = site / name
                        path.write_text(
                            path.read_text(errors="replace").replace("</body>", "<p>Changed.</p></body>")
                        )
                        os.utime(path, (later, later))
                    for name in web_html[-5:]:
                        (site / name).unlink()

                results["website_syncs"] = three_syncs(s, web_kb, web_source, change_site, counting)
                server.shutdown()
        finally:
            stack.stop()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
        print(json.dumps(results, indent=1))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


if __name__ == "__main__":
    sys.exit(main())
