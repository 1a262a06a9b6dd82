"""Sources in AWS (issue 29), synthesized with source buckets named in the context: the sync
function is a task of the ingestion state machine; the sync and S3 events functions, and no other,
may read exactly the named buckets and prefixes; one EventBridge rule per bucket sends its
object events to the events function; the failed-syncs alarm exists; every stack stays in budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.constructs.endpoint_function import RESOURCE_BUDGET
from infra.constructs.sources import SourceBucket, source_buckets
from tests.infrastructure.synth import Synth, synthesize

from citegate.platform import resources

STAGE = "test"
BUCKETS = "docs-bucket/manual/,docs-bucket/guides/,whole-bucket"
Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize({"stage": STAGE, "citegate:source_buckets": BUCKETS})


@pytest.fixture(scope="module")
def res(synth: Synth) -> Resources:
    return synth.resources


def _functions(res: Resources) -> dict[str, str]:
    """Function (folder) name -> logical id."""
    out = {}
    for logical, r in res.items():
        if r["Type"] == "AWS::Lambda::Function":
            name = r["Properties"].get("FunctionName")
            if isinstance(name, str) and name.startswith(f"{resources.APP}-{STAGE}-"):
                out[name.removeprefix(f"{resources.APP}-{STAGE}-").replace("-", "_")] = logical
    return out


def _statements(res: Resources, function: str) -> list[dict[str, Any]]:
    role = res[_functions(res)[function]]["Properties"]["Role"]
    role_logical = role["Fn::GetAtt"][0] if isinstance(role, dict) and "Fn::GetAtt" in role else str(role)
    found = []
    for r in res.values():
        if r["Type"] != "AWS::IAM::Policy":
            continue
        roles = json.dumps(r["Properties"].get("Roles", []))
        if role_logical in roles:
            found.extend(r["Properties"]["PolicyDocument"]["Statement"])
    return found


def _s3_grants(res: Resources, function: str) -> dict[str, Any]:
    """s3 action -> [(resources, conditions)] on buckets other than the documents bucket."""
    grants: dict[str, Any] = {}
    for st in _statements(res, function):
        actions = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
        targets = [st["Resource"]] if not isinstance(st["Resource"], list) else st["Resource"]
        text = json.dumps(targets)
        if "docs-bucket" not in text and "whole-bucket" not in text:
            continue
        for action in actions:
            grants.setdefault(action, []).append((json.dumps(targets), st.get("Condition")))
    return grants


def test_source_buckets_parse_and_refuse_what_is_not_a_bucket() -> None:
    assert source_buckets(["s3://docs/a/", "docs/a/", "other"]) == (
        SourceBucket("docs", "a/"),
        SourceBucket("other", ""),
    )
    for bad in ("Docs_Bucket", "a", "docs/*", "docs/a?"):
        with pytest.raises(ValueError, match="source_buckets"):
            source_buckets([bad])


def test_only_the_sync_and_events_functions_read_the_source_buckets(res: Resources) -> None:
    readers = {name for name in _functions(res) if _s3_grants(res, name)}
    assert readers == {"source_sync_worker", "source_events"}
    for name in readers:
        grants = _s3_grants(res, name)
        assert set(grants) == {"s3:GetObject", "s3:ListBucket"}, grants
        gets = " ".join(targets for targets, _ in grants["s3:GetObject"])
        for key in ("docs-bucket/guides/*", "docs-bucket/manual/*", "whole-bucket/*"):
            assert key in gets, gets
        assert "docs-bucket/*" not in gets
        lists = {targets: condition for targets, condition in grants["s3:ListBucket"]}
        docs = next(c for t, c in lists.items() if ':s3:::docs-bucket"' in t)
        assert docs == {"StringLike": {"s3:prefix": ["guides/*", "manual/*"]}}
        whole = next(c for t, c in lists.items() if ':s3:::whole-bucket"' in t)
        assert whole is None  # the whole bucket was named
    # The API's sync only queues the run: it reads no source and no bucket.
    api_sync = json.dumps(_statements(res, "source_sync"))
    assert "s3:" not in api_sync and "es:" not in api_sync


def test_one_rule_per_bucket_sends_object_events_to_the_events_function(res: Resources) -> None:
    rules = [r["Properties"] for r in res.values() if r["Type"] == "AWS::Events::Rule"]
    patterns = {tuple(r["EventPattern"]["detail"]["bucket"]["name"]): r for r in rules}
    assert set(patterns) == {("docs-bucket",), ("whole-bucket",)}
    docs = patterns[("docs-bucket",)]["EventPattern"]
    assert docs["source"] == ["aws.s3"] and docs["detail-type"] == ["Object Created", "Object Deleted"]
    assert docs["detail"]["object"]["key"] == [{"prefix": "guides/"}, {"prefix": "manual/"}]
    assert "object" not in patterns[("whole-bucket",)]["EventPattern"]["detail"]
    assert "source_events" in _functions(res)
    events_fn = "SourceEventsLive"  # the function's live alias, as every caller invokes it
    for rule in patterns.values():
        (target,) = rule["Targets"]
        assert events_fn in json.dumps(target["Arn"]) and target["RetryPolicy"]["MaximumRetryAttempts"] == 8
    permissions = [
        r["Properties"]
        for r in res.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"].get("Principal") == "events.amazonaws.com"
    ]
    assert len(permissions) == 2 and all(events_fn in json.dumps(p["FunctionName"]) for p in permissions)


def test_the_sync_function_is_a_task_of_the_state_machine_and_failed_syncs_alarm(res: Resources) -> None:
    (machine,) = [r for r in res.values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert "SyncFunctionArn" in json.dumps(machine["Properties"]["DefinitionSubstitutions"])
    worker = res[_functions(res)["source_sync_worker"]]["Properties"]
    assert worker["Timeout"] == 900
    alarms = json.dumps([r for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"])
    assert "source-syncs-failed" in alarms and "SourceSyncsFailed" in alarms


def test_every_stack_stays_within_the_budget_with_source_buckets(synth: Synth) -> None:
    counts = {"top": len(synth.parent["Resources"])}
    counts.update({synth.names[k]: len(t["Resources"]) for k, t in synth.nested.items()})
    assert max(counts.values()) <= RESOURCE_BUDGET, counts
