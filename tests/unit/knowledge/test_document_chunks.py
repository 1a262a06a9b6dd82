"""`document_chunks`, what the chunk viewer reads: every chunk of one document, in reading order,
from either engine, and nothing of another document or knowledge base."""

from __future__ import annotations

from pathlib import Path

from tests.unit.knowledge.search import test_embedded_index as emb
from tests.unit.knowledge.search import test_opensearch_bodies as osb

from citegate.knowledge.search.embedded import EmbeddedSearchIndex


def test_the_embedded_engine_lists_one_documents_chunks_in_reading_order(tmp_path: Path) -> None:
    index = EmbeddedSearchIndex(tmp_path / "index", emb.DIM)
    try:
        # Written out of order, beside a document of the same id in another knowledge base.
        mine = [emb.chunk(f"r{n}", f"part {n} of the guide", position=n) for n in (2, 0, 1)]
        index.upsert_document("A", "d1", mine)
        index.upsert_document("A", "d2", [emb.chunk("other", "another document", document_id="d2")])
        index.upsert_document("B", "d1", [emb.chunk("b", "same id, other kb", kb_id="B")])

        listed = index.document_chunks("A", "d1", 100)
        assert [c.ref_id for c in listed] == ["r0", "r1", "r2"]
        assert all(c.vector is None for c in listed)
        assert index.document_chunks("A", "missing", 100) == []
        assert len(index.document_chunks("A", "d1", 2)) == 2  # the caller's limit holds
    finally:
        index.close()


def test_the_opensearch_engine_asks_for_one_document_sorted_by_position() -> None:
    first, second = osb.chunk("A:d1:0", position=0), osb.chunk("A:d1:1", position=1)
    hits = {"hits": {"hits": [{"_source": osb.source_of(c)} for c in (first, second)]}}
    client = osb.FakeClient({"search": hits})
    index = osb.make(client)

    assert index.document_chunks("A", "d1", 5001) == [first, second]
    assert client.only("search") == {
        "index": osb.INDEX,
        "body": {
            "query": {"bool": {"filter": [{"term": {"kb_id": "A"}}, {"term": {"document_id": "d1"}}]}},
            "sort": [{"position": "asc"}],
            "size": 5001,
            "_source": osb.SOURCE,
        },
    }
