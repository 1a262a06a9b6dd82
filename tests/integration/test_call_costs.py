"""What a governed call costs in DynamoDB: several rate limits are counted in one transaction, so
a call refused by one limit spends nothing of the others; policies and knowledge bases are checked
from recent copies, so a read pays a transaction and its audit record."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from citegate.errors import RateLimited
from citegate.ratelimit import Counters

# A day-long window, so that no test straddles two windows on a slow machine.
DAY = 86_400


@pytest.fixture
def counters(stack: Any) -> Counters:
    return Counters(stack.services.counters._table)


def test_every_limit_counts_one_call(counters: Counters) -> None:
    user, ip = f"user-{uuid.uuid4().hex}", f"ip-{uuid.uuid4().hex}"
    for _ in range(3):
        counters.hit_all([(user, 5), (ip, 5)], DAY)
    assert counters.current(user, DAY) == 3 and counters.current(ip, DAY) == 3


def test_the_reached_limit_is_named_and_nothing_is_spent(counters: Counters) -> None:
    user, ip = f"user-{uuid.uuid4().hex}", f"ip-{uuid.uuid4().hex}"
    counters.hit_all([(user, 10), (ip, 2)], DAY)
    counters.hit_all([(user, 10), (ip, 2)], DAY)
    with pytest.raises(RateLimited) as refused:
        counters.hit_all([(user, 10), (ip, 2)], DAY)
    assert refused.value.details["limit"] == 2 and refused.value.details["retry_after"] >= 1
    assert ip in str(refused.value) and user not in str(refused.value)
    # The refused call counted against neither key.
    assert counters.current(user, DAY) == 2 and counters.current(ip, DAY) == 2


def test_one_limit_is_a_plain_conditional_update(counters: Counters) -> None:
    key = f"solo-{uuid.uuid4().hex}"
    counters.hit_all([(key, 1)], DAY)
    with pytest.raises(RateLimited):
        counters.hit_all([(key, 1)], DAY)
    assert counters.current(key, DAY) == 1


def test_a_governed_read_costs_two_dynamodb_round_trips(
    client: Any, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Policy and knowledge base are read from this process's recent copies; the rate-limit counters
    are one transaction; the audit record is one write. Every call pays those two, and no more."""
    import botocore.client

    client.post(f"/v1/kb/{kb}/retrieve", json={"query": "warm the caches"}).raise_for_status()
    calls: list[str] = []
    original = botocore.client.BaseClient._make_api_call

    def counting(self: Any, operation: str, params: Any) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            calls.append(operation)
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
    response = client.post(f"/v1/kb/{kb}/retrieve", json={"query": "what does the gateway cost"})
    assert response.status_code == 200, response.text
    assert sorted(calls) == ["PutItem", "TransactWriteItems"], calls


def test_read_calls_check_a_recent_copy_of_the_knowledge_base(stack: Any, kb: str) -> None:
    from citegate.errors import KbNotFound
    from citegate.store.kbs import KbStore

    here, elsewhere = KbStore(stack.services.kbs._table), KbStore(stack.services.kbs._table)
    assert here.get(kb, max_age=60).status == "working"
    elsewhere.update(kb, {"status": "approved"})  # another process (Lambda container) changes it
    assert here.get(kb, max_age=60).status == "working"  # within max_age: the copy
    assert here.get(kb, max_age=0).status == "approved"  # too old: read again
    here.update(kb, {"status": "working"})  # a change made here applies here at once
    assert here.get(kb, max_age=60).status == "working"
    assert here.get(kb).status == "working"  # without max_age: always read
    with pytest.raises(KbNotFound):  # a knowledge base that does not exist is never a cached "no"
        here.get(f"{kb}-missing", max_age=60)
    with pytest.raises(KbNotFound):  # another tenant's copy is not yours either
        here.get(kb, tenant_id="someone-else", max_age=60)
