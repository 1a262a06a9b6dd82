"""Alarms and a dashboard for what needs a person: stuck ingestion, failing APIs, failing steps.

Alarms: ingestion DLQ depth > 0, each API's 5xx, errors and throttles of the consumer and of every
ingestion step, failed state machine executions. With `-c citegate:alarm_topic_arn=...` they
notify that SNS topic; without, they show in the console and on the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from citegate import resources
from constructs import Construct
from infra.constructs.endpoint_function import EndpointFunction

PERIOD = Duration.minutes(5)


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
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = f"{resources.APP}-{stage}"
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn) if alarm_topic_arn else None

        def alarm(key: str, metric: cloudwatch.IMetric, description: str, threshold: float = 0) -> None:
            created = cloudwatch.Alarm(
                self,
                f"{key}Alarm",
                alarm_name=f"{prefix}-{key}",
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
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
        for door, api in apis.items():
            alarm(
                f"{door}-api-5xx",
                api.metric_server_error(period=PERIOD, statistic="Sum"),
                f"The {door} API answered 5xx (a function failed or timed out).",
            )
        for name, fn in ingestion_functions.items():
            short = name.replace("_", "-")
            alarm(
                f"{short}-errors",
                fn.function.metric_errors(period=PERIOD, statistic="Sum"),
                f"{name} raised errors (each is retried; repeated errors fail the task).",
            )
            alarm(
                f"{short}-throttles",
                fn.function.metric_throttles(period=PERIOD, statistic="Sum"),
                f"{name} was throttled (account or reserved concurrency).",
            )
        alarm(
            "ingestion-failed-executions",
            state_machine.metric_failed(period=PERIOD, statistic="Sum"),
            "Ingestion executions failed: the task records the reason (GET /v1/tasks/{task_id}).",
        )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=prefix)
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
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )
