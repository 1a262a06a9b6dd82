"""The embedded endpoint dumps DynamoDB item results as they are, instead of walking moto's output
model value by value (citegate.runtime.aws_endpoint). Every item operation must answer byte for
byte what the model's way answers, for every attribute type, so the shortcut changes speed only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import Binary

from citegate.runtime.aws_endpoint import FAST_ITEM_OPERATIONS, EmbeddedAws


@pytest.fixture
def endpoint(stack: Any) -> EmbeddedAws:
    """The local stack's endpoint (moto's backends are process-wide: a second endpoint's reset
    would empty the stack's tables too)."""
    aws: EmbeddedAws = stack.aws
    return aws


LOCAL = {"region_name": "us-east-1", "aws_access_key_id": "test", "aws_secret_access_key": "test"}


def _client(endpoint: EmbeddedAws, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint.endpoint_url, **LOCAL)


def _resource(endpoint: EmbeddedAws) -> Any:
    return boto3.resource("dynamodb", endpoint_url=endpoint.endpoint_url, **LOCAL)


EVERY_TYPE = {
    "pk": "doc#1",
    "sk": 1,
    "text": "naïve café 检索增强",
    "empty": "",
    "count": Decimal("12345678901234567890.5"),
    "negative": Decimal("-0.001"),
    "blob": Binary(b"\x00\xffbytes"),
    "flag": True,
    "nothing": None,
    "tags": {"a", "b"},
    "scores": {Decimal("1"), Decimal("2.5")},
    "blobs": {Binary(b"x"), Binary(b"y")},
    "nested": {"list": [1, "two", {"three": [Binary(b"3")]}], "map": {"deep": {"deeper": False}}},
    "empty_map": {},
    "empty_list": [],
}


def _scenario(table_name: str, dynamodb: Any, resource: Any) -> list[tuple[str, Any]]:
    """Every fast-path operation, with the options the stores use; returns each raw response body."""
    dynamodb.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    table = resource.Table(table_name)
    bodies: list[tuple[str, Any]] = []

    def record(http_response: Any, model: Any, **_: Any) -> None:
        if model.name in FAST_ITEM_OPERATIONS:  # the table's own calls carry its creation time
            bodies.append((model.name, json.loads(http_response.content or b"{}")))

    dynamodb.meta.events.register("after-call.dynamodb", record)
    resource.meta.client.meta.events.register("after-call.dynamodb", record)
    key = {"pk": "doc#1", "sk": 1}
    table.put_item(Item=EVERY_TYPE)
    table.put_item(Item={**EVERY_TYPE, "sk": 2, "text": "second"}, ReturnValues="ALL_OLD")
    table.put_item(Item={**EVERY_TYPE, "text": "replaced"}, ReturnValues="ALL_OLD")
    table.get_item(Key=key, ConsistentRead=True)
    table.get_item(Key={"pk": "missing", "sk": 0})
    table.get_item(
        Key=key, ProjectionExpression="#t, nested.#m", ExpressionAttributeNames={"#t": "text", "#m": "map"}
    )
    resource.batch_get_item(
        RequestItems={table_name: {"Keys": [key, {"pk": "doc#1", "sk": 2}, {"pk": "nope", "sk": 9}]}}
    )
    table.query(KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": "doc#1"}, Limit=1)
    table.query(KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": "doc#1"}, Select="COUNT")
    table.query(
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": "doc#1"},
        ProjectionExpression="sk, blobs",
        ScanIndexForward=False,
    )
    table.scan(FilterExpression="flag = :t", ExpressionAttributeValues={":t": True})
    table.update_item(
        Key=key,
        UpdateExpression="SET #t = :t ADD #c :one",
        ExpressionAttributeNames={"#t": "text", "#c": "count"},
        ExpressionAttributeValues={":t": "updated", ":one": 1},
        ReturnValues="ALL_NEW",
    )
    table.update_item(Key=key, UpdateExpression="REMOVE empty_list", ReturnValues="UPDATED_OLD")
    table.update_item(Key=key, UpdateExpression="SET flag = :f", ExpressionAttributeValues={":f": False})
    dynamodb.transact_get_items(
        TransactItems=[
            {"Get": {"TableName": table_name, "Key": {"pk": {"S": "doc#1"}, "sk": {"N": "1"}}}},
            {"Get": {"TableName": table_name, "Key": {"pk": {"S": "none"}, "sk": {"N": "1"}}}},
        ]
    )
    table.delete_item(Key={"pk": "doc#1", "sk": 2}, ReturnValues="ALL_OLD")
    table.delete_item(Key={"pk": "doc#1", "sk": 99})
    dynamodb.delete_table(TableName=table_name)
    return bodies


def _by_model() -> Callable[[], None]:
    """Switch the endpoint to moto's own way of writing results; returns how to switch back."""
    from moto.dynamodb.responses import DynamoResult

    fast = DynamoResult.execute_result
    DynamoResult.execute_result = fast.by_model  # type: ignore[attr-defined, method-assign]

    def restore() -> None:
        DynamoResult.execute_result = fast  # type: ignore[method-assign]

    return restore


def test_item_results_are_the_same_either_way(endpoint: EmbeddedAws) -> None:
    dynamodb, resource = _client(endpoint, "dynamodb"), _resource(endpoint)
    from moto.dynamodb.responses import DynamoResult

    written_by_model: list[str] = []
    by_model = DynamoResult.execute_result.by_model  # type: ignore[attr-defined]

    def counting(result: Any, context: Any) -> Any:
        written_by_model.append(context.operation_model.name)
        return by_model(result, context)

    DynamoResult.execute_result.by_model = counting  # type: ignore[attr-defined]
    table = f"fast-{uuid.uuid4().hex[:8]}"
    try:
        fast = _scenario(table, dynamodb, resource)
    finally:
        DynamoResult.execute_result.by_model = by_model  # type: ignore[attr-defined]
    # Every item result took the shortcut (a fallback would make the comparison below moot).
    assert not FAST_ITEM_OPERATIONS & set(written_by_model)
    restore = _by_model()
    try:
        model_way = _scenario(table, _client(endpoint, "dynamodb"), _resource(endpoint))
    finally:
        restore()
    assert [name for name, _ in fast] == [name for name, _ in model_way]
    assert {name for name, _ in fast} >= FAST_ITEM_OPERATIONS
    for (name, fast_body), (_, model_body) in zip(fast, model_way, strict=True):
        assert fast_body == model_body, name


def test_results_that_are_not_plain_data_still_go_the_model_way(endpoint: EmbeddedAws) -> None:
    dynamodb = _client(endpoint, "dynamodb")
    name = f"described-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # DescribeTable carries a timestamp: written by the model, parsed by botocore as a datetime.
    description = dynamodb.describe_table(TableName=name)["Table"]
    assert description["CreationDateTime"].year >= 2024
    dynamodb.delete_table(TableName=name)
