"""Rewrite the journal as one put per live DynamoDB item and S3 object, and drop unused blobs."""

from __future__ import annotations

import base64
import json
import os
from typing import Any
from urllib.parse import quote

from citegate import resources
from citegate.local.journal import Journal


# moto routes by the credential scope; it does not check signatures.
def _auth(service: str) -> str:
    scope = f"local/20200101/us-east-1/{service}/aws4_request"
    return f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"


_DYNAMODB_AUTH = _auth("dynamodb")
_S3_AUTH = _auth("s3")


def _wire(value: Any) -> Any:
    """boto3's decoded attribute values back to DynamoDB's JSON wire format (binary as base64)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def compact(journal: Journal, session: Any, stage: str, bucket: str) -> int:
    dynamodb = session.client("dynamodb")
    s3 = session.client("s3")
    tmp = journal.path.with_suffix(".compacting")
    kept_blobs: set[str] = set()
    written = 0
    with tmp.open("w", encoding="utf-8") as out:
        for shape in resources.TABLES:
            table = shape.physical_name(stage)
            for page in dynamodb.get_paginator("scan").paginate(TableName=table):
                for item in page.get("Items", []):
                    body = json.dumps({"TableName": table, "Item": _wire(item)}).encode()
                    headers = {
                        "content-type": "application/x-amz-json-1.0",
                        "x-amz-target": "DynamoDB_20120810.PutItem",
                        "authorization": _DYNAMODB_AUTH,
                    }
                    out.write(
                        _line(
                            {
                                "service": "dynamodb",
                                "method": "POST",
                                "path": "/",
                                "query": "",
                                "headers": headers,
                                "body": base64.b64encode(body).decode(),
                            }
                        )
                    )
                    written += 1
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                got = s3.get_object(Bucket=bucket, Key=obj["Key"])
                digest = journal.store_blob(got["Body"].read())
                kept_blobs.add(digest)
                headers = {
                    "content-type": got.get("ContentType", "application/octet-stream"),
                    "authorization": _S3_AUTH,
                }
                out.write(
                    _line(
                        {
                            "service": "s3",
                            "method": "PUT",
                            "path": f"/{bucket}/{quote(obj['Key'])}",
                            "query": "",
                            "headers": headers,
                            "blob": digest,
                        }
                    )
                )
                written += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, journal.path)
    for blob in journal.blobs.iterdir():
        if blob.name not in kept_blobs:
            blob.unlink(missing_ok=True)
    return written
