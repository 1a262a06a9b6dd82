"""State: the DynamoDB tables, the documents bucket and the ingestion queues.

Every name, key, index, TTL attribute and queue setting comes from `citegate.platform.resources`, the module
the local stack provisions from too, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from citegate.platform import resources
from constructs import Construct
from infra.constructs import acknowledge

# Prefixes the ingestion code writes (citegate.knowledge.ingest.service): work files live only while their
# task runs, and presigned uploads are ingested (then deleted) within minutes.
WORK_PREFIX = "work/"
UPLOADS_PREFIX = "uploads/"
RAW_PREFIX = "raw/"


class Data(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        page_origins: Sequence[str],
        removal_policy: RemovalPolicy,
        versioned_bucket: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        retain = removal_policy == RemovalPolicy.RETAIN

        # ---------------------------------------------------------------- tables
        self.tables: dict[str, dynamodb.Table] = {}
        for shape in resources.TABLES:
            table = dynamodb.Table(
                self,
                f"{shape.logical.title()}Table",
                table_name=shape.physical_name(stage),
                partition_key=dynamodb.Attribute(
                    name=shape.partition_key, type=dynamodb.AttributeType.STRING
                ),
                sort_key=(
                    dynamodb.Attribute(name=shape.sort_key, type=dynamodb.AttributeType.STRING)
                    if shape.sort_key
                    else None
                ),
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                # AWS managed KMS key (aws/dynamodb): encrypted, auditable in CloudTrail, and callers
                # need no key grants beyond their table permissions.
                encryption=dynamodb.TableEncryption.AWS_MANAGED,
                time_to_live_attribute=shape.ttl_attribute,
                deletion_protection=retain,
                removal_policy=removal_policy,
            )
            for index in shape.indexes:
                table.add_global_secondary_index(
                    index_name=index.name,
                    partition_key=dynamodb.Attribute(
                        name=index.partition_key, type=dynamodb.AttributeType.STRING
                    ),
                    sort_key=(
                        dynamodb.Attribute(name=index.sort_key, type=dynamodb.AttributeType.STRING)
                        if index.sort_key
                        else None
                    ),
                    projection_type=dynamodb.ProjectionType.ALL,
                )
            self.tables[shape.logical] = table

        # ---------------------------------------------------------------- bucket
        self.access_logs = s3.Bucket(
            self,
            "AccessLogsBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(90))],
            removal_policy=removal_policy,
            # CloudFormation cannot delete a bucket with objects: `cdk destroy` of a non-prod stage
            # empties it first (CDK's S3AutoDeleteObjects custom resource). prod retains its buckets.
            auto_delete_objects=not retain,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This is the server access log bucket of the documents bucket; logging it to itself "
            "would loop and another log bucket would only move the question.",
        )
        lifecycle = [
            s3.LifecycleRule(
                id="abort-incomplete-multipart-uploads",
                abort_incomplete_multipart_upload_after=Duration.days(1),
            ),
            s3.LifecycleRule(id="expire-work-files", prefix=WORK_PREFIX, expiration=Duration.days(1)),
            s3.LifecycleRule(id="expire-uploads", prefix=UPLOADS_PREFIX, expiration=Duration.days(1)),
        ]
        if versioned_bucket:
            lifecycle.append(
                s3.LifecycleRule(
                    id="expire-noncurrent-versions", noncurrent_version_expiration=Duration.days(30)
                )
            )
        self.bucket = s3.Bucket(
            self,
            "DocumentsBucket",
            bucket_name=resources.bucket_name(stage, Stack.of(self).account),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=versioned_bucket,
            lifecycle_rules=lifecycle,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="documents/",
            # Pages upload large documents with a presigned PUT straight to S3.
            cors=[
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.PUT],
                    allowed_origins=list(page_origins),
                    allowed_headers=["Content-Type", "Content-Length", "Content-MD5"],
                    exposed_headers=["ETag"],
                    max_age=3000,
                )
            ]
            if page_origins
            else None,
            removal_policy=removal_policy,
            auto_delete_objects=not retain,
        )

        # ---------------------------------------------------------------- queues
        self.queues: dict[str, sqs.Queue] = {}
        pending = list(resources.QUEUES)
        while pending:  # dead-letter queues first, whatever their order in QUEUES
            queue_shape = next(q for q in pending if q.dead_letter is None or q.dead_letter in self.queues)
            pending.remove(queue_shape)
            dead_letter = None
            if queue_shape.dead_letter:
                dead_letter = sqs.DeadLetterQueue(
                    queue=self.queues[queue_shape.dead_letter],
                    max_receive_count=queue_shape.max_receive_count or 5,
                )
            self.queues[queue_shape.logical] = sqs.Queue(
                self,
                f"{''.join(part.title() for part in queue_shape.logical.split('-'))}Queue",
                queue_name=queue_shape.physical_name(stage),
                visibility_timeout=Duration.seconds(queue_shape.visibility_timeout_seconds),
                retention_period=Duration.seconds(queue_shape.retention_seconds),
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                dead_letter_queue=dead_letter,
                removal_policy=removal_policy,
            )
        self.ingest_queue = self.queues[resources.INGEST_QUEUE.logical]
        self.dead_letter_queue = self.queues[resources.INGEST_DLQ.logical]
        for queue_shape in resources.QUEUES:
            if any(other.dead_letter == queue_shape.logical for other in resources.QUEUES):
                acknowledge(
                    self.queues[queue_shape.logical],
                    "AwsSolutions-SQS3",
                    "This queue is itself the dead-letter queue of the ingestion queue.",
                )
