"""POST /v1/kb/{kb_id}/retrieve: hybrid retrieval in one knowledge base (ref_id, chunk_text, score)."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver, parse_body, principal
from citegate.knowledge_bases import get_kb
from citegate.models.retrieval import RetrieveRequest
from citegate.retrieval import Scope, retrieve

app = make_resolver()


@app.post("/v1/kb/<kb_id>/retrieve")
def retrieve_route(kb_id: str):  # type: ignore[no-untyped-def]
    s = services()
    get_kb(s, kb_id, principal(app))
    request = parse_body(app, RetrieveRequest)
    scope = Scope(
        frozenset({kb_id}), source_names=frozenset(request.source_names) if request.source_names else None
    )
    found = retrieve(s, scope, request.query, top_k=request.top_k, score_threshold=request.score_threshold)
    results = [
        {"ref_id": h.chunk.ref_id, "chunk_text": h.chunk.text, "score": round(h.score, 6)} for h in found.hits
    ]
    return json_response(200, {"results": results, "stats": found.stats})


lambda_handler = http_handler(app)
