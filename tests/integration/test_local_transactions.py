"""TransactWriteItems on the embedded endpoint backs up only the items it names (moto copied every
table it touched, whole, each time: a long-running server's chat messages grew slower as chats
piled up), and still changes all of them or none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from citegate.platform import resources


@pytest.fixture
def no_table_copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from moto.dynamodb.models.table import Table

    def refuse(self: Any, memo: Any) -> Any:
        raise AssertionError("a whole table was copied")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    yield


def _client(stack: Any) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name=stack.services.settings.region)


def test_a_transaction_changes_every_item_it_names(stack: Any, no_table_copies: None) -> None:
    client, tag = _client(stack), uuid.uuid4().hex
    counters = resources.COUNTERS.physical_name(stack.services.settings.stage)
    client.put_item(TableName=counters, Item={"counter_key": {"S": f"{tag}-a"}, "count": {"N": "1"}})
    client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": counters,
                    "Key": {"counter_key": {"S": f"{tag}-a"}},
                    "UpdateExpression": "ADD #n :one",
                    "ExpressionAttributeNames": {"#n": "count"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {"Put": {"TableName": counters, "Item": {"counter_key": {"S": f"{tag}-b"}, "count": {"N": "5"}}}},
        ]
    )
    got = {
        k: client.get_item(TableName=counters, Key={"counter_key": {"S": f"{tag}-{k}"}})["Item"]["count"]["N"]
        for k in ("a", "b")
    }
    assert got == {"a": "2", "b": "5"}


@pytest.mark.parametrize("failure", ["condition", "same item twice"])
def test_a_failed_transaction_changes_nothing(stack: Any, no_table_copies: None, failure: str) -> None:
    client, tag = _client(stack), uuid.uuid4().hex
    counters = resources.COUNTERS.physical_name(stack.services.settings.stage)
    for key in ("a", "gone"):
        client.put_item(TableName=counters, Item={"counter_key": {"S": f"{tag}-{key}"}, "count": {"N": "1"}})
    last: dict[str, Any] = {
        "ConditionCheck": {
            "TableName": counters,
            "Key": {"counter_key": {"S": f"{tag}-a"}},
            "ConditionExpression": "#n > :ten",
            "ExpressionAttributeNames": {"#n": "count"},
            "ExpressionAttributeValues": {":ten": {"N": "10"}},
        }
    }
    if failure == "same item twice":
        last = {"Delete": {"TableName": counters, "Key": {"counter_key": {"S": f"{tag}-a"}}}}
    actions = [
        {
            "Update": {
                "TableName": counters,
                "Key": {"counter_key": {"S": f"{tag}-a"}},
                "UpdateExpression": "ADD #n :one SET note = :note",
                "ExpressionAttributeNames": {"#n": "count"},
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":note": {"S": "changed"}},
            }
        },
        {"Put": {"TableName": counters, "Item": {"counter_key": {"S": f"{tag}-new"}}}},
        {"Delete": {"TableName": counters, "Key": {"counter_key": {"S": f"{tag}-gone"}}}},
        last,
    ]
    with pytest.raises(client.exceptions.ClientError):
        client.transact_write_items(TransactItems=actions)
    item = client.get_item(TableName=counters, Key={"counter_key": {"S": f"{tag}-a"}})["Item"]
    assert item == {"counter_key": {"S": f"{tag}-a"}, "count": {"N": "1"}}
    assert "Item" not in client.get_item(TableName=counters, Key={"counter_key": {"S": f"{tag}-new"}})
    assert "Item" in client.get_item(TableName=counters, Key={"counter_key": {"S": f"{tag}-gone"}})
