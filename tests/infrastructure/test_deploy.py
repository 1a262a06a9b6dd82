"""Issue 20: what a first `cdk deploy` trips over, found offline, for the dev and the prod synth.

No stack can be deployed from here, so every deploy-time failure that can be seen in the templates
is checked in them:
- cfn-lint over every template (the top-level stack and each nested one): no errors;
- every custom resource's reply, with realistic ARNs, stays under CloudFormation's 4,096 bytes
  (the OpenSearch access-policy reply was 14.7 KB and rolled the first deploy back);
- every custom resource waits for everything it reads or writes, as its handler's IAM grants name
  them (the policy seed once ran whenever the policies table happened to exist);
- no template holds a literal region or account, even with the CLI's CDK_DEFAULT_* set: the
  pipeline deploys where its own region says;
- prod refuses development defaults; alarms, concurrency limits and removal policies are there.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import botocore.session
import pytest
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file
from infra.app import build
from infra.constructs.ingestion import CONSUMER_MAX_CONCURRENCY, RESERVED_STEPS
from infra.constructs.search import replicas_for
from infra.constructs.streaming import STREAM_RESERVED_CONCURRENCY, stream_name, streaming_functions
from tests.infrastructure.synth import Resources, Synth, alias_of, function_of, refs, synthesize, text

import citegate.knowledge.search.opensearch as opensearch
from citegate.api import routes
from citegate.knowledge.search.base import FusionConfig
from citegate.platform import resources

REPO = Path(__file__).resolve().parents[2]
CDK_CONTEXT = json.loads((REPO / "cdk.json").read_text())["context"]
# What `cdk` sets from a profile: the app must not bake it into the templates.
CLI_ENVIRONMENT = {"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "eu-central-2"}
PROD_SETTINGS = {
    "citegate:page_origins": "https://docs.example.com",
    "citegate:oidc_issuer": "https://login.example.com/",
    "citegate:oidc_audience": "citegate",
    "citegate:alarm_topic": "citegate-oncall",
}
REPLY_LIMIT = 4096
# cfn-lint warnings known to be harmless: W3005, a DependsOn that a reference already implies
# (CDK adds them to nested stacks and custom resources on purpose).
ACCEPTED_WARNINGS = {"W3005"}


@pytest.fixture(scope="module", params=["dev", "prod"])
def synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    saved = {key: os.environ.get(key) for key in CLI_ENVIRONMENT}
    os.environ.update(CLI_ENVIRONMENT)
    try:
        overrides = {"stage": request.param, **(PROD_SETTINGS if request.param == "prod" else {})}
        yield synthesize(overrides)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def of_type(res: Resources, *kinds: str) -> Resources:
    return {k: v for k, v in res.items() if v["Type"] in kinds}


# ----------------------------------------------------------------------------- environment


@functools.cache
def region_pattern() -> re.Pattern[str]:
    """Every region botocore knows, in every partition, and anything shaped like one."""
    session = botocore.session.get_session()
    known = {
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("ec2", partition_name=partition)
    }
    shape = r"[a-z]{2}(?:-gov|-iso[a-z]?)?-(?:north|south|east|west|central)[a-z]*-\d"
    return re.compile(rf"\b(?:{'|'.join(sorted(map(re.escape, known)))}|{shape})\b")


# Accounts that publish what the functions use, the same in every region: not the deploy's account.
PUBLISHER_ACCOUNTS = {
    "753240598075": "AWS Lambda Web Adapter's public layer (awslabs), layer ARN in the deploy's region",
}
ACCOUNT_SHAPE = re.compile(r"(?<![\w.])\d{12}(?![\w.])")


def literals(document: Any) -> set[str]:
    """Region names and 12-digit account ids written into a document."""
    body = json.dumps(document)
    return set(region_pattern().findall(body)) | (set(ACCOUNT_SHAPE.findall(body)) - set(PUBLISHER_ACCOUNTS))


def test_the_scan_sees_a_region_and_an_account() -> None:
    assert literals({"TopicArn": "arn:aws:sns:eu-west-1:111122223333:oncall"}) == {
        "eu-west-1",
        "111122223333",
    }
    assert literals({"Ref": "AWS::Region"}) == set()


def test_no_template_holds_a_literal_region_or_account(synth: Synth) -> None:
    assert synth.stack.environment == "aws://unknown-account/unknown-region"
    for name, template in synth.templates().items():
        assert literals(template) == set(), name
    # Where a region or account is needed, the template asks CloudFormation for it.
    assert {"AWS::Region", "AWS::AccountId"} <= set(refs(synth.parent))


# ----------------------------------------------------------------------------- cfn-lint


def test_cfn_lint_finds_no_error_in_any_template(synth: Synth) -> None:
    assert len(synth.template_files) == 1 + len(synth.nested)
    for path in synth.template_files:
        matches = lint_file(path, ManualArgs(regions=["us-east-1"]))
        findings = [f"{m.rule.id} {m.message}" for m in matches if m.rule.id not in ACCEPTED_WARNINGS]
        assert findings == [], path.name


def test_cdk_nag_finds_nothing_unacknowledged(synth: Synth) -> None:
    """`cdk synth` runs cdk-nag's AwsSolutions pack and fails on any finding without a reason: the
    prod synth too (reserved concurrency, dedicated masters, alarm actions differ from dev)."""
    report = AwsSolutionsChecks().validate_scope(synth.stack)
    assert [
        f"{v.rule_name}: {[r.construct_path for r in v.violating_resources]}" for v in report.violations
    ] == []


# ----------------------------------------------------------------------------- custom resources


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Real-world worst cases: the longest partition and region, a domain endpoint as OpenSearch names
# them, a nested stack's generated name and CloudFormation's ids.
REGION = "ap-southeast-2"
ENDPOINT = f"search-citegate-prod-{'a' * 26}.{REGION}.es.amazonaws.com"
STACK_ID = (
    "arn:aws-us-gov:cloudformation:us-gov-west-1:123456789012:stack/citegate-prod-"
    "AdminEndpointsNestedStackAdminEndpointsNestedStackResource9B8A230C-1A2B3C4D5E6F7/"
    "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
)
REQUEST_ID = "9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0"
REASON = "See the details in CloudWatch Log Stream: 2026/11/24/[$LATEST]" + "0" * 32


def concrete(node: Any) -> Any:
    """A property as CloudFormation would pass it: the domain endpoint and region made real."""
    if isinstance(node, dict):
        if "Fn::GetAtt" in node and node["Fn::GetAtt"][1] == "DomainEndpoint":
            return ENDPOINT
        if node == {"Ref": "AWS::Region"}:
            return REGION
        return {key: concrete(value) for key, value in node.items()}
    if isinstance(node, list):
        return [concrete(value) for value in node]
    return node


class FakeIndices:
    def __init__(self) -> None:
        self.settings: list[dict[str, Any]] = []

    def put_settings(self, index: str, body: dict[str, Any]) -> None:
        self.settings.append({"index": index, "body": body})


class FakeIndex:
    def __init__(self) -> None:
        self.client = type("Client", (), {"indices": FakeIndices()})()

    def close(self) -> None:
        pass


def opensearch_setup_reply(properties: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The setup handler's own reply, the setup itself answering as it does (its names, from the
    layer's naming functions)."""
    handler = load(REPO / "infra/custom_resources/opensearch_setup/handler.py", "setup_handler")
    index = FakeIndex()
    monkeypatch.setattr(opensearch.OpenSearchIndex, "from_aws", classmethod(lambda cls, *a, **k: index))

    def setup(_client: Any, prefix: str, _dimension: int, fusions: list[FusionConfig], **_: Any) -> Any:
        return {
            "template": opensearch.template_name(prefix),
            "index": opensearch.index_name(prefix),
            "created": True,
            "pipelines": [opensearch.pipeline_name(prefix, fusion) for fusion in fusions],
        }

    monkeypatch.setattr(opensearch, "setup_opensearch", setup)
    reply: dict[str, Any] = handler.lambda_handler(
        {"RequestType": "Create", "ResourceProperties": properties}, None
    )
    # The replicas the template asks for reach the index.
    assert index.client.indices.settings == [
        {
            "index": opensearch.index_name(properties["Prefix"]),
            "body": {"index": {"number_of_replicas": int(properties["Replicas"])}},
        }
    ]
    return reply


def policy_seed_reply(properties: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import citegate.container

    handler = load(REPO / "infra/custom_resources/policy_seed/handler.py", "seed_handler")
    seeded = len(json.loads(properties["Seed"])["policies"])

    class Policies:
        def seed(self, path: Path, *, tenant_id: str) -> int:
            assert json.loads(path.read_text()) == json.loads(properties["Seed"])
            return seeded

    services = type(
        "Services", (), {"policies": Policies(), "settings": type("S", (), {"default_tenant": "default"})}
    )
    monkeypatch.setattr(citegate.container, "services", lambda: services)
    reply: dict[str, Any] = handler.lambda_handler(
        {"RequestType": "Create", "ResourceProperties": properties}, None
    )
    return reply


def cdk_auto_delete_reply(properties: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """CDK's S3 auto-delete handler returns nothing: the provider replies with the physical id
    (the request id) and no data."""
    return {"PhysicalResourceId": REQUEST_ID}


def cdk_bucket_deployment_reply(
    properties: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """CDK's BucketDeployment handler (the pages' files, infra/constructs/web_hosting.py) replies
    with its physical id and, with `output_object_keys` off, only the destination bucket's ARN."""
    assert properties.get("OutputObjectKeys") in (False, "false"), "object keys would grow the reply"
    bucket = f"arn:aws-us-gov:s3:::{'citegate-prod-webfiles-' + 'x' * 40}"
    return {
        "PhysicalResourceId": f"aws.cdk.s3deployment.{REQUEST_ID}",
        "Data": {"DestinationBucketArn": bucket},
    }


REPLIES = {
    "Custom::CDKBucketDeployment": cdk_bucket_deployment_reply,
    "Custom::CitegateOpenSearchSetup": opensearch_setup_reply,
    "Custom::CitegatePolicySeed": policy_seed_reply,
    "Custom::S3AutoDeleteObjects": cdk_auto_delete_reply,
}


def response_body(logical: str, reply: dict[str, Any]) -> bytes:
    """What the provider framework PUTs to CloudFormation (cfn-response's fields)."""
    return json.dumps(
        {
            "Status": "SUCCESS",
            "Reason": REASON,
            "PhysicalResourceId": reply.get("PhysicalResourceId", REQUEST_ID),
            "StackId": STACK_ID,
            "RequestId": REQUEST_ID,
            "LogicalResourceId": logical.rsplit(".", 1)[-1],
            "NoEcho": False,
            "Data": reply.get("Data", {}),
        }
    ).encode()


def custom_resources(res: Resources) -> Resources:
    return {
        k: v
        for k, v in res.items()
        if v["Type"].startswith("Custom::") or v["Type"] == "AWS::CloudFormation::CustomResource"
    }


def test_every_custom_resource_replies_in_under_4096_bytes(
    synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = custom_resources(synth.resources)
    assert {"Custom::CitegateOpenSearchSetup", "Custom::CitegatePolicySeed"} <= {
        v["Type"] for v in found.values()
    }
    for logical, resource in found.items():
        model = REPLIES.get(resource["Type"])
        assert model is not None, (
            f"{logical}: {resource['Type']} has no reply model here; add one that returns its "
            "largest reply with real ARNs (CloudFormation refuses replies over 4,096 bytes)"
        )
        properties = concrete({k: v for k, v in resource["Properties"].items() if k != "ServiceToken"})
        size = len(response_body(logical, model(properties, monkeypatch)))
        assert size < REPLY_LIMIT, f"{logical} replies {size} bytes"


def handler_of(res: Resources, logical: str) -> str:
    """The function that does the custom resource's work: behind CDK's provider framework, the
    on-event function it relays to."""
    (function,) = [r for r in refs(res[logical]["Properties"]["ServiceToken"]) if r in res]
    variables = res[function]["Properties"].get("Environment", {}).get("Variables", {})
    user = variables.get("USER_ON_EVENT_FUNCTION_ARN")
    if user is not None:
        (function,) = [r for r in refs(user) if r in res]
    return function


def named_targets(res: Resources) -> dict[str, str]:
    """How an IAM statement names a stateful resource (by its fixed name) -> its logical id."""
    targets = {}
    for logical, resource in res.items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::DynamoDB::Table":
            targets[f":table/{props['TableName']}"] = logical
        elif kind == "AWS::OpenSearchService::Domain":
            targets[f":domain/{props['DomainName']}"] = logical
        elif kind == "AWS::S3::Bucket" and "BucketName" in props:
            targets[f":::{text(props['BucketName'])}"] = logical
        elif kind == "AWS::SQS::Queue":
            targets[f":{props['QueueName']}"] = logical
    return targets


def what_it_touches(res: Resources, logical: str) -> set[str]:
    """Every resource a custom resource's handler may read or write (its IAM grants, by reference
    or by name), and the grants themselves."""
    function = handler_of(res, logical)
    role = res[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    touched = set(refs(res[logical]["Properties"])) & set(res)
    targets = named_targets(res)
    for policy, resource in of_type(res, "AWS::IAM::Policy").items():
        if {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        touched.add(policy)
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            named = statement.get("Resource", [])
            for value in named if isinstance(named, list) else [named]:
                touched.update(r for r in refs(value) if r in res)
                arn = text(value)
                touched.update(
                    target for key, target in targets.items() if arn.endswith(key) or key + "/" in arn
                )
    touched.discard(logical)
    return touched


def dependencies(res: Resources, logical: str) -> set[str]:
    """Everything CloudFormation creates before `logical`: references and DependsOn, transitively."""
    seen: set[str] = set()
    pending = [logical]
    while pending:
        node = res[pending.pop()]
        direct = set(refs(node.get("Properties", {}))) | set(
            [node["DependsOn"]] if isinstance(node.get("DependsOn"), str) else node.get("DependsOn", [])
        )
        for dependency in direct & set(res):
            if dependency not in seen:
                seen.add(dependency)
                pending.append(dependency)
    return seen


def missing_dependencies(res: Resources) -> dict[str, set[str]]:
    missing = {}
    for logical in custom_resources(res):
        absent = what_it_touches(res, logical) - dependencies(res, logical)
        if absent:
            missing[logical] = absent
    return missing


def test_every_custom_resource_waits_for_what_it_reads_or_writes(synth: Synth) -> None:
    res = synth.resources
    assert missing_dependencies(res) == {}
    (seed,) = of_type(res, "Custom::CitegatePolicySeed")
    (table,) = [
        k
        for k, v in of_type(res, "AWS::DynamoDB::Table").items()
        if v["Properties"]["TableName"] == resources.POLICIES.physical_name(synth.stack.config.stage)
    ]
    assert table in what_it_touches(res, seed)
    # The check sees the first deploy's race: without its DependsOn the seed may run before the table.
    unordered = {**res, seed: {k: v for k, v in res[seed].items() if k != "DependsOn"}}
    assert table in missing_dependencies(unordered)[seed]


# ----------------------------------------------------------------------------- search


def test_the_domain_policy_delegates_to_iam_without_a_custom_resource(synth: Synth) -> None:
    res = synth.resources
    assert not of_type(res, "Custom::OpenSearchAccessPolicy", "Custom::AWS")
    (domain,) = of_type(res, "AWS::OpenSearchService::Domain").values()
    (statement,) = domain["Properties"]["AccessPolicies"]["Statement"]
    assert text(statement["Principal"]["AWS"]) == "arn:<AWS::Partition>:iam::<AWS::AccountId>:root"
    assert statement["Action"] == "es:ESHttp*" and statement["Effect"] == "Allow"
    assert text(statement["Resource"]).endswith(f":domain/citegate-{synth.stack.config.stage}/*")
    assert "Condition" not in statement


def test_index_replicas_fit_the_data_nodes(synth: Synth) -> None:
    (setup,) = of_type(synth.resources, "Custom::CitegateOpenSearchSetup").values()
    nodes = synth.stack.config.search.data_nodes
    assert setup["Properties"]["Replicas"] == str(replicas_for(nodes))
    assert replicas_for(1) == 0 and replicas_for(2) == 1
    assert (nodes, setup["Properties"]["Replicas"]) in ((1, "0"), (2, "1"))


# ----------------------------------------------------------------------------- production


def prod_context(**settings: Any) -> dict[str, Any]:
    return {**CDK_CONTEXT, "stage": "prod", "citegate:skip_dependency_layer_build": True, **settings}


def test_a_prod_synth_refuses_development_defaults() -> None:
    with pytest.raises(ValueError) as refused:
        build(prod_context(), nag=False)
    message = str(refused.value)
    for field in ("page_origins", "oidc_issuer", "alarm_topic"):
        assert f"  - {field}:" in message
    assert "development defaults" in message and "citegate:stages.prod" in message


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ({"citegate:page_origins": "http://localhost:8099"}, "page_origins"),
        ({"citegate:page_origins": "https://docs.example.com,http://docs.example.com"}, "page_origins"),
        ({"citegate:page_origins": "https://127.0.0.1:8443"}, "page_origins"),
        ({"citegate:oidc_issuer": "http://localhost:9000/"}, "oidc_issuer"),
        ({"citegate:alarm_topic": ""}, "alarm_topic"),
        ({"citegate:alarm_topic": "on call"}, "alarm_topic"),
    ],
)
def test_prod_refuses_each_development_value(settings: dict[str, str], refused: str) -> None:
    with pytest.raises(ValueError, match=rf"(- |citegate:){refused}:"):
        build(prod_context(**{**PROD_SETTINGS, **settings}), nag=False)


def test_prod_may_serve_no_pages_on_purpose() -> None:
    from infra.stack import CitegateConfig

    block = {**CDK_CONTEXT["citegate:stages"]["prod"], "page_origins": []}
    context = {**prod_context(**{k: v for k, v in PROD_SETTINGS.items() if k != "citegate:page_origins"})}
    context["citegate:stages"] = {**CDK_CONTEXT["citegate:stages"], "prod": block}
    config = CitegateConfig.from_context(context.get, environ={})
    assert config.page_origins == () and config.production


# ----------------------------------------------------------------------------- blind spots


def alarms(res: Resources) -> dict[str, dict[str, Any]]:
    return {
        str(v["Properties"]["AlarmName"]).split("-", 2)[-1]: v["Properties"]
        for v in of_type(res, "AWS::CloudWatch::Alarm").values()
    }


def test_alarms_watch_search_the_authorizer_and_the_queue(synth: Synth) -> None:
    found = alarms(synth.resources)
    config = synth.stack.config

    def metric(name: str) -> tuple[str, str, float, str, int]:
        a = found[name]
        return (
            a["MetricName"],
            a["Statistic"],
            a["Threshold"],
            a["ComparisonOperator"],
            a["EvaluationPeriods"],
        )

    at_least = "GreaterThanOrEqualToThreshold"
    assert metric("search-cluster-red") == ("ClusterStatus.red", "Maximum", 1, at_least, 1)
    assert metric("search-cluster-yellow") == ("ClusterStatus.yellow", "Maximum", 1, at_least, 5)
    assert metric("search-jvm-pressure") == ("JVMMemoryPressure", "Maximum", 95, at_least, 3)
    assert metric("search-writes-blocked") == ("ClusterIndexWritesBlocked", "Maximum", 1, at_least, 1)
    free = metric("search-free-storage")
    assert free == (
        "FreeStorageSpace",
        "Minimum",
        0.25 * config.search.volume_gb * 1024,
        "LessThanOrEqualToThreshold",
        1,
    )
    assert metric("ingest-queue-oldest-message-age")[:3] == ("ApproximateAgeOfOldestMessage", "Maximum", 900)
    authorizer = found["authorizer-errors"]
    assert authorizer["MetricName"] == "Errors" and authorizer["Threshold"] == 0
    (dimension,) = authorizer["Dimensions"]
    (function,) = [r for r in refs(dimension["Value"]) if r in synth.resources]
    name = synth.resources[function]["Properties"]["FunctionName"]
    assert name == f"citegate-{config.stage}-{routes.AUTHORIZER_FUNCTION.replace('_', '-')}"
    # prod notifies its topic (named: the ARN is built in the deploy's own account and region).
    topic = "arn:<AWS::Partition>:sns:<AWS::Region>:<AWS::AccountId>:citegate-oncall"
    for name, alarm in found.items():
        actions = [text(a) for a in alarm.get("AlarmActions", [])]
        assert actions == ([topic] if config.production else []), name


def test_ingestion_cannot_starve_the_api(synth: Synth) -> None:
    res = synth.resources
    config = synth.stack.config
    reserved = {
        str(v["Properties"]["FunctionName"]).removeprefix(f"citegate-{config.stage}-").replace("-", "_"): v[
            "Properties"
        ]["ReservedConcurrentExecutions"]
        for v in of_type(res, "AWS::Lambda::Function").values()
        if "ReservedConcurrentExecutions" in v["Properties"]
        and isinstance(v["Properties"].get("FunctionName"), str)
    }
    # (and each streaming twin: function URLs have no API Gateway throttling)
    twins = dict.fromkeys(map(stream_name, streaming_functions()), STREAM_RESERVED_CONCURRENCY)
    expected = {**dict.fromkeys(RESERVED_STEPS, 10), **twins} if config.production else {}
    assert reserved == expected
    (mapping,) = of_type(res, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": CONSUMER_MAX_CONCURRENCY}
    # A throttled step waits (capped, jittered backoff), and only then may fail.
    asl = json.loads(resources.ASL_PATH.read_text())
    for name, state in asl["States"].items():
        if state["Type"] != "Task":
            continue
        errors = [retrier["ErrorEquals"] for retrier in state["Retry"]]
        throttle = errors.index(["Lambda.TooManyRequestsException"])
        assert throttle < errors.index(["States.ALL"]), name
        retrier = state["Retry"][throttle]
        assert retrier["MaxDelaySeconds"] == 60 and retrier["JitterStrategy"] == "FULL", name
        assert retrier["MaxAttempts"] * retrier["MaxDelaySeconds"] / 2 >= 3600, name  # ~1 h of waiting
    # The throttles of a reserved step are expected in a burst: no alarm for them.
    names = set(alarms(res))
    for step in resources.INGESTION_STEP_FUNCTIONS.values():
        throttles = step.replace("_", "-") + "-throttles"
        assert (throttles in names) == (step not in expected), step


# ----------------------------------------------------------------------------- removal


def test_non_prod_stages_empty_and_delete_prod_retains(synth: Synth) -> None:
    res = synth.resources
    production = synth.stack.config.production
    buckets = of_type(res, "AWS::S3::Bucket")
    emptied = {
        next(r for r in refs(v["Properties"]["BucketName"]) if r in buckets)
        for v in of_type(res, "Custom::S3AutoDeleteObjects").values()
    }
    assert emptied == (set() if production else set(buckets))
    for logical, resource in {**buckets, **of_type(res, "AWS::Logs::LogGroup")}.items():
        assert resource.get("DeletionPolicy") == ("Retain" if production else "Delete"), logical
    for logical, group in of_type(res, "AWS::Logs::LogGroup").items():
        assert group["Properties"].get("RetentionInDays") == synth.stack.config.log_retention_days, logical


# ----------------------------------------------------------------------------- unmatched routes


def test_unmatched_routes_reach_the_json_404_function_without_credentials(synth: Synth) -> None:
    res = synth.resources
    defaults = [
        v["Properties"]
        for v in of_type(res, "AWS::ApiGatewayV2::Route").values()
        if v["Properties"]["RouteKey"] == "$default"
    ]
    assert len(defaults) == 2  # both doors
    apis = {v["Properties"]["ApiId"]["Ref"] for v in of_type(res, "AWS::ApiGatewayV2::Route").values()}
    assert {route["ApiId"]["Ref"] for route in defaults} == apis
    for route in defaults:
        assert route["AuthorizationType"] == "NONE"
        (integration,) = [r for r in refs(route["Target"]) if r in res]
        uri = res[integration]["Properties"]["IntegrationUri"]
        function = function_of(res, uri)
        assert str(res[function]["Properties"]["FunctionName"]).endswith("-unmatched-route")
        assert alias_of(res, uri)["Name"] == "live"  # a published version, never $LATEST
        # It reads and writes nothing: its own logs and traces only.
        role = res[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        actions = {
            action
            for policy in of_type(res, "AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            for action in (
                [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            )
        }
        assert actions and {a.split(":")[0] for a in actions} <= {"logs", "xray"}, actions


# ----------------------------------------------------------------------------- SnapStart


def test_every_function_runs_python312_behind_a_published_version_and_prod_snapshots_the_waited_on(
    synth: Synth,
) -> None:
    """python3.12 everywhere (the layers are built for it: bundling.PYTHON_VERSION); each function's
    callers reach a `live` alias of a published version; in prod, the functions a caller waits on
    (every route's and the authorizer) restore from a SnapStart snapshot, and no other does: not
    the asynchronous ingestion steps, the once-per-deploy custom resources or the streaming twins
    (their adapter layer predates its SnapStart hooks). Other stages pay for no snapshot cache."""
    from infra import bundling
    from infra.constructs.endpoint_function import RUNTIME
    from infra.constructs.streaming import stream_name, streaming_functions

    from citegate.api import routes
    from citegate.platform import resources

    res = synth.resources
    stage = synth.stack.config.stage
    assert RUNTIME.name == f"python{bundling.PYTHON_VERSION}"
    ours = {
        str(v["Properties"]["FunctionName"]): (k, v["Properties"])
        for k, v in of_type(res, "AWS::Lambda::Function").items()
        if str(v["Properties"].get("FunctionName", "")).startswith(f"{resources.APP}-{stage}-")
    }
    aliased = {
        function_of(res, a["Properties"]["FunctionName"])
        for a in of_type(res, "AWS::Lambda::Alias").values()
        if a["Properties"]["Name"] == resources.SERVING_ALIAS
    }
    waited_on = {resources.function_name(stage, r.function) for r in routes.ROUTES}
    waited_on.add(resources.function_name(stage, routes.AUTHORIZER_FUNCTION))
    twins = {resources.function_name(stage, stream_name(f)) for f in streaming_functions()}
    snapshotted = set()
    for name, (logical, props) in ours.items():
        assert props["Runtime"] == "python3.12", name
        assert logical in aliased, f"{name} has no live alias"
        if props.get("SnapStart") == {"ApplyOn": "PublishedVersions"}:
            snapshotted.add(name)
    if stage == "prod":
        assert snapshotted == waited_on and not snapshotted & twins
        assert resources.function_name(stage, "ingest_embed") not in snapshotted
    else:
        assert not snapshotted
