"""Sources in AWS: scheduled syncs, the buckets they may read, and S3 events.

Scheduled syncs: EventBridge Scheduler invokes the `source_scheduler` function every
SCHEDULE_MINUTES; the function queues a sync run of each source whose own schedule
(`schedule_minutes`, `next_sync_at`) is due on the existing ingestion queue, whose consumer
starts it as an execution of the ingestion state machine: its SyncSource task is the
`source_sync_worker` function (15 minutes), which queues new and changed documents on the same
queue (citegate.api.scheduled, citegate.knowledge.sources.sync). A sync requested over the API goes
the same way. One fixed-rate schedule rather than one per source: sources are created
at run time by the API, and a schedule per source would give every API function the power to
create schedules and pass roles (scheduler:CreateSchedule, iam:PassRole).

Least privilege: the scheduler's role may invoke only this function's live alias; the function's
own role has what its spec lists (infra/constructs/endpoint_function.py). Failed syncs are
counted (metric citegate/SourceSyncsFailed) and alarmed in Monitoring.

Source buckets: an `s3` source's bucket is the user's, not the stack's, so no role may read any
bucket by default. The CDK context `source_buckets` names each bucket (and prefix) sources may
follow, `bucket` or `bucket/prefix/`; the sync function and the S3 events function, and only
they, get s3:GetObject on `bucket/prefix*` and s3:ListBucket on the bucket for keys under the
prefix (the `s3:prefix` condition). A source outside them fails its sync (AccessDenied: "cannot
be listed") and deletes nothing.

S3 events: one EventBridge rule per named bucket (Object Created / Object Deleted under its
prefixes) targets the `source_events` function (citegate.knowledge.sources.events), which ingests
or deletes that one object's document at once. The bucket must send its events to EventBridge
(its owner turns that on: docs/sources.md); the schedule catches whatever an event missed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler

from citegate.platform import resources
from constructs import Construct
from infra.constructs import acknowledge_wildcards
from infra.constructs.endpoint_function import SOURCE_EVENTS, EndpointFunction

SCHEDULER_FUNCTION = "source_scheduler"
# The sync function's placeholder in the ingestion ASL (resources.INGESTION_STEP_FUNCTIONS).
SYNC_STEP = "SyncFunctionArn"
SCHEDULE_MINUTES = 5

MakeFunction = Callable[..., EndpointFunction]

BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# How long EventBridge keeps trying to hand an event to the function, and how often.
EVENT_MAX_AGE = Duration.hours(2)
EVENT_RETRIES = 8


@dataclass(frozen=True)
class SourceBucket:
    """A bucket (and key prefix) that `s3` sources may follow: the CDK context `source_buckets`."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> SourceBucket:
        bucket, _, prefix = text.strip().removeprefix("s3://").partition("/")
        if not BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
            raise ValueError(f"citegate:source_buckets: {bucket!r} is not a bucket name (in {text!r})")
        if any(c in prefix for c in "*?"):
            raise ValueError(f"citegate:source_buckets: a prefix is literal, no wildcards (in {text!r})")
        return cls(bucket, prefix)


def source_buckets(values: Iterable[str]) -> tuple[SourceBucket, ...]:
    return tuple(dict.fromkeys(SourceBucket.parse(v) for v in values))


def _by_bucket(buckets: Sequence[SourceBucket]) -> dict[str, list[str]]:
    """Bucket -> its prefixes; a whole bucket ("") makes any prefix of it redundant."""
    grouped: dict[str, list[str]] = {}
    for b in buckets:
        grouped.setdefault(b.bucket, []).append(b.prefix)
    return {name: [""] if "" in prefixes else sorted(set(prefixes)) for name, prefixes in grouped.items()}


def grant_bucket_reads(function: EndpointFunction, buckets: Sequence[SourceBucket]) -> None:
    """s3:GetObject under each prefix and s3:ListBucket of keys under it: nothing else of the bucket."""
    partition = Stack.of(function).partition
    objects: list[str] = []
    for bucket, prefixes in _by_bucket(buckets).items():
        bucket_arn = f"arn:{partition}:s3:::{bucket}"
        keys = [f"{bucket_arn}/{prefix}*" for prefix in prefixes]
        objects.extend(keys)
        function.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=keys))
        function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions=None
                if prefixes == [""]
                else {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            )
        )
    acknowledge_wildcards(
        function,
        "An s3 source reads the objects under the bucket prefixes the deployment names "
        "(CDK context source_buckets), whatever their keys; nothing outside them.",
        objects,
    )


class SourceEvents(Construct):
    """EventBridge rules on the source buckets' object events, to the `source_events` function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        buckets: Sequence[SourceBucket],
        make_function: MakeFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = make_function(self, SOURCE_EVENTS)
        grant_bucket_reads(self.function, buckets)
        self.rules: list[events.Rule] = []
        for index, (bucket, prefixes) in enumerate(_by_bucket(buckets).items()):
            obj = {} if prefixes == [""] else {"object": {"key": [{"prefix": p} for p in prefixes]}}
            self.rules.append(
                events.Rule(
                    self,
                    f"Bucket{index}",
                    description=f"S3 object events of {bucket} to the source_events function",
                    event_pattern=events.EventPattern(
                        source=["aws.s3"],
                        detail_type=["Object Created", "Object Deleted"],
                        detail={"bucket": {"name": [bucket]}, **obj},
                    ),
                    targets=[
                        targets.LambdaFunction(
                            self.function.live, retry_attempts=EVENT_RETRIES, max_event_age=EVENT_MAX_AGE
                        )
                    ],
                )
            )


class SourceSchedule(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, stage: str, make_function: MakeFunction
    ) -> None:
        super().__init__(scope, construct_id)
        # Passes may overlap (one runs up to 15 minutes, the schedule fires every 5): each source is
        # leased, and a pass reads a source again before syncing it, so one already synced by the
        # other pass is no longer due. No reserved concurrency: it would come out of the account's
        # unreserved pool (tests/infrastructure/test_deploy.py keeps that pool whole).
        self.function = make_function(self, SCHEDULER_FUNCTION)
        self.role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="EventBridge Scheduler: invoke the source_scheduler function's live alias only",
        )
        self.function.live.grant_invoke(self.role)
        self.schedule = scheduler.CfnSchedule(
            self,
            "Schedule",
            name=f"{resources.APP}-{stage}-source-syncs",
            description="Sync the knowledge-base sources whose schedule is due",
            schedule_expression=f"rate({SCHEDULE_MINUTES} minutes)",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.function.live.function_arn,
                role_arn=self.role.role_arn,
                input='{"source": "citegate.schedule"}',
                # The next pass comes in 5 minutes; a retry would only overlap it.
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(maximum_retry_attempts=0),
            ),
            state="ENABLED",
        )
