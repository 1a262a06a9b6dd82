"""Sources (issue 29): a knowledge base that follows a folder or a Git repository, exactly.

Through the gateway as a user calls it: a sync queues new and changed documents, skips unchanged
ones (no embedding), deletes what is gone with its chunks; a changed document replaces its chunks;
a sync stopped midway and run again ends consistent; two syncs of one source never run at once.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.integration.conftest import wait_for_task

LEASE = 4.0  # seconds: the stopped run's lease in the stopped-midway test
LONG = "The {word} lighthouse keeper trims the wick and polishes the lens every evening. " * 12


def _page(title: str, word: str) -> str:
    return f"# {title}\n\n" + LONG.format(word=word)


def _folder(local_env: dict[str, Any], files: dict[str, str]) -> Path:
    root = Path(local_env["ingest_root"]) / ("docs-" + uuid.uuid4().hex[:8])
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _add(client: TestClient, kb: str, settings: dict[str, Any], name: str = "docs") -> dict[str, Any]:
    response = client.post(f"/v1/kb/{kb}/sources", json={"name": name, "settings": settings})
    assert response.status_code == 201, response.text
    return dict(response.json())


def _finished(client: TestClient, link: str, timeout: float = 60) -> dict[str, Any]:
    """Follow a sync run's link until it ends."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(link)
        assert response.status_code == 200, response.text
        run = dict(response.json())
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


def _request(client: TestClient, kb: str, source_id: str) -> dict[str, Any]:
    """Ask for a sync: 202, the run queued, its link (the sync function does the work)."""
    response = client.post(f"/v1/kb/{kb}/sources/{source_id}/sync")
    assert response.status_code == 202, response.text
    run = dict(response.json())
    assert run["status"] == "queued" and run["finished_at"] is None
    link = f"/v1/kb/{kb}/sources/{source_id}/runs/{run['run_id']}"
    assert run["links"]["self"] == response.headers["location"] == link
    return run


def _sync(client: TestClient, kb: str, source_id: str) -> dict[str, Any]:
    run = _finished(client, _request(client, kb, source_id)["links"]["self"])
    assert run["status"] in ("succeeded", "failed"), run
    for task_id in run["task_ids"]:
        assert wait_for_task(client, task_id)["status"] == "succeeded"
    return run


def _documents(client: TestClient, kb: str) -> dict[str, dict[str, Any]]:
    return {d["source_name"]: d for d in client.get(f"/v1/kb/{kb}/documents").json()["documents"]}


def _chunks_by_document(stack: Any, kb: str) -> dict[str, list[Any]]:
    from citegate.knowledge.search.base import SearchFilter

    result = stack.services.index.search(
        query="lighthouse",
        vector=None,
        filter=SearchFilter(kb_ids=frozenset({kb})),
        limit=1000,
        mode="lexical",
    )
    found: dict[str, list[Any]] = {}
    for hit in result.hits:
        found.setdefault(hit.chunk.source_name, []).append(hit.chunk)
    return found


def _consistent(client: TestClient, stack: Any, kb: str, expected: set[str]) -> None:
    """Every file of the folder is one indexed document; its chunks, and nothing else, in the index."""
    documents = _documents(client, kb)
    assert set(documents) == expected
    assert all(d["status"] == "indexed" for d in documents.values()), documents
    chunks = _chunks_by_document(stack, kb)
    assert set(chunks) == expected
    for name, document in documents.items():
        assert len(chunks[name]) == document["counts"]["children"] > 0
        assert stack.services.index.count(kb_id=kb, document_id=document["document_id"]) == len(chunks[name])
    assert stack.services.index.count(kb_id=kb) == sum(len(c) for c in chunks.values())


def test_a_folder_source_syncs_exactly(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any]
) -> None:
    root = _folder(
        local_env,
        {
            "guide/a.md": _page("Alpha", "amber"),
            "guide/b.md": _page("Beta", "blue"),
            "c.md": _page("Gamma", "green"),
        },
    )
    source = _add(
        client,
        kb,
        {
            "kind": "folder",
            "path": str(root),
            "project": "lights",
            "version": "2.1",
            "base_url": "https://docs.example.org/docs",
            "strip_suffix": True,
            "path_prefix": "docs",
        },
    )
    assert source["kind"] == "folder" and source["source_id"].startswith("src_")
    first = _sync(client, kb, source["source_id"])
    assert first["status"] == "succeeded"
    assert first["counts"] | {} == first["counts"] and first["counts"]["added"] == 3
    assert first["counts"]["unchanged"] == first["counts"]["deleted"] == 0
    _consistent(client, stack, kb, {"guide/a.md", "guide/b.md", "c.md"})
    a = _documents(client, kb)["guide/a.md"]
    assert a["metadata"] == {
        "project": "lights",
        "path": "docs/guide/a.md",
        "version": "2.1",
        "url": "https://docs.example.org/docs/guide/a",
    }
    assert a["source_id"] == source["source_id"] and a["title"] == "Alpha"

    # Nothing changed: nothing is queued, nothing embedded.
    embedded_before = stack.services.embedder.misses
    second = _sync(client, kb, source["source_id"])
    assert second["counts"]["unchanged"] == 3 and second["task_ids"] == []
    assert second["counts"]["added"] == second["counts"]["changed"] == second["counts"]["deleted"] == 0
    assert stack.services.embedder.misses == embedded_before

    # One changed, one deleted, one renamed (a delete and an add).
    (root / "guide/a.md").write_text(
        _page("Alpha", "azure") + "\n\nA new closing paragraph about storms. " * 5
    )
    (root / "c.md").unlink()
    (root / "guide/b.md").rename(root / "guide/b2.md")
    third = _sync(client, kb, source["source_id"])
    assert third["counts"] | {"seen": 0} == {
        "seen": 0,
        "added": 1,
        "changed": 1,
        "unchanged": 0,
        "deleted": 2,
        "failed": 0,
        "requeued": 0,
    }
    _consistent(client, stack, kb, {"guide/a.md", "guide/b2.md"})
    texts = " ".join(c.text for c in _chunks_by_document(stack, kb)["guide/a.md"])
    assert "azure" in texts and "amber" not in texts, "the changed file's old chunks are gone"

    runs = client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs").json()["runs"]
    assert [r["run_id"] for r in runs] == [third["run_id"], second["run_id"], first["run_id"]]
    assert all(r["duration_ms"] is not None and r["finished_at"] for r in runs)
    listed = client.get(f"/v1/kb/{kb}/sources").json()["sources"]
    assert [s["last_run"]["run_id"] for s in listed] == [third["run_id"]]


def test_a_sync_stopped_midway_then_run_again_ends_consistent(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed sync function: the run it took stays `running` and holds the source until its lease
    expires; the next sync records it abandoned, hands its queued documents over and finishes."""
    from citegate.knowledge.sources import sync as sync_module
    from citegate.knowledge.sources.service import SourceService

    files = {f"p{i:02}.md": _page(f"Page {i}", f"w{i}") for i in range(12)}
    root = _folder(local_env, files)
    source = _add(client, kb, {"kind": "folder", "path": str(root)})
    _sync(client, kb, source["source_id"])
    # Change 6 files and delete 3, then stop the sync (as a kill would: no clean-up runs) after it
    # has accepted 4 documents and before it handed them to the queue.
    for i in range(6):
        (root / f"p{i:02}.md").write_text(_page(f"Page {i}", f"changed{i}"))
    for i in range(9, 12):
        (root / f"p{i:02}.md").unlink()

    class Killed(BaseException):
        pass

    accept = stack.services.ingestion.accept
    accepted: list[str] = []

    def accept_then_die(*args: Any, **kwargs: Any) -> Any:
        if len(accepted) == 4:
            raise Killed
        result = accept(*args, **kwargs)
        accepted.append(result.task.task_id)
        return result

    monkeypatch.setattr(stack.services.ingestion, "accept", accept_then_die)
    monkeypatch.setattr(sync_module, "ENQUEUE_EVERY", 1000)
    kb_record = stack.services.kbs.get(kb)
    stopped = stack.services.sources.get(kb, source["source_id"])
    # The request's half (lease, run queued), without its message: this test is the sync function,
    # through the same call the Lambda makes, and it dies midway.
    queued = sync_module.SourceSync(stack.services, lease_seconds=LEASE).start(kb_record, stopped)
    with pytest.raises(Killed):
        SourceService(stack.services, lease_seconds=LEASE).execute(kb, source["source_id"], queued.run_id)
    killed = time.monotonic()
    monkeypatch.undo()
    # The stopped run still holds the source until its lease runs out.
    assert client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs/{queued.run_id}").json()["status"] == (
        "running"
    )
    refused = client.post(f"/v1/kb/{kb}/sources/{source['source_id']}/sync")
    assert refused.status_code == 409 and refused.json()["details"]["run_id"] == queued.run_id
    # Meanwhile the knowledge base is consistent: each document is its old version (indexed) or
    # its new one queued; nothing is duplicated or half deleted.
    documents = _documents(client, kb)
    assert len(documents) == 12
    assert sum(d["status"] == "queued" for d in documents.values()) == 4
    time.sleep(max(0.0, LEASE + 0.2 - (time.monotonic() - killed)))  # the stopped run's lease runs out
    again = _sync(client, kb, source["source_id"])
    assert again["counts"]["requeued"] == 4 and again["counts"]["changed"] == 2
    assert again["counts"]["deleted"] == 3 and again["counts"]["unchanged"] == 7
    for task_id in accepted:
        assert wait_for_task(client, task_id)["status"] == "succeeded"
    _consistent(client, stack, kb, {f"p{i:02}.md" for i in range(9)})
    texts = " ".join(c.text for cs in _chunks_by_document(stack, kb).values() for c in cs)
    assert all(f"changed{i}" in texts for i in range(6)) and "w0 " not in texts
    runs = client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs").json()["runs"]
    assert runs[1]["run_id"] == queued.run_id and runs[1]["status"] == "abandoned"
    assert runs[0]["status"] == "succeeded" and runs[0]["takes_over"] == queued.run_id


def test_two_concurrent_syncs_of_one_source_run_once(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.knowledge.sources import kinds

    root = _folder(local_env, {f"n{i}.md": _page(f"Note {i}", f"n{i}") for i in range(3)})
    source = _add(client, kb, {"kind": "folder", "path": str(root)})
    listing = kinds.folder_listing
    inside = threading.Event()
    release = threading.Event()

    def slow_listing(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        release.wait(10)
        return listing(*args, **kwargs)

    monkeypatch.setattr(kinds, "folder_listing", slow_listing)
    # The request answers at once, the run queued: the listing has not even begun (it is held
    # below), so the API returned before the work ended.
    first = _request(client, kb, source["source_id"])
    queued_again = client.post(f"/v1/kb/{kb}/sources/{source['source_id']}/sync")
    assert inside.wait(30), "the sync function took the run from the queue"
    running = client.get(first["links"]["self"]).json()
    running_again = client.post(f"/v1/kb/{kb}/sources/{source['source_id']}/sync")
    release.set()
    for second in (queued_again, running_again):
        assert second.status_code == 409 and second.json()["error"] == "sync_in_progress"
        assert second.json()["details"]["run_id"] == first["run_id"]
    assert running["status"] == "running" and running["running_at"]
    done = _finished(client, first["links"]["self"])
    assert done["status"] == "succeeded" and done["counts"]["added"] == 3, done
    assert done["finished_at"] and done["duration_ms"] is not None
    runs = client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs").json()["runs"]
    assert len(runs) == 1
    unknown = client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs/run_0000")
    assert unknown.status_code == 404 and unknown.json()["error"] == "run_not_found"


def test_source_errors_and_deletion(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any]
) -> None:
    outside = client.post(
        f"/v1/kb/{kb}/sources", json={"name": "x", "settings": {"kind": "folder", "path": "/etc"}}
    )
    assert outside.status_code == 403
    bad = client.post(f"/v1/kb/{kb}/sources", json={"name": "x", "settings": {"kind": "ftp", "path": "/"}})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
    missing = client.get(f"/v1/kb/{kb}/sources/src_nothing")
    assert missing.status_code == 404 and missing.json()["error"] == "source_not_found"
    assert (
        client.post(
            "/v1/kb/no-such-kb/sources", json={"name": "x", "settings": {"kind": "folder", "path": "."}}
        ).status_code
        == 404
    )
    root = _folder(local_env, {"one.md": _page("One", "one")})
    source = _add(client, kb, {"kind": "folder", "path": str(root)})
    changed = client.patch(
        f"/v1/kb/{kb}/sources/{source['source_id']}", json={"name": "renamed", "schedule_minutes": 60}
    )
    assert (
        changed.status_code == 200 and changed.json()["name"] == "renamed" and changed.json()["next_sync_at"]
    )
    other_kind = client.patch(
        f"/v1/kb/{kb}/sources/{source['source_id']}", json={"settings": {"kind": "s3", "bucket": "abc"}}
    )
    assert other_kind.status_code == 400
    _sync(client, kb, source["source_id"])
    assert stack.services.index.count(kb_id=kb) > 0
    deleted = client.delete(f"/v1/kb/{kb}/sources/{source['source_id']}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] == {"documents": 1}
    assert _documents(client, kb) == {} and stack.services.index.count(kb_id=kb) == 0
    assert client.get(f"/v1/kb/{kb}/sources").json()["sources"] == []


def test_an_agent_may_sync_a_source_it_may_not_create(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any]
) -> None:
    from citegate.runtime.gateway import create_app
    from tests.integration.conftest import audited

    root = _folder(local_env, {"one.md": _page("One", "one")})
    source = _add(client, kb, {"kind": "folder", "path": str(root)})
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    policy = {
        "tools": ["rag_sync_source", "rag_list_sources"],
        "knowledge_bases": [kb],
        "write_actions": ["ingest"],
    }
    assert client.put(f"/admin/policies/agent:{agent_id}", json=policy).status_code == 200
    secret = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    with TestClient(create_app(), headers={"Authorization": f"Bearer {secret}"}) as agent:
        synced = agent.post(f"/v1/kb/{kb}/sources/{source['source_id']}/sync")
        assert synced.status_code == 202 and synced.json()["caller"] == agent_id
        # The agent may read its run (rag_list_sources): it ends with the document added.
        assert _finished(agent, synced.json()["links"]["self"])["counts"]["added"] == 1
        refused = agent.post(
            f"/v1/kb/{kb}/sources", json={"name": "x", "settings": {"kind": "folder", "path": str(root)}}
        )
        assert refused.status_code == 403, refused.text
        assert agent.delete(f"/v1/kb/{kb}/sources/{source['source_id']}").status_code == 403
    records = audited(stack, synced.headers["apigw-requestid"])
    assert [(r.route, r.decision, r.tool) for r in records] == [
        ("POST /v1/kb/{kb_id}/sources/{source_id}/sync", "allow", "rag_sync_source")
    ]
    # Granted the tool without the write action: refused too.
    policy["write_actions"] = []
    assert client.put(f"/admin/policies/agent:{agent_id}", json=policy).status_code == 200
    with TestClient(create_app(), headers={"Authorization": f"Bearer {secret}"}) as agent:
        assert agent.post(f"/v1/kb/{kb}/sources/{source['source_id']}/sync").status_code == 403


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_git_source_follows_a_branch(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any]
) -> None:
    repo = _folder(
        local_env,
        {
            "website/docs/intro.md": _page("Intro", "intro"),
            "website/docs/guide/setup.md": _page("Setup", "setup"),
            "website/docs/guide/old.md": _page("Old", "old"),
            "website/blog/post.md": _page("Post", "post"),  # outside the subdir
            "README.md": _page("Readme", "readme"),
        },
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    source = _add(
        client,
        kb,
        {
            "kind": "git",
            "url": f"file://{repo}",
            "ref": "main",
            "subdir": "website/docs",
            "project": "site",
            "base_url": "https://site.example/docs",
            "strip_suffix": True,
            "path_prefix": "docs",
        },
    )
    first = _sync(client, kb, source["source_id"])
    assert first["status"] == "succeeded", first
    assert first["counts"]["added"] == 3 and first["revision"] == _git(repo, "rev-parse", "HEAD")
    _consistent(client, stack, kb, {"intro.md", "guide/setup.md", "guide/old.md"})
    setup = _documents(client, kb)["guide/setup.md"]
    assert setup["metadata"] == {
        "project": "site",
        "path": "docs/guide/setup.md",
        "version": "main",
        "url": "https://site.example/docs/guide/setup",
    }
    assert setup["source_revision"].startswith("git:")

    unchanged = _sync(client, kb, source["source_id"])
    assert unchanged["counts"]["unchanged"] == 3 and unchanged["task_ids"] == []

    (repo / "website/docs/intro.md").write_text(_page("Intro", "fresh"))
    _git(repo, "rm", "-q", "website/docs/guide/old.md")
    _git(repo, "mv", "website/docs/guide/setup.md", "website/docs/guide/install.md")
    _git(repo, "commit", "-qam", "second")
    second = _sync(client, kb, source["source_id"])
    assert (second["counts"]["added"], second["counts"]["changed"], second["counts"]["deleted"]) == (1, 1, 2)
    assert second["counts"]["unchanged"] == 0
    _consistent(client, stack, kb, {"intro.md", "guide/install.md"})

    # A ref that does not exist fails the run and deletes nothing.
    assert (
        client.patch(
            f"/v1/kb/{kb}/sources/{source['source_id']}",
            json={
                "settings": {
                    "kind": "git",
                    "url": f"file://{repo}",
                    "ref": "no-such-branch",
                    "subdir": "website/docs",
                }
            },
        ).status_code
        == 200
    )
    failed = _finished(client, _request(client, kb, source["source_id"])["links"]["self"])
    assert failed["status"] == "failed" and "git fetch failed" in failed["error"]
    assert set(_documents(client, kb)) == {"intro.md", "guide/install.md"}


def test_a_git_url_must_be_https_or_a_local_repository_inside_the_root(client: TestClient, kb: str) -> None:
    for url in ("ext::sh -c touch% /tmp/pwned", "ssh://host/repo.git", "file:///etc", "-uhello"):
        response = client.post(
            f"/v1/kb/{kb}/sources", json={"name": "g", "settings": {"kind": "git", "url": url}}
        )
        assert response.status_code in (400, 403), (url, response.text)


@pytest.fixture
def static_site(tmp_path: Path) -> Any:
    """A static site on loopback (Last-Modified and If-Modified-Since, as most static servers)."""
    import functools
    import http.server

    root = tmp_path / "www"
    (root / "site").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))

    class Quiet(handler.func):  # type: ignore[name-defined,misc]
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _html(title: str, word: str, links: list[str]) -> str:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    body = f"<p>{LONG.format(word=word)}</p>"
    head = f"<html><head><title>{title}</title></head>"
    return f"{head}<body><h1>{title}</h1>{body}<ul>{anchors}</ul></body></html>"


def test_a_website_source_crawls_a_loopback_site(
    client: TestClient, kb: str, stack: Any, static_site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses
    import os

    from citegate.web.crawl import WebPageFetcher
    from citegate.web.service import WebConfig

    config = dataclasses.replace(WebConfig.from_settings(stack.settings), allow_loopback=True)
    monkeypatch.setitem(stack.services.__dict__, "page_fetcher", WebPageFetcher(config))
    root, base = static_site
    site = root / "site"
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /site/private/\n")
    (site / "index.html").write_text(
        _html(
            "Home",
            "home",
            ["a.html", "guide/b.html", "private/secret.html", "https://elsewhere.example/x.html"],
        )
    )
    (site / "a.html").write_text(_html("Alpha", "alpha", ["index.html"]))
    (site / "guide").mkdir()
    (site / "guide/b.html").write_text(_html("Beta", "beta", ["../a.html#top"]))
    (site / "private").mkdir()
    (site / "private/secret.html").write_text(_html("Secret", "secret", []))
    source = _add(client, kb, {"kind": "website", "start_url": f"{base}/site/", "requests_per_second": 50})
    first = _sync(client, kb, source["source_id"])
    assert first["status"] == "succeeded", first
    assert first["counts"]["added"] == 3, first
    _consistent(client, stack, kb, {"index.html", "a.html", "guide/b.html"})
    alpha = _documents(client, kb)["a.html"]
    assert alpha["metadata"]["url"] == f"{base}/site/a.html" and alpha["title"] == "Alpha"
    assert alpha["source_revision"].startswith("http:")

    # Unchanged pages answer 304 to the conditional GETs: nothing is read, queued or embedded.
    again = _sync(client, kb, source["source_id"])
    assert again["counts"]["unchanged"] == 3 and again["task_ids"] == []

    later = time.time() + 5
    (site / "a.html").write_text(_html("Alpha", "changed", ["index.html"]))
    (site / "index.html").write_text(_html("Home", "home", ["a.html"]))
    for page in ("a.html", "index.html"):
        os.utime(site / page, (later, later))
    (site / "guide/b.html").unlink()
    third = _sync(client, kb, source["source_id"])
    assert (third["counts"]["changed"], third["counts"]["deleted"], third["counts"]["unchanged"]) == (2, 1, 0)
    _consistent(client, stack, kb, {"index.html", "a.html"})


def test_an_s3_source_follows_a_prefix(client: TestClient, kb: str, stack: Any) -> None:
    s3 = stack.services.aws.s3
    bucket = "docs-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    for name in ("one", "two", "three"):
        s3.put_object(Bucket=bucket, Key=f"manual/{name}.md", Body=_page(name.title(), name).encode())
    s3.put_object(Bucket=bucket, Key="other/skip.md", Body=_page("Skip", "skip").encode())
    source = _add(client, kb, {"kind": "s3", "bucket": bucket, "prefix": "manual/", "project": "m"})
    first = _sync(client, kb, source["source_id"])
    assert first["counts"]["added"] == 3, first
    _consistent(client, stack, kb, {"one.md", "two.md", "three.md"})
    assert _sync(client, kb, source["source_id"])["counts"]["unchanged"] == 3
    s3.put_object(Bucket=bucket, Key="manual/two.md", Body=_page("Two", "second").encode())
    s3.delete_object(Bucket=bucket, Key="manual/three.md")
    third = _sync(client, kb, source["source_id"])
    assert (third["counts"]["changed"], third["counts"]["deleted"], third["counts"]["unchanged"]) == (1, 1, 1)
    _consistent(client, stack, kb, {"one.md", "two.md"})
    missing = _add(
        client, kb, {"kind": "s3", "bucket": "no-such-bucket-" + uuid.uuid4().hex[:6]}, name="gone"
    )
    run = _finished(client, _request(client, kb, missing["source_id"])["links"]["self"])
    assert run["status"] == "failed" and "cannot be listed" in run["error"]
    assert set(_documents(client, kb)) == {"one.md", "two.md"}


def test_a_due_schedule_syncs_the_source_and_audits_it(
    client: TestClient, kb: str, stack: Any, local_env: dict[str, Any]
) -> None:
    from citegate.runtime.scheduler import SourceScheduler

    root = _folder(local_env, {"s.md": _page("Scheduled", "sched")})
    response = client.post(
        f"/v1/kb/{kb}/sources",
        json={"name": "nightly", "settings": {"kind": "folder", "path": str(root)}, "schedule_minutes": 5},
    )
    source = response.json()
    assert source["next_sync_at"] > source["created_at"]
    SourceScheduler().run_once()  # not due yet: this source is left alone
    assert client.get(f"/v1/kb/{kb}/sources/{source['source_id']}/runs").json()["runs"] == []
    stack.services.sources.update(kb, source["source_id"], {"next_sync_at": "2000-01-01T00:00:00.000Z"})
    outcome = SourceScheduler().run_once()
    mine = [o for o in outcome["synced"] if o["source_id"] == source["source_id"]]
    assert mine and mine[0]["status"] == "queued"  # the pass only queues it: the sync function syncs
    link = f"/v1/kb/{kb}/sources/{source['source_id']}/runs/{mine[0]['run_id']}"
    run = _finished(client, link)
    assert run["status"] == "succeeded" and run["counts"]["added"] == 1, run
    assert run["trigger"] == "schedule" and run["caller"] == "scheduler"
    after = client.get(f"/v1/kb/{kb}/sources/{source['source_id']}").json()
    assert after["next_sync_at"] > run["started_at"]
    records = [
        r
        for r in stack.services.audit.list(
            stack.settings.default_tenant, caller="service:scheduler", limit=100
        )
        if kb in r.knowledge_bases
    ]
    assert [(r.route, r.decision, r.status) for r in records] == [
        ("SCHEDULE /v1/kb/{kb_id}/sources/{source_id}/sync", "allow", 202)
    ]
