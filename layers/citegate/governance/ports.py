"""What the governance domain's functions use, as Protocols (see citegate.knowledge.ports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from citegate.knowledge.ports import HasKbs
from citegate.platform.ports import Configured

if TYPE_CHECKING:
    from citegate.governance.audit import AuditLog
    from citegate.governance.policy.store import PolicyStore
    from citegate.governance.ratelimit import Counters


class HasPolicies(Protocol):
    @property
    def policies(self) -> PolicyStore: ...


class HasAudit(Protocol):
    @property
    def audit(self) -> AuditLog: ...


class HasCounters(Protocol):
    @property
    def counters(self) -> Counters: ...


class Identifying(Configured, HasPolicies, Protocol):
    """What `identity.resolve.resolve_principal` reads: the settings and the policy store."""


class Governing(Configured, HasPolicies, HasAudit, HasCounters, HasKbs, Protocol):
    """What the governed call (`calls`: admit, authorize, narrow, audit, rate limits) reads."""
