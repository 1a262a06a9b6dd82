"""The stateful resources as any stack's functions see them: imported by their fixed names.

Tables, the documents bucket and the ingestion queue live in the top-level stack (Data). Functions
in nested stacks refer to them by name (`citegate.platform.resources` fixes every name) instead of by
CloudFormation reference, so:
- no cross-stack parameter per table, bucket and queue in each nested stack;
- an IAM statement reads the same in every stack (`arn:<partition>:dynamodb:<region>:<account>:
  table/<name>`), so its cdk-nag acknowledgement names exactly what cdk-nag will see.
The nested stacks depend on the Data construct, so the resources exist before any function runs.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from citegate.platform import resources
from constructs import Construct

STATE_ID = "State"


class StateRefs(Construct):
    """One per stack (`StateRefs.of(scope, stage)`): the tables by TableShape.logical, the bucket,
    the ingestion queue."""

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.tables: dict[str, dynamodb.ITable] = {
            shape.logical: dynamodb.Table.from_table_attributes(
                self,
                f"{shape.logical.title()}Table",
                table_name=shape.physical_name(stage),
                global_indexes=[index.name for index in shape.indexes] or None,
            )
            for shape in resources.TABLES
        }
        self.bucket = s3.Bucket.from_bucket_name(self, "Bucket", resources.bucket_name(stage, stack.account))
        queue_name = resources.INGEST_QUEUE.physical_name(stage)
        self.ingest_queue = sqs.Queue.from_queue_attributes(
            self,
            "IngestQueue",
            queue_arn=stack.format_arn(
                service="sqs", resource=queue_name, arn_format=ArnFormat.NO_RESOURCE_NAME
            ),
            queue_name=queue_name,
            queue_url=f"https://sqs.{stack.region}.{stack.url_suffix}/{stack.account}/{queue_name}",
        )

    @classmethod
    def of(cls, scope: Construct, stage: str) -> StateRefs:
        stack = Stack.of(scope)
        found = stack.node.try_find_child(STATE_ID)
        if isinstance(found, StateRefs):
            return found
        return cls(stack, STATE_ID, stage=stage)
