"""Custom resource (custom_resources.Provider on-event handler): seed the server-held policies.

Create and Update write the reviewed seed policies (config/policies.json, passed in as the `Seed`
property) with `PolicyStore.seed`, which only adds keys that are missing: a policy an administrator
changed through PUT /admin/policies/{principal_key} is never overwritten. Without it a new
deployment would refuse every governed call ("no policy grants ..."). Delete does nothing: the
policies table keeps its data.

Runs with the shared and base layers; CITEGATE_STAGE names the tables, as for every function.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger()
log.setLevel(logging.INFO)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = event["RequestType"]
    properties = event.get("ResourceProperties", {})
    physical_id = event.get("PhysicalResourceId") or f"citegate-policy-seed-{properties.get('Stage', '')}"
    if request == "Delete":
        return {"PhysicalResourceId": physical_id}

    from citegate.container import services

    s = services()
    with tempfile.TemporaryDirectory() as folder:
        seed_file = Path(folder) / "policies.json"
        seed_file.write_text(str(properties["Seed"]))
        written = s.policies.seed(
            seed_file, tenant_id=str(properties.get("Tenant") or s.settings.default_tenant)
        )
    log.info("policy seed: %d new policies written", written)
    return {"PhysicalResourceId": physical_id, "Data": {"Written": str(written)}}
