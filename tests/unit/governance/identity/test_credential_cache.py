"""The authorizer's cache of accepted credentials (citegate.governance.identity.credential_cache).

The story: an agent token costs one credentials-table read, then none for a minute; a revocation
made elsewhere stops it within that minute (the documented bound) and one made in this process at
once; refusals are never remembered, a person's JWT is never kept past its exp, a secret accepted
one way is not accepted another, principals never cross tenants, and the cache stays bounded.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from pydantic import SecretStr
from tests.support.oidc_issuer import OidcIssuer, new_rsa_key

from citegate.governance.identity import jwt_verify
from citegate.governance.identity.authenticate import AuthResult, authenticate
from citegate.governance.identity.credential_cache import CACHE_SECONDS, CredentialCache, digest
from citegate.platform.settings import Settings

SERVICE_TOKEN = "service-token-for-the-cache-tests"
AUDIENCE = "citegate-api"


class FakeTimer:
    """Monotonic and wall time moving together, as a test decides."""

    def __init__(self) -> None:
        self.monotonic = 5_000.0
        self.wall = time.time()

    def advance(self, seconds: float) -> None:
        self.monotonic += seconds
        self.wall += seconds


class FakeCredentials:
    """The credentials table as PolicyStore.agent_for_secret reads it, counting the reads."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.reads = 0

    def issue(self, secret: str, agent_id: str, tenant_id: str = "default", kind: str = "token") -> None:
        self.records[hashlib.sha256(secret.encode()).hexdigest()] = {
            "agent_id": agent_id,
            "tenant_id": tenant_id,
            "credential_id": "c_" + agent_id,
            "kind": kind,
            "status": "active",
        }

    def revoke(self, secret: str) -> None:
        self.records[hashlib.sha256(secret.encode()).hexdigest()]["status"] = "revoked"

    def agent_for_secret(self, secret: str, kind: str) -> dict[str, Any] | None:
        self.reads += 1
        record = self.records.get(hashlib.sha256(secret.encode()).hexdigest())
        if not record or record["status"] != "active" or record["kind"] != kind:
            return None
        return dict(record)


@pytest.fixture
def clock() -> FakeTimer:
    return FakeTimer()


@pytest.fixture
def cache(clock: FakeTimer) -> CredentialCache:
    return CredentialCache(timer=lambda: clock.monotonic, clock=lambda: clock.wall)


@pytest.fixture
def table() -> FakeCredentials:
    return FakeCredentials()


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("RAG_API_TOKEN_SECRET_ARN", raising=False)
    return Settings(RAG_API_TOKEN=SecretStr(SERVICE_TOKEN))


def _auth(
    headers: dict[str, str],
    settings: Settings,
    table: FakeCredentials | None = None,
    *,
    cache: CredentialCache | None = None,
) -> AuthResult:
    """authenticate() as the authorizer calls it, with the fake table for the policy store."""
    return authenticate(headers, settings, cast(Any, table), cache=cache)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_an_agent_token_is_read_once_then_served_from_the_cache(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    table.issue("cgat_reader_1", "reader")
    for _ in range(5):
        result = _auth(_bearer("cgat_reader_1"), settings, table, cache=cache)
        assert result.principal is not None and result.principal.id == "reader"
    assert table.reads == 1 and cache.hits == 4
    # Without a cache (every caller but the authorizer), every request reads the table.
    _auth(_bearer("cgat_reader_1"), settings, table)
    assert table.reads == 2


def test_a_revocation_elsewhere_applies_within_the_documented_bound(
    settings: Settings, table: FakeCredentials, cache: CredentialCache, clock: FakeTimer
) -> None:
    table.issue("cgat_leaving_1", "leaving")
    assert _auth(_bearer("cgat_leaving_1"), settings, table, cache=cache).principal
    table.revoke("cgat_leaving_1")  # by the admin function, in another execution environment
    clock.advance(CACHE_SECONDS - 1)
    assert _auth(_bearer("cgat_leaving_1"), settings, table, cache=cache).principal
    clock.advance(1)
    refused = _auth(_bearer("cgat_leaving_1"), settings, table, cache=cache)
    assert refused.principal is None and refused.error == "the agent token is not valid or was revoked"
    assert CACHE_SECONDS == 60  # what docs/deploy.md promises


def test_a_revocation_in_this_process_applies_at_once(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    table.issue("cgat_gone_1", "gone")
    assert _auth(_bearer("cgat_gone_1"), settings, table, cache=cache).principal
    table.revoke("cgat_gone_1")
    # What PolicyStore.revoke_credential does with the record's credential_hash.
    assert cache.forget(hashlib.sha256(b"cgat_gone_1").hexdigest()) == 1
    assert _auth(_bearer("cgat_gone_1"), settings, table, cache=cache).principal is None


def test_refusals_are_never_remembered(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    # Refused (not issued yet, or the table answered late): the next request checks again.
    assert _auth(_bearer("cgat_new_1"), settings, table, cache=cache).principal is None
    table.issue("cgat_new_1", "newcomer")
    assert _auth(_bearer("cgat_new_1"), settings, table, cache=cache).principal
    assert table.reads == 2 and len(cache) == 1


def test_a_secret_accepted_as_a_token_is_not_accepted_as_a_caller_key(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    table.issue("cgat_only_bearer", "bearer-only", kind="token")
    assert _auth(_bearer("cgat_only_bearer"), settings, table, cache=cache).principal
    as_key = _auth({"X-Caller-Agent-Key": "cgat_only_bearer"}, settings, table, cache=cache)
    assert as_key.principal is None and as_key.error == "the caller agent key is not valid or was revoked"
    table.issue("cgak_key_1", "keyed", kind="caller_key")
    for _ in range(2):
        keyed = _auth({"X-Caller-Agent-Key": "cgak_key_1"}, settings, table, cache=cache)
        assert keyed.principal is not None and keyed.principal.claims["auth"] == "caller_key"


def test_each_secret_keeps_its_own_tenant(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    table.issue("cgat_acme_1", "bot", tenant_id="acme")
    table.issue("cgat_globex_1", "bot", tenant_id="globex")
    for _ in range(2):
        acme = _auth(_bearer("cgat_acme_1"), settings, table, cache=cache).principal
        globex = _auth(_bearer("cgat_globex_1"), settings, table, cache=cache).principal
        assert acme is not None and acme.tenant_id == "acme"
        assert globex is not None and globex.tenant_id == "globex"


def test_the_service_token_is_checked_every_time(
    settings: Settings, table: FakeCredentials, cache: CredentialCache
) -> None:
    assert _auth(_bearer(SERVICE_TOKEN), settings, table, cache=cache).principal
    assert len(cache) == 0
    rotated = Settings(RAG_API_TOKEN=SecretStr("the-next-service-token"))
    assert _auth(_bearer(SERVICE_TOKEN), rotated, table, cache=cache).principal is None


def test_the_cache_is_bounded_least_recently_used_first(clock: FakeTimer) -> None:
    from citegate.platform.principal import Principal

    small = CredentialCache(max_entries=2, timer=lambda: clock.monotonic, clock=lambda: clock.wall)
    agents = {name: Principal(type="agent", id=name, tenant_id="default") for name in "abc"}
    small.put("token", digest("a"), None, agents["a"])
    small.put("token", digest("b"), None, agents["b"])
    assert small.get("token", digest("a"), None) == agents["a"]  # a is now the most recent
    small.put("token", digest("c"), None, agents["c"])
    assert len(small) == 2
    assert small.get("token", digest("b"), None) is None
    assert small.get("token", digest("a"), None) == agents["a"]


# --- people's JWTs, against a real (loopback) issuer --------------------------------------------


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer(key=new_rsa_key()) as running:
        yield running


@pytest.fixture
def people(issuer: OidcIssuer, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("RAG_API_TOKEN_SECRET_ARN", raising=False)
    return Settings(
        RAG_API_TOKEN=SecretStr(SERVICE_TOKEN),
        CITEGATE_OIDC_ISSUER=issuer.url,
        CITEGATE_OIDC_AUDIENCE=AUDIENCE,
    )


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    verify = jwt_verify.JwksJwtVerifier.verify

    def counted(self: jwt_verify.JwksJwtVerifier, token: str) -> dict[str, Any]:
        seen.append(token)
        return verify(self, token)

    monkeypatch.setattr(jwt_verify.JwksJwtVerifier, "verify", counted)
    return seen


def test_a_jwt_is_verified_once_and_kept_no_longer_than_its_exp(
    people: Settings, issuer: OidcIssuer, cache: CredentialCache, clock: FakeTimer, verifications: list[str]
) -> None:
    token = issuer.issue("alice", audience=AUDIENCE, expires_in=20, claims={"tenant_id": "acme"})
    for _ in range(3):
        person = _auth(_bearer(token), people, cache=cache).principal
        assert person is not None and (person.type, person.id, person.tenant_id) == ("human", "alice", "acme")
    assert len(verifications) == 1
    clock.advance(21)  # past exp (by the cache's clock), well within the 60 s: verified again
    assert _auth(_bearer(token), people, cache=cache).principal is not None
    assert len(verifications) == 2


def test_a_jwt_is_kept_per_issuer_audience_and_default_tenant(
    people: Settings, issuer: OidcIssuer, cache: CredentialCache, verifications: list[str]
) -> None:
    token = issuer.issue("bob", audience=AUDIENCE)
    first = _auth(_bearer(token), people, cache=cache).principal
    assert first is not None and first.tenant_id == "default"
    other_tenant = people.model_copy(update={"default_tenant": "globex"})
    again = _auth(_bearer(token), other_tenant, cache=cache).principal
    assert again is not None and again.tenant_id == "globex"  # verified again, not the cached principal
    other_audience = people.model_copy(update={"oidc_audience": "another-api"})
    refused = _auth(_bearer(token), other_audience, cache=cache)
    assert refused.principal is None and refused.error == "the identity token was refused: wrong audience"
    assert len(verifications) == 3


def test_a_refused_jwt_is_checked_again_next_time(
    people: Settings, issuer: OidcIssuer, cache: CredentialCache, verifications: list[str]
) -> None:
    issuer.failing = True  # the issuer is down before its keys were ever fetched
    try:
        fresh = people.model_copy(update={"oidc_audience": "audience-" + str(time.monotonic_ns())})
        token = issuer.issue("carol", audience=fresh.oidc_audience or "")
        for _ in range(2):
            refused = _auth(_bearer(token), fresh, cache=cache)
            assert refused.error == "the identity token was refused: issuer unreachable"
    finally:
        issuer.failing = False
    # Each request went to the verifier (whose own back-off decides when the issuer is asked again).
    assert len(cache) == 0 and len(verifications) == 2
