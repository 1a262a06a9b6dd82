"""Custom resource (custom_resources.Provider on-event handler): set the OpenSearch domain up.

Create and Update call `citegate.knowledge.search.opensearch.setup_opensearch`, which puts the index
template, creates the chunks index if it is missing (checking the vector dimension otherwise) and
puts one search pipeline per fusion config: idempotent, so every deploy may run it. Delete keeps
the index: the chunks are data, and the domain's own removal policy decides their fate.

It also sets the index's `number_of_replicas` (the `Replicas` property: 0 on a single data node,
where a replica could never be assigned and the cluster would stay yellow); a dynamic setting, so
a deploy that changes the node count changes it too.

Runs with the shared and base layers (citegate, opensearch-py, requests); requests are signed
with this function's role, whose identity policy grants them (the domain's own policy delegates to
IAM). A new role's policy can take a moment to reach OpenSearch, so a 403 is retried like an
unreachable endpoint.

The reply stays small whatever the deployment (CloudFormation refuses one over 4,096 bytes): the
physical id and three short names (tests/infrastructure/test_deploy.py measures it).
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

    from citegate.knowledge.search.base import FusionConfig, SearchUnavailable
    from citegate.knowledge.search.opensearch import OpenSearchIndex, index_name, setup_opensearch

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
                result = setup_opensearch(
                    index.client,
                    prefix,
                    dimension,
                    fusions,
                    chinese_analyzer=properties.get("ChineseAnalyzer") or "smartcn",
                )
                replicas = properties.get("Replicas")
                if replicas not in (None, ""):
                    index.client.indices.put_settings(
                        index=index_name(prefix),
                        body={"index": {"number_of_replicas": int(replicas)}},
                    )
                return result
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
