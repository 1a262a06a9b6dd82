"""Create citegate's resources on the embedded endpoint from the shapes in citegate.platform.resources."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from citegate.api.routes import INGEST_CONSUMER_FUNCTION
from citegate.platform import resources
from citegate.runtime.aws_endpoint import route_lambda

ACCOUNT = "123456789012"  # moto's default account


def create_tables(dynamodb: Any, stage: str) -> None:
    existing = set(dynamodb.list_tables()["TableNames"])
    for shape in resources.TABLES:
        name = shape.physical_name(stage)
        if name in existing:
            continue
        keys = [{"AttributeName": shape.partition_key, "KeyType": "HASH"}]
        if shape.sort_key:
            keys.append({"AttributeName": shape.sort_key, "KeyType": "RANGE"})
        params: dict[str, Any] = {
            "TableName": name,
            "KeySchema": keys,
            "AttributeDefinitions": [
                {"AttributeName": a, "AttributeType": "S"} for a in shape.key_attributes()
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if shape.indexes:
            params["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
                    + ([{"AttributeName": index.sort_key, "KeyType": "RANGE"}] if index.sort_key else []),
                    "Projection": {"ProjectionType": "ALL"},
                }
                for index in shape.indexes
            ]
        dynamodb.create_table(**params)
        if shape.ttl_attribute:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": shape.ttl_attribute},
            )


def create_bucket(s3: Any, bucket: str) -> None:
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)


def create_queues(sqs: Any, stage: str) -> dict[str, str]:
    urls: dict[str, str] = {}
    for shape in resources.QUEUES:  # dead-letter queues come first in QUEUES
        attributes = {
            "VisibilityTimeout": str(shape.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(shape.retention_seconds),
        }
        if shape.dead_letter:
            dlq_url = urls[shape.dead_letter]
            dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(shape.max_receive_count)}
            )
        urls[shape.logical] = sqs.create_queue(QueueName=shape.physical_name(stage), Attributes=attributes)[
            "QueueUrl"
        ]
    return urls


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "# served in-process by citegate.runtime\n")
    return buffer.getvalue()


def create_functions(lambda_client: Any, iam: Any, stage: str) -> dict[str, str]:
    """Register the workflow's Lambda functions with moto; invocations run our handlers in-process."""
    role_name = f"citegate-{stage}-local-lambda"
    try:
        role_arn = iam.get_role(RoleName=role_name)["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role_arn = iam.create_role(RoleName=role_name, AssumeRolePolicyDocument=json.dumps(trust))["Role"][
            "Arn"
        ]
    existing = {
        f["FunctionName"]: f["FunctionArn"] for f in lambda_client.list_functions().get("Functions", [])
    }
    arns: dict[str, str] = {}
    for function in [*resources.INGESTION_STEP_FUNCTIONS.values(), INGEST_CONSUMER_FUNCTION]:
        name = resources.function_name(stage, function)
        if name not in existing:
            existing[name] = lambda_client.create_function(
                FunctionName=name,
                Runtime="python3.11",
                Role=role_arn,
                Handler="handler.lambda_handler",
                Code={"ZipFile": _empty_zip()},
            )["FunctionArn"]
        route_lambda(name, function)
        arns[function] = existing[name]
    return arns


def create_state_machine(sfn: Any, stage: str, function_arns: dict[str, str], role_arn: str) -> str:
    definition = resources.ASL_PATH.read_text()
    for placeholder, function in resources.INGESTION_STEP_FUNCTIONS.items():
        definition = definition.replace("${" + placeholder + "}", function_arns[function])
    name = resources.state_machine_name(stage)
    for machine in sfn.list_state_machines().get("stateMachines", []):
        if machine["name"] == name:
            sfn.update_state_machine(stateMachineArn=machine["stateMachineArn"], definition=definition)
            return str(machine["stateMachineArn"])
    return str(
        sfn.create_state_machine(name=name, definition=definition, roleArn=role_arn)["stateMachineArn"]
    )


def provision(session: Any, stage: str, bucket: str) -> dict[str, Any]:
    iam = session.client("iam")
    create_tables(session.client("dynamodb"), stage)
    create_bucket(session.client("s3"), bucket)
    queues = create_queues(session.client("sqs"), stage)
    arns = create_functions(session.client("lambda"), iam, stage)
    role_arn = iam.get_role(RoleName=f"citegate-{stage}-local-lambda")["Role"]["Arn"]
    machine = create_state_machine(session.client("stepfunctions"), stage, arns, role_arn)
    return {"queues": queues, "functions": arns, "state_machine_arn": machine}
