"""GET /v1/kb: the caller's tenant's knowledge bases."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb")
def list_all():  # type: ignore[no-untyped-def]
    from citegate.knowledge.bases import list_kbs

    call = authorized(app)
    kbs = [kb for kb in list_kbs(services(), call.principal) if call.policy.allows_kb(kb.kb_id)]
    return json_response(200, {"knowledge_bases": [kb.model_dump() for kb in kbs]})


lambda_handler = http_handler(app, services)
