"""The local stack's resources equal the template's: nothing can drift.

`citegate.runtime.provision` creates the tables, queues and state machine on the embedded endpoint;
the CDK app creates them in AWS. Both read `citegate.platform.resources`, and this module proves the results
agree: it synthesizes the app (dependency layers as placeholders; the nested stacks flattened into
one template, tests/infrastructure/synth.py) and runs the provisioning functions against fake
clients that record what they would send to DynamoDB, SQS and Step Functions, then compares the
two shape by shape.

It also checks that configuration carries secrets by reference only (cdk.json's stage blocks,
the authorizer's token, the optional LLM, embedding and GitHub secrets).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from infra.constructs.endpoint_function import FUNCTION_SPECS
from infra.constructs.streaming import stream_name, streaming_functions
from infra.stack import (
    EMBEDDING_API_KEY_SECRET_ENV,
    GITHUB_TOKEN_SECRET_ENV,
    LLM_API_KEY_SECRET_ENV,
    CitegateConfig,
    SecretRef,
)
from tests.infrastructure.synth import refs, synthesize

from citegate.api import routes
from citegate.platform import resources
from citegate.runtime import provision

REPO = Path(__file__).resolve().parents[2]
STAGE = "drift"
Resources = dict[str, dict[str, Any]]
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:citegate/drift/llm-AbCdEf"


@pytest.fixture(scope="module")
def res() -> Resources:
    return synthesize(
        {
            "stage": STAGE,
            # Every optional secret on, to see where each one goes (and where it does not).
            "citegate:embedder": "openai",
            "citegate:embedding_base_url": "https://embeddings.example.com/v1",
            "citegate:embedding_model": "text-embedding-3-small",
            "citegate:embedding_dimension": 1536,
            "citegate:embedding_api_key_secret": "citegate/drift/embedding-api-key",
            "citegate:llm_base_url": "https://llm.example.com/v1",
            "citegate:llm_model": "gpt-4o-mini",
            "citegate:llm_verify_citations": "true",
            "citegate:llm_api_key_secret": SECRET_ARN,
            "citegate:github_repository": "example/citegate-feedback",
            "citegate:github_token_secret": "citegate/drift/github-token",
        }
    ).resources


def of_type(res: Resources, kind: str) -> Resources:
    return {k: v for k, v in res.items() if v["Type"] == kind}


def by_property(res: Resources, kind: str, prop: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Resources of one type keyed by a literal property (a table or queue name): (logical, props)."""
    return {
        v["Properties"][prop]: (k, v["Properties"])
        for k, v in of_type(res, kind).items()
        if isinstance(v["Properties"].get(prop), str)
    }


# ----------------------------------------------------------------------------- fake clients


class FakeDynamoDB:
    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}
        self.ttl: dict[str, dict[str, Any]] = {}

    def list_tables(self) -> dict[str, Any]:
        return {"TableNames": []}

    def create_table(self, **kwargs: Any) -> dict[str, Any]:
        self.created[kwargs["TableName"]] = kwargs
        return {"TableDescription": {"TableName": kwargs["TableName"]}}

    def update_time_to_live(self, *, TableName: str, TimeToLiveSpecification: dict[str, Any]) -> None:
        self.ttl[TableName] = TimeToLiveSpecification


class FakeSQS:
    def __init__(self) -> None:
        self.created: dict[str, dict[str, str]] = {}

    def create_queue(self, *, QueueName: str, Attributes: dict[str, str]) -> dict[str, str]:
        self.created[QueueName] = Attributes
        return {"QueueUrl": f"https://sqs.local/{QueueName}"}

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return {"Attributes": {"QueueArn": f"arn:local:sqs:{QueueUrl.rsplit('/', 1)[-1]}"}}


class FakeStepFunctions:
    def __init__(self) -> None:
        self.definition: str | None = None

    def list_state_machines(self) -> dict[str, Any]:
        return {"stateMachines": []}

    def create_state_machine(self, *, name: str, definition: str, roleArn: str) -> dict[str, str]:
        self.definition = definition
        return {"stateMachineArn": f"arn:local:states:{name}"}


# ----------------------------------------------------------------------------- tables


def _cfn_table(props: dict[str, Any]) -> dict[str, Any]:
    """The template's table in create_table's vocabulary (only what the local stack sets)."""
    shape: dict[str, Any] = {
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "BillingMode": props.get("BillingMode"),
        "GlobalSecondaryIndexes": sorted(
            (
                {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
                for index in props.get("GlobalSecondaryIndexes", [])
            ),
            key=lambda i: i["IndexName"],
        ),
        "TimeToLive": props.get("TimeToLiveSpecification"),
    }
    return shape


def _local_table(created: dict[str, Any], ttl: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "KeySchema": created["KeySchema"],
        "AttributeDefinitions": sorted(created["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "BillingMode": created.get("BillingMode"),
        "GlobalSecondaryIndexes": sorted(
            created.get("GlobalSecondaryIndexes", []), key=lambda i: i["IndexName"]
        ),
        "TimeToLive": ttl,
    }


def test_every_table_matches_the_local_stack(res: Resources) -> None:
    fake = FakeDynamoDB()
    provision.create_tables(fake, STAGE)
    template_tables = by_property(res, "AWS::DynamoDB::Table", "TableName")
    names = {shape.physical_name(STAGE) for shape in resources.TABLES}
    assert set(fake.created) == names
    assert set(template_tables) == names
    for shape in resources.TABLES:
        name = shape.physical_name(STAGE)
        _, props = template_tables[name]
        assert _cfn_table(props) == _local_table(fake.created[name], fake.ttl.get(name)), name


def test_the_comparison_sees_a_difference(res: Resources) -> None:
    """The comparison is not vacuous: a local table with another TTL attribute differs."""
    fake = FakeDynamoDB()
    provision.create_tables(fake, STAGE)
    name = resources.SESSIONS.physical_name(STAGE)
    _, props = by_property(res, "AWS::DynamoDB::Table", "TableName")[name]
    drifted = {"Enabled": True, "AttributeName": "expires_at"}
    assert _cfn_table(props) != _local_table(fake.created[name], drifted)


# ----------------------------------------------------------------------------- queues


def test_queues_match_the_local_stack(res: Resources) -> None:
    fake = FakeSQS()
    provision.create_queues(fake, STAGE)
    template_queues = by_property(res, "AWS::SQS::Queue", "QueueName")
    logical_names = {logical: name for name, (logical, _) in template_queues.items()}
    names = {shape.physical_name(STAGE) for shape in resources.QUEUES}
    assert set(fake.created) == names and set(template_queues) == names
    for shape in resources.QUEUES:
        name = shape.physical_name(STAGE)
        local = fake.created[name]
        _, props = template_queues[name]
        assert int(props["VisibilityTimeout"]) == int(local["VisibilityTimeout"]), name
        assert int(props["MessageRetentionPeriod"]) == int(local["MessageRetentionPeriod"]), name
        if "RedrivePolicy" not in local:
            assert "RedrivePolicy" not in props, name
            continue
        local_redrive = json.loads(local["RedrivePolicy"])
        redrive = props["RedrivePolicy"]
        assert int(redrive["maxReceiveCount"]) == int(local_redrive["maxReceiveCount"]), name
        # Both point at the same dead-letter queue (by name; the ARNs differ by construction).
        target_logical = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert local_redrive["deadLetterTargetArn"] == f"arn:local:sqs:{logical_names[target_logical]}"


# ----------------------------------------------------------------------------- state machine


def _definition_string(value: Any) -> str:
    """DefinitionString as text: a literal, or an Fn::Join of literals."""
    if isinstance(value, str):
        return value
    delimiter, parts = value["Fn::Join"]
    assert all(isinstance(p, str) for p in parts), "the definition should hold no tokens of its own"
    return str(delimiter).join(parts)


def test_state_machine_is_the_shared_asl_with_the_same_substitutions(res: Resources) -> None:
    ((name, (_, machine)),) = by_property(res, "AWS::StepFunctions::StateMachine", "StateMachineName").items()
    assert name == resources.state_machine_name(STAGE)
    functions = {
        props["FunctionName"]: logical
        for logical, props in ((k, v["Properties"]) for k, v in of_type(res, "AWS::Lambda::Function").items())
        if isinstance(props.get("FunctionName"), str)
    }
    # The same stand-in ARN on both sides: the template's GetAtt of a function, the local stack's ARN.
    marker = {fn: f"arn:test:function:{fn}" for fn in resources.INGESTION_STEP_FUNCTIONS.values()}

    substitutions = machine["DefinitionSubstitutions"]
    assert set(substitutions) == set(resources.INGESTION_STEP_FUNCTIONS)
    template_text = _definition_string(machine["DefinitionString"])
    for placeholder, function in resources.INGESTION_STEP_FUNCTIONS.items():
        # The step's live alias (a published version), which names its function.
        (alias,) = [r for r in refs(substitutions[placeholder]) if res[r]["Type"] == "AWS::Lambda::Alias"]
        assert res[alias]["Properties"]["FunctionName"] == {
            "Ref": functions[resources.function_name(STAGE, function)]
        }, placeholder
        template_text = template_text.replace("${" + placeholder + "}", marker[function])
    assert not re.search(r"\$\{\w+\}", template_text), "a placeholder left unsubstituted"

    fake = FakeStepFunctions()
    provision.create_state_machine(fake, STAGE, marker, "arn:test:role")
    assert fake.definition is not None
    assert json.loads(template_text) == json.loads(fake.definition)
    assert json.loads(fake.definition) != json.loads(resources.ASL_PATH.read_text())  # substituted


# ----------------------------------------------------------------------------- secrets by reference


def _function_env(res: Resources) -> dict[str, tuple[str, dict[str, Any]]]:
    """function folder name -> (role logical id, environment variables)."""
    out = {}
    prefix = f"{resources.APP}-{STAGE}-"
    for fn in of_type(res, "AWS::Lambda::Function").values():
        props = fn["Properties"]
        name = props.get("FunctionName")
        if isinstance(name, str) and name.startswith(prefix):
            key = name.removeprefix(prefix).replace("-", "_")
            out[key] = (props["Role"]["Fn::GetAtt"][0], props.get("Environment", {}).get("Variables", {}))
    return out


def _secret_readers(res: Resources) -> dict[str, list[Any]]:
    """role logical id -> the resources of its secretsmanager statements."""
    readers: dict[str, list[Any]] = {}
    for policy in of_type(res, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(str(a).startswith("secretsmanager:") for a in actions):
                assert actions == ["secretsmanager:GetSecretValue"]
                found = statement["Resource"]  # minimizePolicies merges statements
                for role in policy["Properties"]["Roles"]:
                    readers.setdefault(role["Ref"], []).extend(found if isinstance(found, list) else [found])
    return readers


def test_no_secret_value_or_dynamic_reference_in_any_environment(res: Resources) -> None:
    text = json.dumps({k: v for k, v in res.items() if v["Type"] == "AWS::Lambda::Function"})
    assert "{{resolve:" not in text
    for name, (_, env) in _function_env(res).items():
        for variable in env:
            assert variable not in {
                "RAG_API_TOKEN",
                "CITEGATE_LLM_API_KEY",
                "CITEGATE_EMBEDDING_API_KEY",
                "CITEGATE_GITHUB_TOKEN",
                "OPENAI_API_KEY",
            }, (name, variable)


def test_the_authorizer_alone_reads_the_token_secret_by_arn(res: Resources) -> None:
    functions = _function_env(res)
    (token_secret,) = of_type(res, "AWS::SecretsManager::Secret")
    role, env = functions[routes.AUTHORIZER_FUNCTION]
    assert env["RAG_API_TOKEN_SECRET_ARN"] == {"Ref": token_secret}
    readers = _secret_readers(res)
    assert readers[role] == [{"Ref": token_secret}]
    for name, (other_role, other_env) in functions.items():
        if name != routes.AUTHORIZER_FUNCTION:
            assert "RAG_API_TOKEN_SECRET_ARN" not in other_env, name
            assert {"Ref": token_secret} not in readers.get(other_role, []), name


def test_configured_secrets_reach_only_their_users(res: Resources) -> None:
    functions = _function_env(res)
    readers = _secret_readers(res)
    llm = [n for n, (_, env) in functions.items() if LLM_API_KEY_SECRET_ENV in env]
    # Every function that answers (the answering layer) may use the model, and only those: the
    # streaming twins of answering functions too (same folder and grants, infra/constructs/streaming.py).
    answering = sorted(
        [n for n, spec in FUNCTION_SPECS.items() if "answering" in spec.layers]
        + [stream_name(f) for f in streaming_functions() if "answering" in FUNCTION_SPECS[f].layers]
    )
    assert sorted(llm) == answering and {"kb_ask", "query_v2", "agent_chat_message"} <= set(llm)
    for name in llm:
        assert functions[name][1][LLM_API_KEY_SECRET_ENV] == SECRET_ARN
        assert SECRET_ARN in readers[functions[name][0]]
        # The model's check of each citation (citegate.answers.verify), where it was asked for.
        assert functions[name][1]["CITEGATE_LLM_VERIFY_CITATIONS"] == "true"
    verifying = [n for n, (_, env) in functions.items() if "CITEGATE_LLM_VERIFY_CITATIONS" in env]
    assert sorted(verifying) == sorted(llm)
    embedding = {n for n, (_, env) in functions.items() if EMBEDDING_API_KEY_SECRET_ENV in env}
    assert {"ingest_embed", "kb_ask"} <= embedding
    github = {n for n, (_, env) in functions.items() if GITHUB_TOKEN_SECRET_ENV in env}
    assert github == {n for n, spec in FUNCTION_SPECS.items() if "write" in spec.tables.get("feedback", ())}
    assert all(functions[n][1]["CITEGATE_GITHUB_REPOSITORY"] == "example/citegate-feedback" for n in github)
    users = {routes.AUTHORIZER_FUNCTION} | set(llm) | embedding | github
    for name, (role, env) in functions.items():
        has_secret_env = any(v.endswith("_SECRET_ARN") for v in env)
        assert has_secret_env == (name in users), name
        assert (role in readers) == (name in users), name
        # Every statement names one secret: its ARN, or its name with the 6-character suffix.
        for resource in readers.get(role, []):
            assert "*" not in json.dumps(resource), (name, resource)


def test_stage_blocks_are_typed_and_refuse_plaintext_secrets() -> None:
    cdk_context = json.loads((REPO / "cdk.json").read_text())["context"]
    dev = CitegateConfig.from_context(cdk_context.get, environ={})
    assert dev.stage == "dev" and dev.embedder == "use" and dev.page_origins == ("http://localhost:8099",)
    ready = {"page_origins": "https://docs.example.com", "oidc_issuer": "https://id.example.com/"}
    stages = {
        "citegate:stages": {
            "prod": {
                "log_level": "warning",
                "llm_api_key_secret": "citegate/prod/llm",
                "throttle_rate": 20,
                "alarm_topic": "oncall",
                **ready,
            }
        }
    }
    prod = CitegateConfig.from_context({**stages, "stage": "prod"}.get, environ={})
    assert prod.log_level == "WARNING" and prod.throttle_rate == 20.0
    assert prod.llm_api_key_secret == SecretRef("citegate/prod/llm")
    # -c citegate:<field> beats the stage block.
    overridden = CitegateConfig.from_context(
        {**stages, "stage": "prod", "citegate:throttle_rate": "5"}.get, environ={}
    )
    assert overridden.throttle_rate == 5.0
    with pytest.raises(ValueError, match="not a setting"):
        CitegateConfig.from_context({"citegate:stages": {"dev": {"throtle_rate": 1}}}.get, environ={})
    for context in (
        {"citegate:stages": {"dev": {"llm_api_key": "sk-live"}}},
        {"citegate:github_token": "ghp_x"},
        {"citegate:api_token": "rag-dev-token-123"},
    ):
        with pytest.raises(ValueError, match="by reference"):
            CitegateConfig.from_context(context.get, environ={})
    with pytest.raises(ValueError, match="not a Secrets Manager"):
        SecretRef("arn:aws:ssm:us-east-1:111122223333:parameter/x")
    with pytest.raises(ValueError, match="go together"):
        CitegateConfig.from_context({"citegate:github_repository": "a/b"}.get, environ={})
