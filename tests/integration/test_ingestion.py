"""Ingesting documents from every source and format, following the task, listing and deleting."""

from __future__ import annotations

import base64
import shutil
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from tests.integration.conftest import SAMPLES, ingest, wait_for_task


def _documents(client: TestClient, kb: str) -> list[dict[str, Any]]:
    return list(client.get(f"/v1/kb/{kb}/documents").json()["documents"])


def test_text_is_ingested_chunked_and_indexed(client: TestClient, kb: str, stack: Any) -> None:
    task = ingest(
        client,
        kb,
        text="# Notes\n\nThe quick brown fox jumps over the lazy dog. " * 30,
        source_name="notes.md",
    )
    assert task["status"] == "succeeded", task
    assert task["counts"]["parents"] >= 1 and task["counts"]["children"] >= 3
    [document] = _documents(client, kb)
    assert document["status"] == "indexed" and document["source_name"] == "notes.md"
    assert document["counts"] == task["counts"]
    assert stack.services.index.count(kb_id=kb) == task["counts"]["children"]


def test_every_sample_format_english_and_chinese(client: TestClient, kb: str, stack: Any) -> None:
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix not in (".md", ".txt", ".pdf") or path.name == "README.md":
            continue
        body = {"base64_file": base64.b64encode(path.read_bytes()).decode(), "source_name": path.name}
        task = ingest(client, kb, **body)
        assert task["status"] == "succeeded", (path.name, task)
    html = (
        "<html><head><title>Kettles</title><script>alert(1)</script></head><body><h1>Kettles</h1>"
        + ("<p>A kettle boils water quickly and switches itself off.</p>" * 20)
        + "</body></html>"
    )
    assert ingest(client, kb, text=html, source_name="kettles.html")["status"] == "succeeded"
    names = {d["source_name"] for d in _documents(client, kb)}
    assert {"solar-system.md", "tea-guide.txt", "长城.md", "lighthouses.pdf", "kettles.html"} <= names
    pdf_chunks = [
        c
        for c in stack.services.index.get_chunks(_all_ref_ids(stack, kb)).values()
        if c.source_name == "lighthouses.pdf"
    ]
    assert {c.page for c in pdf_chunks} >= {1, 2, 3}, "PDF chunks keep their page numbers"


def _all_ref_ids(stack: Any, kb: str) -> list[str]:
    from citegate.knowledge.search.base import SearchFilter

    result = stack.services.index.search(
        query="the", vector=None, filter=SearchFilter(kb_ids=frozenset({kb})), limit=1000, mode="lexical"
    )
    return [hit.chunk.ref_id for hit in result.hits]


def test_presigned_upload_then_ingest_by_s3_key(client: TestClient, kb: str) -> None:
    upload = client.post(f"/v1/kb/{kb}/uploads", json={"source_name": "tea-guide.txt"}).json()
    assert upload["method"] == "PUT" and upload["s3_key"].startswith(f"uploads/{kb}/")
    put = httpx.put(
        upload["url"], content=(SAMPLES / "tea-guide.txt").read_bytes(), headers=upload["headers"]
    )
    assert put.status_code == 200
    task = ingest(client, kb, s3_key=upload["s3_key"], source_name="tea-guide.txt")
    assert task["status"] == "succeeded"


def test_an_s3_key_outside_the_knowledge_base_uploads_is_refused(client: TestClient, kb: str) -> None:
    response = client.post(
        f"/v1/kb/{kb}/documents", json={"s3_key": "raw/other/secret", "source_name": "x.txt"}
    )
    assert response.status_code == 400 and response.json()["details"]["field"] == "s3_key"


def test_local_file_path_is_confined_to_the_configured_folder(
    client: TestClient, kb: str, local_env: dict[str, Any]
) -> None:
    root = local_env["ingest_root"]
    shutil.copy(SAMPLES / "tea-guide.txt", root / "tea.txt")
    accepted = client.post(f"/v1/kb/{kb}/documents", json={"file_path": "tea.txt"})
    assert accepted.status_code == 202
    assert wait_for_task(client, accepted.json()["task_id"])["status"] == "succeeded"
    assert [d["source_name"] for d in _documents(client, kb)] == ["tea.txt"]

    for escape in ["../../etc/passwd", "/etc/passwd", str(root / ".." / "x.txt")]:
        refused = client.post(f"/v1/kb/{kb}/documents", json={"file_path": escape})
        assert refused.status_code == 403, escape
    (root / "link").symlink_to("/etc")
    assert client.post(f"/v1/kb/{kb}/documents", json={"file_path": "link/hostname"}).status_code == 403


def test_the_same_document_twice_leaves_one_copy(client: TestClient, kb: str, stack: Any) -> None:
    text = "Lighthouses guide ships. " * 100
    first = ingest(client, kb, text=text, source_name="same.txt")
    second = ingest(client, kb, text=text + " Fog horns too.", source_name="same.txt")
    assert first["status"] == second["status"] == "succeeded"
    assert len(_documents(client, kb)) == 1
    assert client.get(f"/v1/kb/{kb}").json()["document_count"] == 1
    assert stack.services.index.count(kb_id=kb) == second["counts"]["children"]


def test_delete_leaves_no_chunk_parent_file_or_record(client: TestClient, kb: str, stack: Any) -> None:
    ingest(client, kb, text="# A\n\n" + "Alpha beta gamma. " * 200, source_name="a.md")
    [document] = _documents(client, kb)
    document_id = document["document_id"]
    s = stack.services
    assert s.index.count(kb_id=kb, document_id=document_id) > 0
    assert s.parents.list(kb, document_id)

    deleted = client.delete(f"/v1/kb/{kb}/documents/{document_id}")
    assert deleted.status_code == 200
    assert deleted.json()["deleted"]["chunks"] > 0
    assert s.index.count(kb_id=kb, document_id=document_id) == 0
    assert s.parents.list(kb, document_id) == []
    assert s.blobs.delete_prefix(f"raw/{kb}/{document_id}/") == 0
    assert _documents(client, kb) == []
    assert client.get(f"/v1/kb/{kb}").json()["document_count"] == 0
    again = client.delete(f"/v1/kb/{kb}/documents/{document_id}")
    assert again.status_code == 404 and again.json()["error"] == "document_not_found"


def test_reindex_rebuilds_from_the_stored_raw_documents(client: TestClient, kb: str, stack: Any) -> None:
    ingest(client, kb, text="Tea is brewed at 80 degrees. " * 40, source_name="tea.txt")
    ingest(client, kb, text="Coffee is brewed at 93 degrees. " * 40, source_name="coffee.txt")
    before = stack.services.index.count(kb_id=kb)
    stack.services.index.delete_kb(kb)  # as if the index were lost
    assert stack.services.index.count(kb_id=kb) == 0

    response = client.post(f"/v1/kb/{kb}/reindex")
    assert response.status_code == 202 and response.json()["documents"] == 2
    task = wait_for_task(client, response.json()["task_id"])
    assert task["status"] == "succeeded" and len(task["children"]) == 2
    assert stack.services.index.count(kb_id=kb) == before


def test_unknown_task_and_document_are_404(client: TestClient, kb: str) -> None:
    assert client.get("/v1/tasks/t_missing").json()["error"] == "task_not_found"
    assert client.get(f"/v1/kb/{kb}/documents/d_missing").json()["error"] == "document_not_found"


def test_source_errors(client: TestClient, kb: str) -> None:
    def post(body: dict[str, Any]) -> Any:
        return client.post(f"/v1/kb/{kb}/documents", json=body)

    two = post({"text": "a", "base64_file": "YQ==", "source_name": "a.txt"})
    assert two.status_code == 400 and "exactly one" in two.json()["message"]
    none = post({"source_name": "a.txt"})
    assert none.status_code == 400 and "exactly one" in none.json()["message"]
    empty = post({"text": "   \n ", "source_name": "a.txt"})
    assert empty.status_code == 400 and "empty" in empty.json()["message"]
    bad_base64 = post({"base64_file": "***", "source_name": "a.pdf"})
    assert bad_base64.status_code == 400 and bad_base64.json()["details"]["field"] == "base64_file"
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(200)).decode()
    unsupported = post({"base64_file": png, "source_name": "logo.png"})
    assert unsupported.status_code == 415 and unsupported.json()["error"] == "unsupported_media_type"
    assert _documents(client, kb) == [], "a refused document leaves nothing behind"


def _docx() -> bytes:
    """A Word document as Word writes one: a ZIP holding word/document.xml."""
    import io
    import zipfile

    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(
            "word/document.xml", "<w:document><w:body><w:t>Quarterly report</w:t></w:body></w:document>"
        )
    return packed.getvalue()


@pytest.mark.parametrize(
    "extra",
    [
        {"source_name": "report.docx"},
        {
            "source_name": "report.docx",
            "mime_type": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        },
        # Labelled or named as a supported type, the bytes still say what it is.
        {"source_name": "report.docx", "mime_type": "text/plain"},
        {"source_name": "report.md"},
        {"source_name": "report.pdf"},
        {"source_name": "report.pdf", "mime_type": "application/pdf"},
    ],
    ids=["docx", "docx-mime", "labelled-text", "named-md", "named-pdf", "labelled-pdf"],
)
def test_an_office_file_is_415_at_submission_whatever_it_is_called(
    client: TestClient, kb: str, extra: dict[str, str]
) -> None:
    """docs/api.md: not Markdown, text, HTML or PDF is 415 `unsupported_media_type` when it is sent,
    never a 202 whose task fails later."""
    sent = client.post(
        f"/v1/kb/{kb}/documents", json={"base64_file": base64.b64encode(_docx()).decode(), **extra}
    )
    assert sent.status_code == 415, sent.text
    body = sent.json()
    assert (
        body["error"] == "unsupported_media_type" and body["details"]["source_name"] == extra["source_name"]
    )
    assert "text/markdown" in body["details"]["supported"]
    assert _documents(client, kb) == [], "a refused document leaves nothing behind"


def test_text_with_a_byte_order_mark_and_a_pdf_named_as_one_are_still_accepted(
    client: TestClient, kb: str
) -> None:
    """The content check refuses binaries, not UTF-16 text (NUL bytes, with its BOM) or real PDFs."""
    utf16 = base64.b64encode("# Notes\n\nTea is brewed at 80 degrees.".encode("utf-16")).decode()
    text = client.post(f"/v1/kb/{kb}/documents", json={"base64_file": utf16, "source_name": "notes.txt"})
    assert text.status_code == 202, text.text
    assert wait_for_task(client, text.json()["task_id"])["status"] == "succeeded"
    pdf = (SAMPLES / "lighthouses.pdf").read_bytes()
    sent = client.post(
        f"/v1/kb/{kb}/documents",
        json={"base64_file": base64.b64encode(pdf).decode(), "source_name": "lights.pdf"},
    )
    assert sent.status_code == 202, sent.text


def test_over_the_size_limit_is_413(client: TestClient, kb: str, local_env: dict[str, Any]) -> None:
    from citegate.platform.settings import get_settings

    limit = get_settings().max_inline_document_bytes
    response = client.post(
        f"/v1/kb/{kb}/documents", json={"text": "a" * (limit + 1), "source_name": "big.txt"}
    )
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"


def test_a_corrupt_pdf_fails_its_task_with_a_reason_and_harms_nothing_else(
    client: TestClient, kb: str
) -> None:
    good = client.post(f"/v1/kb/{kb}/documents", json={"text": "Fine text. " * 50, "source_name": "fine.txt"})
    corrupt = base64.b64encode(b"%PDF-1.7\n" + b"\x00garbage" * 200).decode()
    bad = client.post(f"/v1/kb/{kb}/documents", json={"base64_file": corrupt, "source_name": "broken.pdf"})
    assert bad.status_code == 202
    failed = wait_for_task(client, bad.json()["task_id"])
    assert failed["status"] == "failed"
    assert "PDF" in failed["error"]
    assert wait_for_task(client, good.json()["task_id"])["status"] == "succeeded"
    statuses = {d["source_name"]: d["status"] for d in _documents(client, kb)}
    assert statuses == {"fine.txt": "indexed", "broken.pdf": "failed"}


def test_reingesting_unchanged_text_embeds_nothing_again(client: TestClient, kb: str, stack: Any) -> None:
    embedder = stack.services.embedder
    text = " ".join(f"Sentence number {i} is cached by its content hash." for i in range(120))
    ingest(client, kb, text=text, source_name="cached.txt")
    misses, hits = embedder.misses, embedder.hits
    task = ingest(client, kb, text=text, source_name="cached-copy.txt")
    assert embedder.misses == misses, "no chunk was embedded a second time"
    assert embedder.hits - hits == task["counts"]["children"]
