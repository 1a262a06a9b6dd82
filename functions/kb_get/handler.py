"""GET /v1/kb/{kb_id}."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver, principal
from citegate.knowledge_bases import get_kb

app = make_resolver()


@app.get("/v1/kb/<kb_id>")
def get(kb_id: str):  # type: ignore[no-untyped-def]
    return json_response(200, get_kb(services(), kb_id, principal(app)).model_dump())


lambda_handler = http_handler(app)
