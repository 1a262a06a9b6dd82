"""The streaming twins (function URLs, infra/constructs/streaming.py) are protected and watched like
the API functions, in the dev and the prod synth: no API Gateway throttles them, so prod caps each
with reserved concurrency; each has alarms for its URL's 5xx, its errors, its throttles (callers
got 429) and runs near the 15-minute cut; the dashboard shows them; and a twin that the monitoring
missed fails the synth."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from infra.constructs.ingestion import RESERVED_STEPS
from infra.constructs.monitoring import STREAM_DURATION_SHARE, EveryStreamWatched, streaming_entries
from infra.constructs.streaming import (
    STREAM_RESERVED_CONCURRENCY,
    STREAM_TIMEOUT_S,
    stream_name,
    streaming_functions,
)
from tests.infrastructure.synth import Resources, Synth, fill, join_with_slots, synthesize, text

from citegate.platform import resources

PROD_SETTINGS = {
    "citegate:page_origins": "https://docs.example.com",
    "citegate:oidc_issuer": "https://login.example.com/",
    "citegate:oidc_audience": "citegate",
    "citegate:alarm_topic": "citegate-oncall",
}
TOPIC = "arn:<AWS::Partition>:sns:<AWS::Region>:<AWS::AccountId>:citegate-oncall"
# Lambda keeps this many executions unreserved in every account and region.
UNRESERVED_MINIMUM = 100
# The quota docs/deploy.md asks prod to have.
DOCUMENTED_PROD_QUOTA = 195


@pytest.fixture(scope="module", params=["dev", "prod"])
def synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    yield synthesize({"stage": request.param, **(PROD_SETTINGS if request.param == "prod" else {})})


def _functions(synth: Synth) -> dict[str, tuple[str, dict[str, Any]]]:
    """Function name without `citegate-<stage>-` (underscores) -> (logical id, properties)."""
    prefix = f"citegate-{synth.stack.config.stage}-"
    return {
        str(v["Properties"]["FunctionName"]).removeprefix(prefix).replace("-", "_"): (k, v["Properties"])
        for k, v in synth.resources.items()
        if v["Type"] == "AWS::Lambda::Function" and isinstance(v["Properties"].get("FunctionName"), str)
    }


def _alarms(res: Resources) -> dict[str, dict[str, Any]]:
    return {
        str(v["Properties"]["AlarmName"]).split("-", 2)[-1]: v["Properties"]
        for v in res.values()
        if v["Type"] == "AWS::CloudWatch::Alarm"
    }


def test_prod_caps_each_twin_and_the_account_keeps_its_unreserved_minimum(synth: Synth) -> None:
    functions = _functions(synth)
    production = synth.stack.config.production
    for route_function in streaming_functions():
        _, twin = functions[stream_name(route_function)]
        _, original = functions[route_function]
        expected = STREAM_RESERVED_CONCURRENCY if production else None
        assert twin.get("ReservedConcurrentExecutions") == expected, route_function
        # The HTTP API's function stays behind API Gateway's throttling, unreserved.
        assert "ReservedConcurrentExecutions" not in original, route_function
    reserved = sum(int(p.get("ReservedConcurrentExecutions", 0)) for _, p in functions.values())
    if production:
        twins = STREAM_RESERVED_CONCURRENCY * len(streaming_functions())
        assert reserved == twins + synth.stack.config.ingest_reserved_concurrency * len(RESERVED_STEPS)
        assert reserved + UNRESERVED_MINIMUM <= DOCUMENTED_PROD_QUOTA
    else:
        assert reserved == 0  # a first deploy works on an account with a small quota


def test_each_twin_is_watched_like_a_front_door(synth: Synth) -> None:
    functions = _functions(synth)
    found = _alarms(synth.resources)
    production = synth.stack.config.production
    for route_function in streaming_functions():
        logical, _ = functions[stream_name(route_function)]
        prefix = f"{route_function.replace('_', '-')}-stream"
        expected = {
            "5xx": ("Url5xxCount", "Sum", 0, "GreaterThanThreshold"),
            "errors": ("Errors", "Sum", 0, "GreaterThanThreshold"),
            "throttles": ("Throttles", "Sum", 0, "GreaterThanThreshold"),
            "duration": (
                "Duration",
                "Maximum",
                STREAM_DURATION_SHARE * STREAM_TIMEOUT_S * 1000,
                "GreaterThanOrEqualToThreshold",
            ),
        }
        for kind, (metric, statistic, threshold, comparison) in expected.items():
            alarm = found[f"{prefix}-{kind}"]
            assert alarm["Namespace"] == "AWS/Lambda"
            got = (alarm["MetricName"], alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"])
            assert got == (metric, statistic, threshold, comparison), (prefix, kind)
            # FunctionName: the twin as a whole, both of its URLs (public and the agents' alias).
            (dimension,) = alarm["Dimensions"]
            assert dimension["Name"] == "FunctionName"
            assert text(dimension["Value"]) == f"<{logical}>", (prefix, kind)
            assert [text(a) for a in alarm.get("AlarmActions", [])] == ([TOPIC] if production else [])
        throttles = found[f"{prefix}-throttles"]["AlarmDescription"]
        assert (f"its {STREAM_RESERVED_CONCURRENCY} reserved executions" in throttles) == production
    # The duration alarm fires before Lambda cuts a stream, not after.
    assert STREAM_DURATION_SHARE * STREAM_TIMEOUT_S < STREAM_TIMEOUT_S


def test_the_dashboard_shows_the_twins(synth: Synth) -> None:
    functions = _functions(synth)
    (dashboard,) = [v for v in synth.resources.values() if v["Type"] == "AWS::CloudWatch::Dashboard"]
    body, slots = join_with_slots(dashboard["Properties"]["DashboardBody"])
    widgets = {
        w["properties"].get("title"): w["properties"] for w in fill(json.loads(body), slots)["widgets"]
    }
    shown: dict[str, set[str]] = {}  # metric -> the functions it is shown for
    for title in (
        "Streaming URLs: requests and 5xx",
        "Streaming: concurrent streams, errors and throttles",
        "Streaming: duration p95 and max",
    ):
        for namespace, metric, dimension, value, *_ in widgets[title]["metrics"]:
            assert (namespace, dimension) == ("AWS/Lambda", "FunctionName"), title
            shown.setdefault(metric, set()).add(text(value))
    twins = {f"<{functions[stream_name(f)][0]}>" for f in streaming_functions()}
    for metric in (
        "UrlRequestCount",
        "Url5xxCount",
        "ConcurrentExecutions",
        "Errors",
        "Throttles",
        "Duration",
    ):
        assert shown[metric] == twins, metric
    # The alarms' status widget lists the twins' alarms too.
    listed = {text(arn) for arn in widgets["Alarms"]["alarms"]}
    assert sum("streamthrottles" in name.lower() for name in listed) == len(twins)


def test_a_twin_the_monitoring_missed_fails_the_synth(synth: Synth) -> None:
    entries = streaming_entries(synth.stack)
    assert {entry.route_function for entry in entries} == set(streaming_functions())
    assert set(synth.stack.monitoring.streaming) == set(streaming_functions())
    assert EveryStreamWatched(synth.stack, entries).validate() == []
    missed = EveryStreamWatched(synth.stack, entries[1:]).validate()
    assert len(missed) == 1 and entries[0].node.path in missed[0] and "before Monitoring" in missed[0]


def test_the_stage_names_the_twins() -> None:
    # What the alarms' names and the dashboard's labels are built from.
    assert resources.function_name("prod", stream_name("query_v2")) == "citegate-prod-query-v2-stream"
