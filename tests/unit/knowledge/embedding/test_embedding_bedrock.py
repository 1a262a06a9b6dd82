"""The Bedrock embedder against the loopback Bedrock runtime: Titan Text Embeddings V2 one text per
InvokeModel call with bounded concurrency, Cohere Embed Multilingual v3 in batches of at most 96,
the real request bodies, the dimension the index expects, the shared cache, and failures."""

from __future__ import annotations

import numpy as np
import pytest
from tests.fakes.bedrock_server import ROLE_ARN, FakeBedrock, Refused

from citegate.knowledge.embedding import (
    CachedEmbedder,
    EmbeddingUnavailable,
    HashingEmbedder,
    InMemoryEmbeddingCache,
    build_embedder,
)
from citegate.knowledge.embedding.bedrock import COHERE_MULTILINGUAL, TITAN_V2, BedrockEmbedder

TEXTS = ["Olympus Mons is on Mars.", "长城位于中国北方。", "   ", "Everest is in the Himalaya."]


def invokes(server: FakeBedrock) -> list[dict[str, object]]:
    return [c for c in server.calls if c["operation"] == "invoke"]


def titan(server: FakeBedrock, **options: object) -> BedrockEmbedder:
    return BedrockEmbedder(TITAN_V2, "us-east-1", endpoint_url=server.url, max_attempts=2, **options)  # type: ignore[arg-type]


def test_titan_embeds_one_text_per_call_with_the_configured_dimension(bedrock: FakeBedrock) -> None:
    embedder = titan(bedrock, dimension=512)
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.shape == (4, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    # The vectors are the ones the service returned, in the order of the texts.
    expected = HashingEmbedder(512).embed_documents([t if t.strip() else " " for t in TEXTS])
    assert np.allclose(vectors, expected, atol=1e-6)
    calls = invokes(bedrock)
    assert len(calls) == 4 and all(c["signature_ok"] for c in calls)
    assert {c["path"] for c in calls} == {"/model/amazon.titan-embed-text-v2%3A0/invoke"}
    assert sorted(c["body"]["inputText"] for c in calls) == sorted(t if t.strip() else " " for t in TEXTS)  # type: ignore[index]
    assert all(c["body"]["dimensions"] == 512 and c["body"]["normalize"] is True for c in calls)  # type: ignore[index]
    assert all(c["headers"]["accept"] == "application/json" for c in calls)  # type: ignore[index]
    query = embedder.embed_query("Olympus Mons")
    assert query.shape == (512,)


def test_titan_runs_its_calls_with_bounded_concurrency(bedrock: FakeBedrock) -> None:
    bedrock.invoke_delay = 0.05
    embedder = titan(bedrock, concurrency=4)
    vectors = embedder.embed_documents([f"text {i}" for i in range(24)])
    assert vectors.shape == (24, 1024)
    assert 2 <= bedrock.most_in_flight <= 4, bedrock.most_in_flight


def test_cohere_embeds_in_batches_of_96_with_input_types(bedrock: FakeBedrock) -> None:
    embedder = BedrockEmbedder(COHERE_MULTILINGUAL, "us-east-1", endpoint_url=bedrock.url)
    texts = [f"第{i}段：长城是中国古代的军事防御工程。" for i in range(200)] + ["x" * 5000]
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (201, 1024)
    calls = invokes(bedrock)
    assert sorted(len(c["body"]["texts"]) for c in calls) == [9, 96, 96]  # type: ignore[index]
    assert all(c["body"]["input_type"] == "search_document" and c["body"]["truncate"] == "END" for c in calls)  # type: ignore[index]
    assert max(len(t) for c in calls for t in c["body"]["texts"]) == 2048, "cut to what Cohere takes"  # type: ignore[index]
    expected = HashingEmbedder(1024).embed_query(texts[150])
    assert np.allclose(vectors[150], expected, atol=1e-6), "rows stay in the texts' order"
    embedder.embed_query("长城在哪里？")
    assert invokes(bedrock)[-1]["body"] == {
        "texts": ["长城在哪里？"],
        "input_type": "search_query",
        "truncate": "END",
    }


def test_the_cache_spares_the_calls_for_texts_already_embedded(bedrock: FakeBedrock) -> None:
    cache = InMemoryEmbeddingCache()
    embedder = CachedEmbedder(titan(bedrock, dimension=256), cache)
    first = embedder.embed_documents(TEXTS)
    assert len(invokes(bedrock)) == 4
    again = CachedEmbedder(titan(bedrock, dimension=256), cache).embed_documents([*TEXTS, "new text"])
    assert len(invokes(bedrock)) == 5, "only the new text"
    assert np.allclose(again[:4], first)
    assert embedder.model_id == "bedrock-amazon.titan-embed-text-v2-0-256"


def test_the_dimension_is_known_without_a_call_and_checked() -> None:
    assert BedrockEmbedder(TITAN_V2, "us-east-1").dimension == 1024
    assert BedrockEmbedder(COHERE_MULTILINGUAL, "us-east-1").dimension == 1024
    with pytest.raises(ValueError, match="256, 512, 1024"):
        BedrockEmbedder(TITAN_V2, "us-east-1", dimension=384)
    with pytest.raises(ValueError, match="1024-d"):
        BedrockEmbedder(COHERE_MULTILINGUAL, "us-east-1", dimension=512)
    with pytest.raises(ValueError, match="unsupported Bedrock embedding model"):
        BedrockEmbedder("amazon.titan-embed-image-v1", "us-east-1")
    built = build_embedder("bedrock", bedrock_model=TITAN_V2, bedrock_region="eu-west-1", dimension=512)
    assert isinstance(built, BedrockEmbedder) and built.dimension == 512


def test_throttling_is_retried_then_answered(bedrock: FakeBedrock) -> None:
    bedrock.throttle_next = 1
    assert titan(bedrock).embed_query("Olympus Mons").shape == (1024,)
    assert len(invokes(bedrock)) == 2


def test_failures_are_embedding_unavailable_without_bedrocks_message(bedrock: FakeBedrock) -> None:
    bedrock.throttle_next = 2
    with pytest.raises(EmbeddingUnavailable, match=r"HTTP 429 \(ThrottlingException\)"):
        titan(bedrock).embed_query("Olympus Mons")
    bedrock.fail_all = Refused(403, "AccessDeniedException", f"User: {ROLE_ARN} is not authorized")
    with pytest.raises(EmbeddingUnavailable) as raised:
        titan(bedrock).embed_documents(["a", "b"])
    assert "AccessDeniedException" in str(raised.value) and ROLE_ARN not in str(raised.value)
    bedrock.fail_all = None
    # A body Bedrock refuses (97 texts for Cohere): the embedder never sends one, the service says no.
    cohere = BedrockEmbedder("cohere.embed-english-v3", "us-east-1", endpoint_url=bedrock.url)
    with pytest.raises(EmbeddingUnavailable, match=r"refused the request \(ValidationException\)"):
        cohere._invoke({"texts": ["a"] * 97, "input_type": "search_document"})


def test_the_container_builds_it_from_settings_with_the_shared_cache() -> None:
    from citegate.container import Services
    from citegate.platform.settings import Settings

    settings = Settings(
        CITEGATE_EMBEDDER="bedrock",
        CITEGATE_BEDROCK_EMBEDDING_MODEL_ID=COHERE_MULTILINGUAL,
        CITEGATE_BEDROCK_REGION="eu-central-1",
        AWS_REGION="us-east-1",
    )
    embedder = Services(settings=settings).embedder
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, BedrockEmbedder)
    assert embedder.dimension == 1024 and embedder.model_id == "bedrock-cohere.embed-multilingual-v3-1024"
    assert type(embedder.cache).__name__ == "DynamoEmbeddingCache", "the cache every embedder uses"
