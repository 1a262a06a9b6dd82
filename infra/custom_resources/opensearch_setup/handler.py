"""Custom resource (custom_resources.Provider on-event handler): set the OpenSearch domain up.

Create and Update call `citegate.search.opensearch.setup_opensearch`, which puts the index
template, creates the chunks index if it is missing (checking the vector dimension otherwise) and
puts one search pipeline per fusion config: idempotent, so every deploy may run it. Delete keeps
the index: the chunks are data, and the domain's own removal policy decides their fate.

Runs with the shared and base layers (citegate, opensearch-py, requests); requests are signed
with this function's role, which the domain's access policy names. That policy is written by the
domain's AccessPolicy custom resource just before this one runs, and the domain may take a moment
to apply it, so a 403 is retried like an unreachable endpoint.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

log = logging.getLogger()
log.setLevel(logging.INFO)

# A new domain's endpoint can take a few minutes to resolve and accept signed requests.
ATTEMPTS = 8
FIRST_DELAY_S = 5.0


def _setup(properties: dict[str, Any]) -> dict[str, Any]:
    from opensearchpy.exceptions import AuthorizationException

    from citegate.search.base import FusionConfig, SearchUnavailable
    from citegate.search.opensearch import OpenSearchIndex, setup_opensearch

    prefix = str(properties["Prefix"])
    dimension = int(properties["Dimension"])
    fusions = [
        FusionConfig(
            method=f["method"],
            lexical_weight=float(f["lexical_weight"]),
            rank_constant=int(f["rank_constant"]),
        )
        for f in json.loads(properties.get("Fusions") or "[]")
    ]
    index = OpenSearchIndex.from_aws(
        str(properties["Endpoint"]),
        str(properties["Region"]),
        prefix=prefix,
        dimension=dimension,
        auto_setup=False,
        timeout=30.0,
    )
    delay = FIRST_DELAY_S
    try:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return setup_opensearch(
                    index.client,
                    prefix,
                    dimension,
                    fusions,
                    chinese_analyzer=properties.get("ChineseAnalyzer") or "smartcn",
                )
            except (
                SearchUnavailable,
                AuthorizationException,
            ) as error:  # not ready, or the policy not yet applied
                if attempt == ATTEMPTS:
                    raise
                log.warning(
                    "OpenSearch not ready (attempt %d): %s; retrying in %.0f s", attempt, error, delay
                )
                time.sleep(delay)
                delay = min(delay * 2, 60.0)
    finally:
        index.close()
    raise AssertionError("unreachable")


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = event["RequestType"]
    properties = event.get("ResourceProperties", {})
    physical_id = (
        event.get("PhysicalResourceId") or f"{properties.get('Endpoint')}/{properties.get('Prefix')}"
    )
    log.info("OpenSearch setup: %s %s", request, physical_id)
    if request == "Delete":
        return {"PhysicalResourceId": physical_id}
    result = _setup(properties)
    log.info("OpenSearch setup done: %s", json.dumps(result, default=str))
    return {
        "PhysicalResourceId": f"{properties['Endpoint']}/{properties['Prefix']}",
        "Data": {
            "Index": str(result.get("index", "")),
            "Template": str(result.get("template", "")),
            "Pipelines": ",".join(result.get("pipelines", [])),
        },
    }
