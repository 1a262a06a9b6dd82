"""Ingestion: the six step functions, the state machine (from the shared ASL file) and the consumer.

The state machine is `citegate/ingest/ingestion.asl.json`, the very file the local stack runs in
moto: its `${...FunctionArn}` placeholders are filled by Step Functions' definition substitutions
with the ARNs of the functions `resources.INGESTION_STEP_FUNCTIONS` names. The consumer packs an
SQS batch's documents into executions (named after their tasks; citegate.ingest.consumer.pack)
and reports partial batch failures.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda_event_sources as events
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from citegate import resources, routes
from citegate.ingest import consumer
from constructs import Construct
from infra.constructs import acknowledge_wildcards
from infra.constructs.endpoint_function import EndpointFunction

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
CONSUMER_BATCH_SIZE = consumer.BATCH_SIZE
# An ingestion of one batch: parse, chunk, embed (up to 15 min), index, finalize, with retries.
EXECUTION_TIMEOUT = Duration.hours(2)

MakeFunction = Callable[..., EndpointFunction]


def asl_definition() -> str:
    """The shared ASL text; refuses a placeholder that resources.py does not map (or vice versa)."""
    text = resources.ASL_PATH.read_text()
    found = set(PLACEHOLDER.findall(text))
    expected = set(resources.INGESTION_STEP_FUNCTIONS)
    if found != expected:
        raise ValueError(
            f"{resources.ASL_PATH.name} placeholders {sorted(found)} differ from "
            f"resources.INGESTION_STEP_FUNCTIONS {sorted(expected)}"
        )
    return text


class Ingestion(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        make_function: MakeFunction,
        queue: sqs.IQueue,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        definition = asl_definition()
        self.steps: dict[str, EndpointFunction] = {
            placeholder: make_function(self, name)
            for placeholder, name in resources.INGESTION_STEP_FUNCTIONS.items()
        }
        name = resources.state_machine_name(stage)
        self.log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=log_retention,
            removal_policy=removal_policy,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(definition),
            definition_substitutions={
                placeholder: fn.function.function_arn for placeholder, fn in self.steps.items()
            },
            tracing_enabled=True,
            # Steps pass small batches' text inline, so execution data stays out of the logs.
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
            timeout=EXECUTION_TIMEOUT,
            removal_policy=removal_policy,
        )
        # The definition comes from a file, so CDK cannot see the Lambda tasks: grant exactly these.
        for fn in self.steps.values():
            fn.function.grant_invoke(self.state_machine.role)
        acknowledge_wildcards(
            self.state_machine,
            "The state machine may invoke the versions and aliases (<function arn>:*) of exactly its "
            "six step functions, as CDK's grantInvoke writes it.",
            [f"{fn.function.function_arn}:*" for fn in self.steps.values()],
        )
        acknowledge_wildcards(
            self.state_machine,
            "X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery and friends) support "
            "no resource-level permissions, so IAM requires Resource '*'.",
            ["*"],
        )

        self.consumer = make_function(self, routes.INGEST_CONSUMER_FUNCTION, state_machine=self.state_machine)
        self.consumer.function.add_event_source(
            events.SqsEventSource(
                queue,
                batch_size=CONSUMER_BATCH_SIZE,
                max_batching_window=Duration.seconds(consumer.BATCHING_WINDOW_SECONDS),
                report_batch_item_failures=True,
            )
        )
