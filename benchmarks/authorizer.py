"""What the Lambda authorizer costs per request, without and with its credential cache.

A benchmark: it prints figures and asserts nothing. It runs the real authorizer function
(functions/authorizer/handler.py, loaded as the local Lambda service loads it) on the local stack
(DynamoDB on the embedded AWS endpoint over loopback, a JWT issuer on loopback) with HTTP API
authorizer events (payload 2.0), for each kind of caller:

- service: the RAG_API_TOKEN (compared in memory; never cached)
- agent:   an agent token (cgat_...), a consistent GetItem on the credentials table when not cached
- person:  a JWT verified against the issuer's JWKS (RS256; the JWKS itself is cached either way)
- anonymous, and an unknown agent token (refusals are never cached)

"uncached" is the authorizer as it was before the cache (the cache's TTL set to 0); "cached" is
as deployed (60 s). Per kind: microseconds per request (mean, p50, p99) and credentials-table
reads per 1,000 requests. In AWS an uncached agent request also waits for a DynamoDB round trip
(a few milliseconds over the network, not counted here: the embedded endpoint is on loopback).

    .venv/bin/python benchmarks/authorizer.py [--requests 2000]

The machine may be shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
# The repository root: tests.support.oidc_issuer is the loopback issuer the tests use.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import stamp

AUDIENCE = "citegate-bench"
SERVICE_TOKEN = "bench-service-token"


def event(headers: dict[str, str]) -> dict[str, Any]:
    """An HTTP API Lambda authorizer event (payload 2.0, REQUEST), as API Gateway sends it."""
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeKey": "POST /v1/kb/{kb_id}/retrieve",
        "rawPath": "/v1/kb/docs/retrieve",
        "headers": {"host": "api.example.com", "content-type": "application/json", **headers},
        "requestContext": {"http": {"method": "POST", "path": "/v1/kb/docs/retrieve"}, "requestId": "bench"},
    }


def measure(call: Callable[[], Any], requests: int) -> dict[str, float]:
    for _ in range(min(50, requests)):  # warm-up: imports, the JWKS fetch, connection pools
        call()
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return {
        "mean_us": statistics.fmean(times),
        "p50_us": times[len(times) // 2],
        "p99_us": times[int(len(times) * 0.99) - 1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per kind and mode")
    args = parser.parse_args()

    from tests.support.oidc_issuer import OidcIssuer

    with tempfile.TemporaryDirectory(prefix="citegate-bench-") as root, OidcIssuer() as issuer:
        os.environ.update(
            {
                "RAG_DATA_ROOT": root,
                "CITEGATE_EMBEDDER": "hashing",
                "RAG_API_TOKEN": SERVICE_TOKEN,
                "CITEGATE_OIDC_ISSUER": issuer.url,
                "CITEGATE_OIDC_AUDIENCE": AUDIENCE,
            }
        )
        from citegate.governance.identity.credential_cache import CACHE_SECONDS, CREDENTIALS
        from citegate.platform.settings import get_settings, reset_settings
        from citegate.runtime.functions import LocalLambdaContext, load_module
        from citegate.runtime.stack import LocalStack

        reset_settings()
        stack = LocalStack(get_settings(), persist=False, poll=False).start()
        try:
            s = stack.services
            assert s is not None
            issued = s.policies.issue_credential("bench-agent", s.settings.default_tenant, "token")
            agent_token = issued["secret"]
            person = issuer.issue("bench-person", audience=AUDIENCE, expires_in=3600)
            reads = 0
            lookup = s.policies.agent_for_secret

            def counted(secret: str, kind: str) -> Any:
                nonlocal reads
                reads += 1
                return lookup(secret, kind)

            s.policies.agent_for_secret = counted  # type: ignore[method-assign]
            handler = load_module("authorizer").lambda_handler
            context = LocalLambdaContext(function_name="authorizer")
            kinds = {
                "service": {"authorization": f"Bearer {SERVICE_TOKEN}"},
                "agent": {"authorization": f"Bearer {agent_token}"},
                "person": {"authorization": f"Bearer {person}"},
                "anonymous": {},
                "unknown agent": {"authorization": "Bearer cgat_not_a_token_at_all"},
            }
            print(f"authorizer per request, {args.requests} requests per row; {stamp()}")
            print(f"{'caller':<14} {'mode':<9} {'mean µs':>9} {'p50 µs':>9} {'p99 µs':>9} {'reads/1k':>9}")
            for name, headers in kinds.items():
                request = event(headers)
                verdict = handler(request, context)["context"]
                assert ("principal_type" in verdict) != (name == "unknown agent"), (name, verdict)
                for mode, ttl in (("uncached", 0.0), ("cached", CACHE_SECONDS)):
                    CREDENTIALS.clear()
                    CREDENTIALS.ttl_seconds = ttl
                    reads = 0
                    figures = measure(lambda request=request: handler(request, context), args.requests)  # type: ignore[misc]
                    per_k = reads * 1000 / (args.requests + min(50, args.requests))
                    print(
                        f"{name:<14} {mode:<9} {figures['mean_us']:>9.0f} {figures['p50_us']:>9.0f} "
                        f"{figures['p99_us']:>9.0f} {per_k:>9.1f}"
                    )
        finally:
            CREDENTIALS.ttl_seconds = CACHE_SECONDS
            stack.stop()


if __name__ == "__main__":
    main()
