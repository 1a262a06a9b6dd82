"""POST /v1/kb/{kb_id}/ask: an answer bound to its evidence, or a plain no-answer with a reason."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/ask")
def ask_route(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.answers.answer_api import question_outcome
    from citegate.answers.ask import ask
    from citegate.governance.calls import charge_tokens, current_call, estimate_tokens, note_answered
    from citegate.knowledge.schemas.retrieval import AskRequest

    s = services()
    call = authorized(app)
    request = parse_body(app, AskRequest)
    outcome = ask(
        s,
        call.search_scope(frozenset({kb_id}), request.source_names),
        request.question,
        top_k=request.top_k,
        score_threshold=request.score_threshold,
        max_context_parents=request.max_context_parents,
    )
    current_call().note(
        result_count=len(outcome.retrieval.hits),
        retrieved=[h.chunk.ref_id for h in outcome.retrieval.hits],
        cited=outcome.used_refs,
    )
    level = "low" if outcome.no_answer else outcome.confidence.level
    note_answered(request.question, {kb_id}, question_outcome(outcome, level))
    context = "".join(e.context or e.text for e in outcome.evidence)
    charge_tokens(s, call.principal, estimate_tokens(request.question, context, outcome.answer))
    return json_response(200, outcome.response())


lambda_handler = http_handler(app, services)
