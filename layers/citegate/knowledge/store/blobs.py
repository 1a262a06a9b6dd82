from __future__ import annotations

import json
from typing import Any


class BlobStore:
    """Raw documents and ingestion work files in one S3 bucket."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)

    def get(self, key: str) -> bytes:
        return bytes(self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def size(self, key: str) -> int | None:
        try:
            return int(self._s3.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
        except self._s3.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def put_json(self, key: str, value: Any) -> None:
        self.put(key, json.dumps(value, ensure_ascii=False).encode(), "application/json")

    def get_json(self, key: str) -> Any:
        return json.loads(self.get(key))

    def delete_prefix(self, prefix: str) -> int:
        deleted = 0
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self._s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                deleted += len(keys)
        return deleted

    def presigned_put(self, key: str, content_type: str, expires_in: int) -> str:
        return str(
            self._s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key, "ContentType": content_type},
                ExpiresIn=expires_in,
            )
        )
