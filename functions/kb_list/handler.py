"""GET /v1/kb: the caller's tenant's knowledge bases."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver, principal
from citegate.knowledge_bases import list_kbs

app = make_resolver()


@app.get("/v1/kb")
def list_all():  # type: ignore[no-untyped-def]
    kbs = list_kbs(services(), principal(app))
    return json_response(200, {"knowledge_bases": [kb.model_dump() for kb in kbs]})


lambda_handler = http_handler(app)
