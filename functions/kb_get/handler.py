"""GET /v1/kb/{kb_id}."""

from citegate.http.api import govern, http_handler, json_response, make_resolver

app = make_resolver()


@app.get("/v1/kb/<kb_id>")
def get(kb_id: str):  # type: ignore[no-untyped-def]
    call = govern(app, "rag_list_kb", kb_id=kb_id)
    assert call.kb is not None
    return json_response(200, call.kb.model_dump())


lambda_handler = http_handler(app)
