"""POST /api/v1/knowledge/query: spec 002's governed knowledge entry (caller agent key -> granted files)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/api/v1/knowledge/query")
def query():  # type: ignore[no-untyped-def]
    from citegate.agents.knowledge_entry import query_knowledge
    from citegate.agents.schemas.knowledge import KnowledgeQuery

    # Admitted by the caller agent key in the body (spec 002) or by the request's credentials.
    call = authorized(app)
    return json_response(200, query_knowledge(services(), call, parse_body(app, KnowledgeQuery)))


lambda_handler = http_handler(app, services)
