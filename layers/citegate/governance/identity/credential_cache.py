"""Verified credentials, remembered for a short while by the Lambda authorizer.

The authorizer runs before every request on the public API and the streaming URLs, and API
Gateway's own authorizer cache cannot be used (anonymous requests carry no header to key it on:
infra/constructs/api.py). Without this cache every agent token costs a consistent DynamoDB read
and every person's JWT a signature verification, on every request.

What the cache keeps, and for how long:
- Only credentials that were accepted: an agent token or caller agent key found active in the
  credentials table, or a JWT that verified. A refusal is never kept, so a transient failure (the
  issuer unreachable, a key not yet fetched) never locks a valid caller out beyond that request.
- Keyed by the SHA-256 of the presented secret (the same digest the credentials table stores),
  by how it was presented (Bearer or caller key: a secret valid as one is not valid as the other)
  and by the settings that shape the principal (default tenant, OIDC issuer and audience), so an
  entry can only ever give back the principal, tenant included, that the full check gave for that
  very secret under those settings. The secret itself is not kept.
- For at most CACHE_SECONDS (60 s), and never past a JWT's own `exp`. So a credential revoked
  through the admin route stops working within 60 s in every execution environment of the
  authorizer, and at once in the process that revoked it (PolicyStore.revoke_credential calls
  `forget`), as policy changes do (PolicyStore caches policies 5 s).
- At most MAX_ENTRIES (1,024) credentials, the least recently used dropped first: people's JWTs
  change on every refresh, and one environment must not keep each of them.

The service token (RAG_API_TOKEN) is not cached: it is compared in memory before the cache is
consulted, so its rotation applies as soon as the secret's own cache (citegate.platform.secrets, 300 s)
reads the new value.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from citegate.platform.principal import Principal

CACHE_SECONDS = 60.0
MAX_ENTRIES = 1024


def digest(secret: str) -> str:
    """The SHA-256 of a secret, hex: what the credentials table keys an agent credential by."""
    return hashlib.sha256(secret.encode()).hexdigest()


class CredentialCache:
    """Accepted credentials by (how presented, SHA-256 of the secret, scope); thread-safe.

    `timer` (monotonic, for the TTL) and `clock` (wall time, for a JWT's exp) are test hooks.
    """

    def __init__(
        self,
        ttl_seconds: float = CACHE_SECONDS,
        max_entries: int = MAX_ENTRIES,
        *,
        timer: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._timer = timer
        self._clock = clock
        self._entries: OrderedDict[tuple[str, str, Hashable], tuple[float, Principal]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, kind: str, secret_digest: str, scope: Hashable) -> Principal | None:
        key = (kind, secret_digest, scope)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or self._timer() >= entry[0]:
                if entry is not None:
                    del self._entries[key]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(
        self,
        kind: str,
        secret_digest: str,
        scope: Hashable,
        principal: Principal,
        *,
        not_after: float | None = None,
    ) -> None:
        """Remember an accepted credential; `not_after` (epoch seconds: a JWT's exp) caps its stay."""
        keep = self.ttl_seconds
        if not_after is not None:
            keep = min(keep, not_after - self._clock())
        if keep <= 0 or self.max_entries <= 0:
            return
        key = (kind, secret_digest, scope)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self._timer() + keep, principal)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, secret_digest: str) -> int:
        """Drop every entry of a secret (revoked): how it was presented and scope do not matter."""
        with self._lock:
            stale = [key for key in self._entries if key[1] == secret_digest]
            for key in stale:
                del self._entries[key]
        return len(stale)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


# The authorizer's cache: one per process, which in Lambda is one execution environment.
CREDENTIALS = CredentialCache()


def forget(secret_digest: str) -> int:
    """A revocation in this process: the credential stops working here at once."""
    return CREDENTIALS.forget(secret_digest)
