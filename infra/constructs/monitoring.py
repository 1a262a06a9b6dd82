"""Alarms and a dashboard for what needs a person: stuck ingestion, failing APIs, failing steps,
an unhealthy search domain.

Alarms:
- ingestion: DLQ depth > 0; the oldest queued message older than 15 minutes (the consumer only
  starts executions, so a healthy queue drains in seconds; 15 minutes means the consumer is not
  running, or fails message after message); failed executions; errors of the consumer and of
  every step; throttles of every step without reserved concurrency (those with it are throttled
  on purpose in a burst and retried: ingestion.py).
- APIs: each API's 5xx; errors of the Lambda authorizer (every public request runs it, and its
  failure is a 500 for the caller whatever the route).
- Streaming entries (the function-URL twins of the streaming routes: streaming.py), which no API
  stands in front of, so their own metrics are all there is: their URLs' 5xx (a function error or
  timeout before the first frame), their errors (a stream that failed, also after its first
  frame), their throttles (callers got 429: the twin's reserved concurrency, or the account's, ran
  out) and their longest run reaching 90% of the 15-minute timeout (a stream about to be cut off).
- OpenSearch, with AWS's recommended thresholds: cluster red (1 minute), yellow (5 minutes in a
  row: replicas fit the node count, search.replicas_for, so yellow is a fault), free storage at or
  below 25% of a node's volume, JVM memory pressure at or above 95% for 3 minutes, writes blocked.
With `citegate:alarm_topic` (required for prod) they notify that SNS topic; without, they show in
the console and on the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping

import jsii
from aws_cdk import Arn, ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from citegate.platform import resources
from constructs import Construct, IValidation
from infra.constructs.endpoint_function import EndpointFunction
from infra.constructs.search import Search
from infra.constructs.streaming import STREAM_TIMEOUT_S, StreamingEntry

PERIOD = Duration.minutes(5)
MINUTE = Duration.minutes(1)
# Oldest queued ingestion message, in seconds (module docstring).
QUEUE_AGE_LIMIT_S = 15 * 60
# OpenSearch: AWS's recommended alarms (docs: "Recommended CloudWatch alarms").
FREE_STORAGE_SHARE = 0.25
JVM_PRESSURE_PERCENT = 95
# A streaming entry's longest run, as a share of its timeout, that means streams are near the cut.
STREAM_DURATION_SHARE = 0.9


def streaming_entries(scope: Construct) -> list[StreamingEntry]:
    """Every streaming entry of the app (they live in the endpoints' nested stacks)."""
    return [node for node in scope.node.root.node.find_all() if isinstance(node, StreamingEntry)]


@jsii.implements(IValidation)
class EveryStreamWatched:
    """Fails the synth when a streaming entry was added after the monitoring (and so has no alarms)."""

    def __init__(self, scope: Construct, watched: list[StreamingEntry]) -> None:
        self.scope = scope
        self.watched = {entry.node.path for entry in watched}

    def validate(self) -> list[str]:
        return [
            f"the streaming entry {entry.node.path} has no alarms: create it before Monitoring"
            for entry in streaming_entries(self.scope)
            if entry.node.path not in self.watched
        ]


def topic_arn(scope: Construct, topic: str) -> str:
    """A topic name in the deploy's own account and region (no literal in the template), or an ARN."""
    if topic.startswith("arn:"):
        return topic
    return Arn.format(
        {"service": "sns", "resource": topic, "arn_format": ArnFormat.NO_RESOURCE_NAME}, Stack.of(scope)
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        dead_letter_queue: sqs.IQueue,
        ingest_queue: sqs.IQueue,
        apis: Mapping[str, apigwv2.HttpApi],
        ingestion_functions: Mapping[str, EndpointFunction],
        state_machine: sfn.StateMachine,
        search: Search,
        authorizer: EndpointFunction,
        reserved_ingestion: Mapping[str, int] | None = None,
        alarm_topic: str | None = None,
        streaming: Mapping[str, StreamingEntry] | None = None,
    ) -> None:
        """`streaming`: the streaming entries by route function; by default every one in the app
        (made before this construct: a later one fails the synth)."""
        super().__init__(scope, construct_id)
        prefix = f"{resources.APP}-{stage}"
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.topic = (
            sns.Topic.from_topic_arn(self, "AlarmTopic", topic_arn(self, alarm_topic))
            if alarm_topic
            else None
        )
        topic = self.topic
        reserved = reserved_ingestion or {}

        def alarm(
            key: str,
            metric: cloudwatch.IMetric,
            description: str,
            threshold: float = 0,
            *,
            comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            periods: int = 1,
        ) -> None:
            created = cloudwatch.Alarm(
                self,
                f"{key}Alarm",
                alarm_name=f"{prefix}-{key}",
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=comparison,
                evaluation_periods=periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            if topic is not None:
                created.add_alarm_action(actions.SnsAction(topic))
            self.alarms[key] = created

        dlq_depth = dead_letter_queue.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(1), statistic="Maximum"
        )
        alarm(
            "ingest-dlq-depth",
            dlq_depth,
            "Ingestion messages failed 5 times and wait in the dead-letter queue: inspect, then redrive.",
        )
        alarm(
            "ingest-queue-oldest-message-age",
            ingest_queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
            "An ingestion message has waited more than 15 minutes: the consumer is not running "
            "(event source disabled, throttled, no permission) or fails every delivery.",
            threshold=QUEUE_AGE_LIMIT_S,
        )
        for door, api in apis.items():
            alarm(
                f"{door}-api-5xx",
                api.metric_server_error(period=PERIOD, statistic="Sum"),
                f"The {door} API answered 5xx (a function failed or timed out).",
            )
        alarm(
            "authorizer-errors",
            authorizer.function.metric_errors(period=PERIOD, statistic="Sum"),
            "The Lambda authorizer failed: every public request it failed on got a 500.",
        )
        if streaming is None:
            streaming = {entry.route_function: entry for entry in streaming_entries(self)}
        self.node.add_validation(EveryStreamWatched(self, list(streaming.values())))
        self.streaming = dict(streaming)
        for name, entry in self.streaming.items():
            twin = entry.function.function
            short = f"{name.replace('_', '-')}-stream"
            alarm(
                f"{short}-5xx",
                twin.metric("Url5xxCount", period=PERIOD, statistic="Sum"),
                f"The streaming URL of {name} answered 5xx: the function failed or timed out before "
                "its first frame.",
            )
            alarm(
                f"{short}-errors",
                twin.metric_errors(period=PERIOD, statistic="Sum"),
                f"The streaming entry of {name} raised errors: a stream failed (perhaps after its "
                "first frames, which a 5xx cannot show).",
            )
            capacity = (
                f"its {entry.reserved_concurrency} reserved executions"
                if entry.reserved_concurrency
                else "the account's concurrency"
            )
            alarm(
                f"{short}-throttles",
                twin.metric_throttles(period=PERIOD, statistic="Sum"),
                f"Streaming callers of {name} got 429: {capacity} ran out. If this is real demand, "
                "raise STREAM_RESERVED_CONCURRENCY (infra/constructs/streaming.py).",
            )
            alarm(
                f"{short}-duration",
                twin.metric_duration(period=PERIOD, statistic="Maximum"),
                f"A stream of {name} ran for 90% of the {STREAM_TIMEOUT_S // 60}-minute timeout: "
                "longer ones are cut off mid-answer.",
                threshold=STREAM_DURATION_SHARE * STREAM_TIMEOUT_S * 1000,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            )
        for name, fn in ingestion_functions.items():
            short = name.replace("_", "-")
            alarm(
                f"{short}-errors",
                fn.function.metric_errors(period=PERIOD, statistic="Sum"),
                f"{name} raised errors (each is retried; repeated errors fail the task).",
            )
            if name not in reserved:  # a reserved step is throttled on purpose in a burst
                alarm(
                    f"{short}-throttles",
                    fn.function.metric_throttles(period=PERIOD, statistic="Sum"),
                    f"{name} was throttled (the account's concurrency ran out).",
                )

        domain = search.domain
        at_least = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        alarm(
            "search-cluster-red",
            domain.metric_cluster_status_red(period=MINUTE, statistic="Maximum"),
            "OpenSearch is red: a primary shard is unassigned, so searches miss chunks and writes fail.",
            threshold=1,
            comparison=at_least,
        )
        alarm(
            "search-cluster-yellow",
            domain.metric_cluster_status_yellow(period=MINUTE, statistic="Maximum"),
            "OpenSearch is yellow for 5 minutes: a replica is unassigned (a node lost or full).",
            threshold=1,
            comparison=at_least,
            periods=5,
        )
        free_mib = FREE_STORAGE_SHARE * search.settings.volume_gb * 1024
        alarm(
            "search-free-storage",
            domain.metric_free_storage_space(period=MINUTE, statistic="Minimum"),
            f"An OpenSearch node has 25% of its {search.settings.volume_gb} GiB or less free: writes "
            "block at the flood-stage watermark. Grow opensearch_volume_gb or add nodes.",
            threshold=free_mib,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        alarm(
            "search-jvm-pressure",
            domain.metric_jvm_memory_pressure(period=MINUTE, statistic="Maximum"),
            "OpenSearch JVM memory pressure at 95% or more for 3 minutes: out-of-memory errors and "
            "blocked requests follow. Use a larger instance type.",
            threshold=JVM_PRESSURE_PERCENT,
            comparison=at_least,
            periods=3,
        )
        alarm(
            "search-writes-blocked",
            domain.metric_cluster_index_writes_blocked(period=PERIOD, statistic="Maximum"),
            "OpenSearch blocks writes (storage or memory): ingestion's index step fails.",
            threshold=1,
            comparison=at_least,
        )
        alarm(
            "source-syncs-failed",
            cloudwatch.Metric(
                namespace="citegate",
                metric_name="SourceSyncsFailed",
                dimensions_map={"service": "citegate"},
                period=PERIOD,
                statistic="Sum",
            ),
            "A source sync failed, requested over the API or by the schedule (the source could not "
            "be listed, or a backend did not answer; counted by the sync function), or the schedule "
            "could not queue one: its run says why (GET /v1/kb/{kb_id}/sources/{source_id}/runs).",
        )
        alarm(
            "ingestion-failed-executions",
            state_machine.metric_failed(period=PERIOD, statistic="Sum"),
            "Ingestion executions failed: the task records the reason (GET /v1/tasks/{task_id}).",
        )

        # Dashboard names are global to the account: the region keeps two regions' stages apart.
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{prefix}-{Aws.REGION}")
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests and 5xx",
                left=[
                    api.metric_count(period=PERIOD, label=f"{door} requests") for door, api in apis.items()
                ],
                right=[
                    api.metric_server_error(period=PERIOD, label=f"{door} 5xx") for door, api in apis.items()
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="API latency p95",
                left=[
                    api.metric_latency(period=PERIOD, statistic="p95", label=door)
                    for door, api in apis.items()
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Ingestion queue",
                left=[
                    ingest_queue.metric_approximate_number_of_messages_visible(period=PERIOD, label="queued"),
                    ingest_queue.metric_approximate_age_of_oldest_message(period=PERIOD, label="oldest (s)"),
                ],
                right=[dlq_depth.with_(label="dead letters")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Ingestion executions",
                left=[
                    state_machine.metric_started(period=PERIOD, label="started"),
                    state_machine.metric_succeeded(period=PERIOD, label="succeeded"),
                    state_machine.metric_failed(period=PERIOD, label="failed"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Ingestion step errors and duration p95",
                left=[
                    fn.function.metric_errors(period=PERIOD, label=name)
                    for name, fn in ingestion_functions.items()
                ],
                right=[
                    fn.function.metric_duration(period=PERIOD, statistic="p95", label=name)
                    for name, fn in ingestion_functions.items()
                ],
                width=8,
            ),
        )
        if self.streaming:
            twins = {name: entry.function.function for name, entry in self.streaming.items()}
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Streaming URLs: requests and 5xx",
                    left=[
                        fn.metric("UrlRequestCount", period=PERIOD, statistic="Sum", label=f"{name} requests")
                        for name, fn in twins.items()
                    ],
                    right=[
                        fn.metric("Url5xxCount", period=PERIOD, statistic="Sum", label=f"{name} 5xx")
                        for name, fn in twins.items()
                    ],
                    width=8,
                ),
                cloudwatch.GraphWidget(
                    title="Streaming: concurrent streams, errors and throttles",
                    left=[
                        fn.metric("ConcurrentExecutions", period=PERIOD, statistic="Maximum", label=name)
                        for name, fn in twins.items()
                    ],
                    right=[
                        *(
                            fn.metric_errors(period=PERIOD, label=f"{name} errors")
                            for name, fn in twins.items()
                        ),
                        *(
                            fn.metric_throttles(period=PERIOD, label=f"{name} 429")
                            for name, fn in twins.items()
                        ),
                    ],
                    width=8,
                ),
                cloudwatch.GraphWidget(
                    title="Streaming: duration p95 and max",
                    left=[
                        *(
                            fn.metric_duration(period=PERIOD, statistic="p95", label=f"{name} p95")
                            for name, fn in twins.items()
                        ),
                        *(
                            fn.metric_duration(period=PERIOD, statistic="Maximum", label=f"{name} max")
                            for name, fn in twins.items()
                        ),
                    ],
                    width=8,
                ),
            )
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )
