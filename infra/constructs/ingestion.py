"""Ingestion: the six step functions, the state machine (from the shared ASL file) and the consumer.

The state machine is `citegate/knowledge/ingest/ingestion.asl.json`, the very file the local stack runs in
moto: its `${...FunctionArn}` placeholders are filled by Step Functions' definition substitutions
with the ARNs of the functions `resources.INGESTION_STEP_FUNCTIONS` names. The consumer packs an
SQS batch's documents into executions (named after their tasks; citegate.knowledge.ingest.consumer.pack)
and reports partial batch failures.

Ingestion must not starve the API of the account's Lambda concurrency (1,000 by default, shared by
every function in the region):
- The queue's event source runs at most CONSUMER_MAX_CONCURRENCY (2, SQS's minimum) consumers.
  A consumer only starts executions (well under a second for a batch of 100 messages), so two
  start them far faster than they finish; more would only start more executions at once.
- The consumer does not wait for its executions, so the steps are capped themselves, with
  reserved concurrency (`ingest_reserved_concurrency`, 10 in prod, none elsewhere) on the two that
  take a burst: ingest_parse (the first step, 1,769 MB), which paces everything after it, and
  ingest_embed (3,008 MB, up to 15 minutes), the heaviest. Chunk runs at parse's pace and index
  and finalize at embed's (each faster than the step it follows), so a burst holds about 10 + 10
  reserved plus about as many chunk/index/finalize calls and the 2 consumers: some 40 of the
  1,000, and the rest stay for the API. Ten embeds of up to 50 documents (2 MB of text) each get
  through about 500 documents a round (~35 s a round with the default embedder).
- A throttled step is not a failed one: the shared ASL retries `Lambda.TooManyRequestsException`
  with capped, jittered backoff for up to about an hour (the execution allows two), so a burst
  queues instead of marking its documents failed.
Reserving needs the account's quota to leave 100 unreserved: 10 + 10 reserved need a quota of at
least 120 (`aws lambda get-account-settings`; new accounts may start at 10). Stages other than
prod reserve nothing by default so their first deploy works on such an account.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as events
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from citegate.api import routes
from citegate.knowledge.ingest import consumer
from citegate.platform import resources
from constructs import Construct
from infra.constructs import acknowledge_wildcards
from infra.constructs.endpoint_function import EndpointFunction

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
CONSUMER_BATCH_SIZE = consumer.BATCH_SIZE
# SQS event sources accept 2-1000; 2 is enough for a consumer that only starts executions.
CONSUMER_MAX_CONCURRENCY = 2
# The steps that take an ingestion burst (module docstring).
RESERVED_STEPS = ("ingest_parse", "ingest_embed")
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
        reserved_concurrency: int = 0,
    ) -> None:
        super().__init__(scope, construct_id)
        definition = asl_definition()
        self.steps: dict[str, EndpointFunction] = {
            placeholder: make_function(self, name)
            for placeholder, name in resources.INGESTION_STEP_FUNCTIONS.items()
        }
        # function name -> its reserved concurrency (monitoring expects their throttles).
        self.reserved: dict[str, int] = {}
        if reserved_concurrency:
            for fn in self.steps.values():
                if fn.name in RESERVED_STEPS:
                    cfn: lambda_.CfnFunction = fn.function.node.default_child  # type: ignore[assignment]
                    cfn.reserved_concurrent_executions = reserved_concurrency
                    self.reserved[fn.name] = reserved_concurrency
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
                placeholder: fn.live.function_arn for placeholder, fn in self.steps.items()
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
            fn.live.grant_invoke(self.state_machine.role)
        acknowledge_wildcards(
            self.state_machine,
            "X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery and friends) support "
            "no resource-level permissions, so IAM requires Resource '*'.",
            ["*"],
        )

        self.consumer = make_function(self, routes.INGEST_CONSUMER_FUNCTION, state_machine=self.state_machine)
        self.consumer.live.add_event_source(
            events.SqsEventSource(
                queue,
                batch_size=CONSUMER_BATCH_SIZE,
                max_batching_window=Duration.seconds(consumer.BATCHING_WINDOW_SECONDS),
                report_batch_item_failures=True,
                max_concurrency=CONSUMER_MAX_CONCURRENCY,
            )
        )
