"""A deploy with `llm_provider: bedrock` and `embedder: bedrock`: the functions invoke exactly the
configured models (a cross-region inference profile included) with their own roles, and no
secret is created, referenced or read for a model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.constructs.bedrock import model_arns
from infra.stack import CitegateConfig
from tests.infrastructure.synth import Synth, synthesize, text
from tests.infrastructure.test_stack import STAGE, functions_by_name, of_type, role_of, statements_of

from citegate.api import routes

PROFILE = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
COHERE = "cohere.embed-multilingual-v3"
BEDROCK = {
    "stage": STAGE,
    "citegate:llm_provider": "bedrock",
    "citegate:bedrock_model_id": PROFILE,
    "citegate:embedder": "bedrock",
    "citegate:bedrock_embedding_model_id": COHERE,
    "citegate:llm_verify_citations": True,
}
Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize(BEDROCK)


@pytest.fixture(scope="module")
def res(synth: Synth) -> Resources:
    return synth.resources


def bedrock_statements(res: Resources, function: str) -> list[dict[str, Any]]:
    return [
        s
        for s in statements_of(res, role_of(res, function))
        if any(
            str(a).startswith("bedrock:")
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        )
    ]


def resources_of(statement: dict[str, Any]) -> list[str]:
    found = statement["Resource"]
    return [text(r) for r in (found if isinstance(found, list) else [found])]


ANSWERING_MODEL = [
    f"arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/{PROFILE}",
    *(
        f"arn:<AWS::Partition>:bedrock:{region}::foundation-model/{HAIKU}"
        for region in ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
    ),
]
EMBEDDING_MODEL = [f"arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/{COHERE}"]


def test_answering_functions_invoke_exactly_the_model_and_its_profile(res: Resources) -> None:
    answering = ["kb_ask", "answer_ask", "agent_ask", "query_v2", "agent_chat_message"]
    for function in answering:
        statements = sorted(bedrock_statements(res, function), key=lambda s: len(resources_of(s)))
        assert len(statements) == 2, function
        embedding, model = statements
        assert model["Effect"] == "Allow" and "Condition" not in model
        assert model["Action"] == ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
        assert resources_of(model) == ANSWERING_MODEL
        assert embedding["Action"] == "bedrock:InvokeModel"
        assert resources_of(embedding) == EMBEDDING_MODEL


def test_embedding_only_functions_invoke_only_the_embedding_model(res: Resources) -> None:
    for function in ("kb_retrieve", "agent_search", "ingest_embed"):
        [statement] = bedrock_statements(res, function)
        assert statement["Action"] == "bedrock:InvokeModel" and resources_of(statement) == EMBEDDING_MODEL


def test_functions_that_neither_answer_nor_embed_invoke_no_model(res: Resources) -> None:
    for function in ("kb_list", "admin_policies_list", "me", routes.AUTHORIZER_FUNCTION):
        assert bedrock_statements(res, function) == [], function


def test_no_secret_is_created_referenced_or_read_for_a_model(res: Resources) -> None:
    # The one secret is the service's own API token, read by the authorizer only.
    (secret,) = of_type(res, "AWS::SecretsManager::Secret")
    readers = []
    for name, logical in functions_by_name(res).items():
        env = res[logical]["Properties"].get("Environment", {}).get("Variables", {})
        assert not {k for k in env if "LLM_API_KEY" in k or "EMBEDDING_API_KEY" in k}, name
        if any("secretsmanager" in json.dumps(s["Action"]) for s in statements_of(res, role_of(res, name))):
            readers.append(name)
    assert readers == [routes.AUTHORIZER_FUNCTION]
    assert "{{resolve:secretsmanager" not in json.dumps(res)
    assert secret


def test_functions_are_told_the_provider_and_the_models(res: Resources, synth: Synth) -> None:
    env = res[functions_by_name(res)["kb_ask"]]["Properties"]["Environment"]["Variables"]
    assert env["CITEGATE_LLM_PROVIDER"] == "bedrock" and env["CITEGATE_BEDROCK_MODEL_ID"] == PROFILE
    assert env["CITEGATE_EMBEDDER"] == "bedrock" and env["CITEGATE_BEDROCK_EMBEDDING_MODEL_ID"] == COHERE
    assert env["CITEGATE_EMBEDDING_DIMENSION"] == "1024" and env["CITEGATE_LLM_VERIFY_CITATIONS"] == "true"
    assert "CITEGATE_LLM_BASE_URL" not in env and "CITEGATE_BEDROCK_REGION" not in env
    # The search index is made for the embedding model's vectors.
    assert synth.stack.config.search.dimension == 1024  # type: ignore[attr-defined]


# ---- configuration, without a synth ---------------------------------------------------------------


def config(**context: Any) -> CitegateConfig:
    values = {"stage": "dev", **{f"citegate:{k}": v for k, v in context.items()}}
    return CitegateConfig.from_context(values.get, environ={})


def test_context_is_checked() -> None:
    bedrock = config(llm_provider="bedrock", bedrock_model_id=HAIKU)
    assert bedrock.llm_provider == "bedrock" and bedrock.llm_base_url is None
    with pytest.raises(ValueError, match="needs citegate:bedrock_model_id"):
        config(llm_provider="bedrock")
    with pytest.raises(ValueError, match="remove citegate:llm_api_key_secret"):
        config(llm_provider="bedrock", bedrock_model_id=HAIKU, llm_api_key_secret="citegate/llm-key")
    with pytest.raises(ValueError, match="only with citegate:llm_provider=bedrock"):
        config(bedrock_model_id=HAIKU)
    with pytest.raises(ValueError, match="openai or bedrock"):
        config(llm_provider="vertex")
    titan = config(embedder="bedrock", embedding_dimension=512)
    assert titan.bedrock_embedding_model_id == "amazon.titan-embed-text-v2:0"
    assert titan.embedding_dimension == 512 and titan.search.dimension == 512
    with pytest.raises(ValueError, match=r"makes vectors of \(256, 512, 1024\)"):
        config(embedder="bedrock", embedding_dimension=384)
    with pytest.raises(ValueError, match=r"makes vectors of \(1024,\)"):
        config(embedder="bedrock", bedrock_embedding_model_id=COHERE, embedding_dimension=512)
    with pytest.raises(ValueError, match="only with citegate:embedder=bedrock"):
        config(bedrock_embedding_model_id=COHERE)
    with pytest.raises(ValueError, match="remove citegate:embedding_base_url"):
        config(embedder="bedrock", embedding_base_url="https://example.org/v1")


def test_model_arns_by_kind_of_id() -> None:
    [foundation] = model_arns(HAIKU, "eu-west-1")
    assert foundation.startswith("arn:") and foundation.endswith(
        f":bedrock:eu-west-1::foundation-model/{HAIKU}"
    )
    narrowed = model_arns("eu." + HAIKU, "eu-west-1", ["eu-west-1", "eu-central-1"])
    assert narrowed[0].endswith(
        f":bedrock:eu-west-1:{narrowed[0].split(':')[4]}:inference-profile/eu.{HAIKU}"
    )
    assert [a.split(":")[3] for a in narrowed[1:]] == ["eu-west-1", "eu-central-1"]
    assert all(a.endswith(f"::foundation-model/{HAIKU}") for a in narrowed[1:])
    provisioned = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123"
    assert model_arns(provisioned, "us-east-1") == [provisioned]
    assert [a.split(":")[3] for a in model_arns("global." + HAIKU, "us-east-1")[1:]] == ["*"]
    # An id whose first part is a provider, not a geography, is a foundation model.
    assert len(model_arns("amazon.nova-lite-v1:0", "us-east-1")) == 1
