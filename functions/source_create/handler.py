"""POST /v1/kb/{kb_id}/sources: a folder, Git repository, website or S3 prefix the knowledge base follows."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/sources")
def create(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.sources.model import CreateSourceRequest

    call = authorized(app)
    assert call.kb is not None
    source = services().source_service.create(
        call.kb, parse_body(app, CreateSourceRequest), call.principal.id
    )
    return json_response(
        201, source.public(), headers={"Location": f"/v1/kb/{kb_id}/sources/{source.source_id}"}
    )


lambda_handler = http_handler(app, services)
