"""Engines for the conformance suite: the embedded engine always, OpenSearch when a cluster is given.

OpenSearch runs only when `OPENSEARCH_URL` is set (e.g. `http://localhost:9200` or
`https://admin:secret@localhost:9200`); optional:
    OPENSEARCH_VERIFY_CERTS=0            accept a self-signed certificate (the demo docker image)
    OPENSEARCH_CHINESE_ANALYZER=cjk      when the cluster lacks the analysis-smartcn plugin
Each test gets its own prefix (indices, template and pipelines), deleted afterwards.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from citegate.knowledge.search.base import FusionConfig, SearchIndex
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

DIM = 16
ENGINES = ("embedded", "opensearch")
# Every fusion config the suite uses: their pipelines exist before the first search.
FUSIONS = (FusionConfig("min_max", 0.7), FusionConfig("min_max", 0.3), FusionConfig("rrf", rank_constant=60))

_RUN = uuid.uuid4().hex[:8]
_counter = itertools.count()


def _opensearch(prefix: str) -> Any:
    from citegate.knowledge.search.opensearch import OpenSearchIndex

    url = os.environ["OPENSEARCH_URL"]
    verify = os.environ.get("OPENSEARCH_VERIFY_CERTS", "1").lower() not in ("0", "false", "no")
    analyzer = os.environ.get("OPENSEARCH_CHINESE_ANALYZER", "smartcn")
    return OpenSearchIndex.from_url(
        url, prefix=prefix, dimension=DIM, verify_certs=verify, chinese_analyzer=analyzer, timeout=30.0
    )


def _drop(client: Any, prefix: str) -> None:
    """Delete everything this prefix created: index, template, search pipelines."""
    client.indices.delete(index=f"{prefix}-chunks", ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{prefix}-chunks-template", ignore=404)
    pipelines = client.search_pipeline.get(ignore=404) or {}
    for name in pipelines:
        if name.startswith(f"{prefix}-"):
            client.search_pipeline.delete(id=name, ignore=404)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SearchIndex]:
    if request.param == "embedded":
        embedded = EmbeddedSearchIndex(tmp_path / "index", DIM)
        yield embedded
        embedded.close()
        return
    if not os.environ.get("OPENSEARCH_URL"):
        pytest.skip("OPENSEARCH_URL is not set: the OpenSearch engine runs only against a real cluster")
    prefix = f"citegate-test-{_RUN}-{next(_counter)}"
    index = _opensearch(prefix)
    try:
        index.ensure_setup(FUSIONS)
        yield index
    finally:
        try:
            _drop(index.client, prefix)
        finally:
            index.close()
