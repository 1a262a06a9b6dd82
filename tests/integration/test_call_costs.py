"""What a governed call costs in DynamoDB. Rate limits are spent from leases this process claims
(several keys in one transaction, so a call refused by one limit spends nothing of the others);
policies and knowledge bases are checked from recent copies. So a read pays its audit record, and
now and then a lease claim."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from citegate.governance.ratelimit import LEASE_MAX, Counters, lease_size
from citegate.platform.errors import RateLimited

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


def _counting_dynamodb_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import botocore.client

    calls: list[str] = []
    original = botocore.client.BaseClient._make_api_call

    def counting(self: Any, operation: str, params: Any) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            calls.append(operation)
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
    return calls


def test_lease_caps_keep_small_limits_exact() -> None:
    assert [lease_size(n) for n in (1, 30, 39, 40, 120, 600, 1_000_000)] == [1, 1, 1, 2, 6, 30, LEASE_MAX]


def test_a_lease_is_claimed_once_and_spent_locally(
    counters: Counters, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, ip = f"user-{uuid.uuid4().hex}", f"ip-{uuid.uuid4().hex}"
    calls = _counting_dynamodb_calls(monkeypatch)
    for _ in range(25):
        counters.hit_all([(user, 200), (ip, 1000)], DAY)  # leases up to 10 and 50 calls
    # Claims of 1, 2, 4, 8, then the caps: 10 for the user, 16 for the ip (on its way to 50),
    # both keys in one transaction at calls 1, 2, 4, 8 and 16; the other 20 calls cost nothing.
    assert calls == ["TransactWriteItems"] * 5
    assert counters.current(user, DAY) == 1 + 2 + 4 + 8 + 10
    assert counters.current(ip, DAY) == 1 + 2 + 4 + 8 + 16
    # Another process starts with a claim of one call.
    other = Counters(counters._table)
    other.hit_all([(user, 200)], DAY)
    assert counters.current(user, DAY) == 26


def test_a_new_window_starts_claiming_half_as_much(
    counters: Counters, monkeypatch: pytest.MonkeyPatch
) -> None:
    import citegate.governance.ratelimit

    key = f"steady-{uuid.uuid4().hex}"
    now = [1_000_000 * 60.0]
    monkeypatch.setattr(citegate.governance.ratelimit.time, "time", lambda: now[0])
    for _ in range(20):
        counters.hit_all([(key, 6000)], 60)  # claims of 1, 2, 4, 8 and 16: the next would be 32
    assert counters.current(key, 60) == 31
    now[0] += 60  # the next window
    counters.hit_all([(key, 6000)], 60)
    assert counters.current(key, 60) == 16


def test_the_last_calls_under_a_limit_are_claimed_one_by_one(counters: Counters) -> None:
    key = f"tight-{uuid.uuid4().hex}"
    elsewhere = Counters(counters._table)
    elsewhere.add(key, 95, DAY)  # another process spent most of the limit
    for _ in range(5):  # claims of 1 and 2, then no room for 4 nor 2: the last two one by one
        counters.hit_all([(key, 100)], DAY)
    with pytest.raises(RateLimited):
        counters.hit_all([(key, 100)], DAY)
    assert counters.current(key, DAY) == 100


def test_a_refused_window_is_refused_here_without_asking_again(
    counters: Counters, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, ip = f"spent-{uuid.uuid4().hex}", f"ip-{uuid.uuid4().hex}"
    counters.hit_all([(key, 1), (ip, 1000)], DAY)
    with pytest.raises(RateLimited):
        counters.hit_all([(key, 1), (ip, 1000)], DAY)
    calls = _counting_dynamodb_calls(monkeypatch)
    with pytest.raises(RateLimited) as refused:
        counters.hit_all([(key, 1), (ip, 1000)], DAY)
    assert calls == [] and key in str(refused.value)
    # The refused calls counted nothing against the ip.
    assert counters.current(ip, DAY) == 1


def test_concurrent_calls_never_pass_the_limit(counters: Counters) -> None:
    import threading

    key = f"busy-{uuid.uuid4().hex}"
    processes = [Counters(counters._table) for _ in range(3)]  # three warm Lambda containers
    admitted: list[int] = []
    lock = threading.Lock()

    def caller(n: int) -> None:
        for _ in range(40):
            try:
                processes[n % 3].hit_all([(key, 100)], DAY)
            except RateLimited:
                continue
            with lock:
                admitted.append(n)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 240 attempts against a limit of 100: never more admitted than counted, never past the limit.
    assert counters.current(key, DAY) <= 100
    assert 100 - 3 * lease_size(100) <= len(admitted) <= counters.current(key, DAY)


def test_a_governed_read_costs_one_dynamodb_round_trip(
    client: Any, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Policy and knowledge base are read from this process's recent copies, the rate limits are
    spent from leases: the audit record is the one write a read pays, but for a lease claim now
    and then (of 2 calls, then 4, ...; see citegate.governance.ratelimit)."""
    client.post(f"/v1/kb/{kb}/retrieve", json={"query": "warm the caches"}).raise_for_status()
    calls = _counting_dynamodb_calls(monkeypatch)
    for n in range(5):
        response = client.post(f"/v1/kb/{kb}/retrieve", json={"query": f"what does the gateway cost {n}"})
        assert response.status_code == 200, response.text
    assert calls.count("PutItem") == 5
    claims = [c for c in calls if c != "PutItem"]
    assert set(claims) <= {"UpdateItem", "TransactWriteItems"} and len(claims) <= 2, calls


def test_read_calls_check_a_recent_copy_of_the_knowledge_base(stack: Any, kb: str) -> None:
    from citegate.knowledge.store.kbs import KbStore
    from citegate.platform.errors import KbNotFound

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
