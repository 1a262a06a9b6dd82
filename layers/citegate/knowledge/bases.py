"""Knowledge-base operations behind the /v1/kb routes. Nothing crosses tenants."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from citegate.knowledge.schemas.kb import CreateKbRequest, KnowledgeBase, UpdateKbRequest
from citegate.platform import ids
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import Forbidden, KbExists
from citegate.platform.principal import Principal

if TYPE_CHECKING:
    from citegate.knowledge.ports import HasKbs


def create_kb(s: HasKbs, request: CreateKbRequest, caller: Principal) -> KnowledgeBase:
    tenant = request.tenant_id or caller.tenant_id
    if tenant != caller.tenant_id:
        raise Forbidden(
            "a knowledge base can only be created in the caller's own tenant", details={"field": "tenant_id"}
        )
    now = utc_now()

    def record(kb_id: str) -> KnowledgeBase:
        return KnowledgeBase(
            kb_id=kb_id,
            tenant_id=tenant,
            name=request.name,
            description=request.description,
            status=request.status,
            created_at=now,
            updated_at=now,
        )

    if request.kb_id:
        return s.kbs.create(record(request.kb_id))
    # A server-made id: the name's slug, with a short suffix if another knowledge base has it.
    slug = ids.slugify(request.name)
    for candidate in [slug] + [f"{slug}-{uuid.uuid4().hex[:6]}" for _ in range(3)]:
        try:
            return s.kbs.create(record(candidate))
        except KbExists:
            continue
    raise KbExists(f"could not find a free id for {request.name!r}; give kb_id explicitly")


def get_kb(s: HasKbs, kb_id: str, caller: Principal) -> KnowledgeBase:
    return s.kbs.get(kb_id, tenant_id=caller.tenant_id)


def list_kbs(s: HasKbs, caller: Principal) -> list[KnowledgeBase]:
    return s.kbs.list(caller.tenant_id)


def update_kb(s: HasKbs, kb_id: str, request: UpdateKbRequest, caller: Principal) -> KnowledgeBase:
    s.kbs.get(kb_id, tenant_id=caller.tenant_id)
    return s.kbs.update(kb_id, request.model_dump(exclude_none=True))
