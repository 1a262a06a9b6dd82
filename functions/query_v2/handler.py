"""POST /api/v2/query: spec 003's dual agent (retrieval rounds, then a cited summary) as SSE."""

from citegate.api.http import govern, make_resolver, parse_body
from citegate.api.streaming import sse_handler, stream_response
from citegate.container import services

app = make_resolver("chat")


@app.post("/api/v2/query")
def query_route():  # type: ignore[no-untyped-def]
    from citegate.agents.query_v2 import QueryV2, failure_events, run_query
    from citegate.agents.schemas.agents import QueryV2Body
    from citegate.governance.policy.model import RequestedScope

    body = parse_body(app, QueryV2Body)
    requested = RequestedScope(includeWorkingDocs=True) if body.include_working_docs else None
    call = govern(app, requested=requested)
    s = services()
    s.chat_models.get(body.model_id)  # an unknown model is refused before the stream starts
    request = QueryV2(body.query, top_k=body.top_k, model_id=body.model_id)
    return stream_response(run_query(s, call, s.chat_models, request), failure_events)


lambda_handler = sse_handler(app, services, family="chat")
