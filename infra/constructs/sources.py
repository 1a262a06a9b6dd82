"""Scheduled source syncs in AWS: EventBridge Scheduler invokes the `source_scheduler` function every
SCHEDULE_MINUTES; the function syncs each source whose own schedule (`schedule_minutes`,
`next_sync_at`) is due, queueing new and changed documents on the existing ingestion queue
(citegate.api.scheduled). One fixed-rate schedule rather than one per source: sources are created
at run time by the API, and a schedule per source would give every API function the power to
create schedules and pass roles (scheduler:CreateSchedule, iam:PassRole).

Least privilege: the scheduler's role may invoke only this function's live alias; the function's
own role has what its spec lists (infra/constructs/endpoint_function.py). Failed syncs are
counted (metric citegate/SourceSyncsFailed) and alarmed in Monitoring.
"""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler

from citegate.platform import resources
from constructs import Construct
from infra.constructs.endpoint_function import EndpointFunction

SCHEDULER_FUNCTION = "source_scheduler"
SCHEDULE_MINUTES = 5

MakeFunction = Callable[..., EndpointFunction]


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
