"""POST /api/v1/knowledge/query: spec 002's governed knowledge entry (caller agent key -> granted files)."""

from citegate.container import services
from citegate.errors import Unauthorized
from citegate.http.api import http_handler, json_response, make_resolver, parse_body, principal

app = make_resolver()


@app.post("/api/v1/knowledge/query")
def query():  # type: ignore[no-untyped-def]
    from citegate.governance import authorize, current_call
    from citegate.identity.authenticate import agent_from_secret
    from citegate.knowledge_entry import query_knowledge
    from citegate.models.knowledge import KnowledgeQuery

    s = services()
    request = parse_body(app, KnowledgeQuery)
    caller = principal(app)
    key = request.metadata.caller_agent_key
    if not caller.authenticated and key:
        # Spec 002 carries the caller agent key in the body, where no authorizer can see it.
        result = agent_from_secret(key, "caller_key", s.policies)
        if result.principal is None:
            raise Unauthorized(result.error or "the caller agent key is not valid")
        caller = result.principal
        current_call().principal = caller
    call = authorize(s, caller, "ka_retrieve")
    return json_response(200, query_knowledge(s, call, request))


lambda_handler = http_handler(app)
