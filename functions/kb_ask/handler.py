"""POST /v1/kb/{kb_id}/ask: an answer bound to its evidence, or a plain no-answer with a reason."""

from citegate.answering.ask import ask
from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver, parse_body, principal
from citegate.knowledge_bases import get_kb
from citegate.models.retrieval import AskRequest
from citegate.retrieval import Scope

app = make_resolver()


@app.post("/v1/kb/<kb_id>/ask")
def ask_route(kb_id: str):  # type: ignore[no-untyped-def]
    s = services()
    get_kb(s, kb_id, principal(app))
    request = parse_body(app, AskRequest)
    scope = Scope(
        frozenset({kb_id}), source_names=frozenset(request.source_names) if request.source_names else None
    )
    outcome = ask(
        s,
        scope,
        request.question,
        top_k=request.top_k,
        score_threshold=request.score_threshold,
        max_context_parents=request.max_context_parents,
    )
    return json_response(200, outcome.response())


lambda_handler = http_handler(app)
