"""The embedded endpoint's journal is compacted while the server writes, and loses nothing.

Writers keep the endpoint busy (counters added to again and again, items put and deleted, batches,
transactions, S3 objects put, overwritten and deleted) while the journal is compacted several
times. Afterwards the journal must describe exactly what moto holds, and a fresh local stack
started on a copy of it (another process) must hold the same.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from citegate.platform import resources
from citegate.runtime import moto_state
from citegate.runtime.compaction import last_records

WRITERS = 4
ROUNDS = 60  # per writer; each round makes 4 to 6 DynamoDB writes and one S3 write


def _tables(stage: str) -> dict[str, str]:
    return {
        "counters": resources.COUNTERS.physical_name(stage),
        "chats": resources.CHATS.physical_name(stage),
    }


def _write(stack: Any, tag: str, writer: int, stop: threading.Event, errors: list[BaseException]) -> None:
    import boto3

    try:
        s = stack.services
        names = _tables(s.settings.stage)
        dynamodb = boto3.client("dynamodb", region_name=s.settings.region)
        s3 = boto3.client("s3", region_name=s.settings.region)
        rng = random.Random(writer)
        for round_ in range(ROUNDS):
            counter = f"{tag}-counter-{rng.randrange(5)}"
            dynamodb.update_item(
                TableName=names["counters"],
                Key={"counter_key": {"S": counter}},
                UpdateExpression="ADD #n :one",
                ExpressionAttributeNames={"#n": "count"},
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
            owner = {"S": f"{tag}-owner-{writer}"}
            item = {
                "owner_key": owner,
                "sk": {"S": f"msg#{round_:04d}"},
                "body": {"S": "x" * rng.randrange(50, 500)},
            }
            dynamodb.put_item(TableName=names["chats"], Item=item)
            if round_ % 3 == 2:  # delete an earlier one
                dynamodb.delete_item(
                    TableName=names["chats"], Key={"owner_key": owner, "sk": {"S": f"msg#{round_ - 1:04d}"}}
                )
            dynamodb.batch_write_item(
                RequestItems={
                    names["counters"]: [
                        {"PutRequest": {"Item": {"counter_key": {"S": f"{tag}-batch-{writer}-{round_}-{i}"}}}}
                        for i in range(3)
                    ]
                }
            )
            dynamodb.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": names["chats"],
                            "Key": {"owner_key": owner, "sk": {"S": "chat"}},
                            "UpdateExpression": "ADD messages :one SET last_round = :round",
                            "ExpressionAttributeValues": {":one": {"N": "1"}, ":round": {"N": str(round_)}},
                        }
                    },
                    {
                        "Update": {
                            "TableName": names["counters"],
                            "Key": {"counter_key": {"S": f"{tag}-total"}},
                            "UpdateExpression": "ADD #n :one",
                            "ExpressionAttributeNames": {"#n": "count"},
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            )
            key = f"compaction/{tag}/{writer}/{round_ % 7}"
            if round_ % 5 == 4:
                s3.delete_object(Bucket=s.bucket, Key=key)
            else:
                s3.put_object(Bucket=s.bucket, Key=key, Body=f"{writer}-{round_}".encode() * (round_ + 1))
            if stop.is_set():
                return
    except BaseException as error:  # reported by the test
        errors.append(error)


def _moto_state(tag: str) -> dict[str, Any]:
    """What moto holds of the test's items and objects, as journal records (sorted)."""
    items = sorted(
        (r["table"], r["k"], json.dumps(r["item"], sort_keys=True))
        for r in moto_state.table_records()
        if tag in r["k"]
    )
    objects = {}
    for bucket_name, bucket in moto_state._buckets():
        for key, versions in dict.items(bucket.keys):
            if tag in key and versions:
                objects[f"{bucket_name}/{key}"] = bytes(versions[-1].value).decode()
    return {"items": items, "objects": objects}


def _journal_state(journal_dir: Path, tag: str) -> dict[str, Any]:
    """The same, folded from a compacted journal's records alone."""
    items: dict[tuple[str, str], str | None] = {}
    objects: dict[str, str] = {}
    for line in (journal_dir / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("t") == "item" and tag in record["k"]:
            items[(record["table"], record["k"])] = json.dumps(record["item"], sort_keys=True)
        elif record.get("t") == "del" and tag in record["k"]:
            items[(record["table"], record["k"])] = None
        elif record.get("t") == "object" and tag in record["key"]:
            body = (journal_dir / "blobs" / record["blob"]).read_bytes()
            objects[f"{record['bucket']}/{record['key']}"] = body.decode()
        else:
            assert tag not in line, f"a record the fold does not expect: {line[:200]}"
    live = sorted((table, key, item) for (table, key), item in items.items() if item is not None)
    return {"items": live, "objects": objects}


def test_compaction_while_writes_go_on_keeps_every_write(stack: Any) -> None:
    aws, tag = stack.aws, f"cw{uuid.uuid4().hex[:10]}"
    compactor = aws.compactor
    stop, errors = threading.Event(), []
    writers = [threading.Thread(target=_write, args=(stack, tag, w, stop, errors)) for w in range(WRITERS)]
    for writer in writers:
        writer.start()
    compactions = 0
    try:
        while any(w.is_alive() for w in writers):
            compactor.compact()
            compactions += 1
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=120)
    assert not errors, errors
    assert compactions >= 3
    compactor.compact()  # once more, with every write in: S3 objects are then in the file too

    with aws.journal.lock:  # nothing is written meanwhile
        in_moto = _moto_state(tag)
        in_journal = _journal_state(aws.journal.directory, tag)
    counts = {
        json.loads(key)[0]["S"]: json.loads(item)["count"]["N"]
        for table, key, item in in_moto["items"]
        if "-counter-" in key or "-total" in key
    }
    assert sum(int(v) for k, v in counts.items() if "-counter-" in k) == WRITERS * ROUNDS
    assert counts[f"{tag}-total"] == str(WRITERS * ROUNDS)
    assert len(in_moto["items"]) > WRITERS * ROUNDS * 3
    assert in_journal == in_moto


def test_a_journal_of_many_writes_restores_to_the_same_state(stack: Any, tmp_path: Path) -> None:
    aws, tag = stack.aws, f"rs{uuid.uuid4().hex[:10]}"
    stop, errors = threading.Event(), []
    writers = [threading.Thread(target=_write, args=(stack, tag, w, stop, errors)) for w in range(2)]
    for writer in writers:
        writer.start()
    aws.compactor.compact()  # a compacted head, then writes of every kind after it
    for writer in writers:
        writer.join(timeout=120)
    assert not errors, errors

    copy = tmp_path / "data"
    with aws.journal.lock:
        (copy / "aws").mkdir(parents=True)
        shutil.copy(aws.journal.path, copy / "aws" / "journal.jsonl")
        shutil.copytree(aws.journal.blobs, copy / "aws" / "blobs")
        expected = _moto_state(tag)
    found = last_records(copy / "aws" / "journal.jsonl")
    assert not found.requests and found.index  # items by what they left behind, superseded ones too
    lines = sum(1 for _ in (copy / "aws" / "journal.jsonl").open())
    assert lines > found.live

    restored = subprocess.run(
        [sys.executable, "-c", _RESTORE, str(Path(__file__).parent), tag],
        env={**os.environ, "RAG_DATA_ROOT": str(copy), "CITEGATE_STAGE": stack.settings.stage},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert restored.returncode == 0, restored.stderr[-3000:]
    state = json.loads(restored.stdout.strip().splitlines()[-1])
    assert state["items"] == [list(i) for i in expected["items"]]
    assert state["objects"] == expected["objects"]
    # (`skipped` counts S3 writes whose blob other tests of this session removed on purpose.)
    assert state["loader"]["superseded"] > 0


# A fresh local stack on the copied folder, in its own process (moto's state is per process).
_RESTORE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from citegate.runtime.stack import LocalStack
from citegate.platform.settings import get_settings
from test_local_journal_compaction import _moto_state
stack = LocalStack(get_settings(), poll=False).start()
state = _moto_state(sys.argv[2])
loader = stack.aws.loader
state["loader"] = {"superseded": loader.superseded, "skipped": loader.skipped, "loaded": loader.loaded}
stack.stop()
print(json.dumps(state))
"""


def test_an_item_of_every_attribute_type_is_journaled_and_restored_as_it_was(stack: Any) -> None:
    """What a write left behind is journaled in DynamoDB JSON, and loading it back gives the item
    GetItem returned, for every attribute type."""
    import boto3

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    table = _tables(s.settings.stage)["chats"]
    key = {"owner_key": {"S": f"types-{uuid.uuid4().hex}"}, "sk": {"S": "chat#1"}}
    item = {
        **key,
        "s": {"S": "text ü"},
        "n": {"N": "12.50"},
        "b": {"B": b"\x00\xffbytes"},
        "bool": {"BOOL": False},
        "null": {"NULL": True},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"x", b"y"]},
        "l": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"deep": {"B": b"\x01"}}}]},
        "m": {"M": {"a": {"L": [{"BOOL": True}]}, "b": {"SS": ["z"]}}},
    }
    client.put_item(TableName=table, Item=item)
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET m.c = :c ADD ns :more",
        ExpressionAttributeValues={":c": {"N": "3"}, ":more": {"NS": ["7"]}},
    )
    before = client.get_item(TableName=table, Key=key)["Item"]

    with stack.aws.journal.lock:
        lines = stack.aws.journal.path.read_text().splitlines()
    [record] = [json.loads(line) for line in lines if key["owner_key"]["S"] in line][-1:]
    assert record["t"] == "item"
    moto_table = moto_state.find_table(table)
    partition, sort = json.loads(record["k"])
    moto_table.delete_item(moto_state._typed(partition), moto_state._typed(sort))
    assert "Item" not in client.get_item(TableName=table, Key=key)
    moto_state._load_item(record)
    assert client.get_item(TableName=table, Key=key)["Item"] == before
