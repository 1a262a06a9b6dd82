"""Identifiers: derived where a stable id makes retries and re-ingestion idempotent."""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid


def _digest(*parts: str, size: int = 8) -> str:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=size).hexdigest()


def document_id(kb_id: str, source_name: str) -> str:
    """Ingesting the same source into the same knowledge base again replaces the document."""
    return "d_" + _digest(kb_id, source_name)


def parent_id(document_id: str, index: int) -> str:
    return f"{document_id}:p{index}"


def ref_id(document_id: str, index: int, text: str) -> str:
    """A child's ref id; the same text at the same place keeps its id across reindexing."""
    return "r_" + _digest(document_id, str(index), text)


def new_task_id() -> str:
    return "t_" + uuid.uuid4().hex


def new_upload_id() -> str:
    return "u_" + uuid.uuid4().hex


def slugify(name: str, max_length: int = 48) -> str:
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:max_length].strip("-")
    # Names with no ASCII letters (Chinese names, say) still get a readable, stable id.
    return slug or "kb-" + _digest(name, size=4)
