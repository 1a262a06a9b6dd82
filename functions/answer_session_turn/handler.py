"""POST /answer/sessions/{sessionId}/turns: a follow-up in the session's scope, or a narrower one
(token, owner, scope and expiry checked on every turn)."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/answer/sessions/<sessionId>/turns")
def add_turn(sessionId: str):  # type: ignore[no-untyped-def]
    from citegate.answers.answer_api import answer_question
    from citegate.answers.schemas.answer import TurnBody
    from citegate.answers.sessions import SESSION_TOKEN_HEADER, follow_up_query, turn_record, turn_scope
    from citegate.governance.calls import current_call

    s = services()
    body = parse_body(app, TurnBody)
    # The caller is re-authorized on every turn; the session's scope is the most it may see.
    call = govern(app, requested=body.scope)
    token = app.current_event.headers.get(SESSION_TOKEN_HEADER)
    record = current_call()
    record.note(session_id=sessionId)
    session = s.sessions.open(sessionId, token, call.principal)
    call.scope = turn_scope(session, body.scope, call)
    record.note(effective_scope=call.scope.model_dump(exclude_none=True))
    asked = answer_question(
        s,
        call,
        body.question,
        retrieval_query=follow_up_query(session, body.question),
        require_citations=body.requireCitations,
    )
    session = s.sessions.add_turn(session, turn_record(body.question, asked.result))
    result = {
        **asked.result.model_dump(),
        "sessionId": sessionId,
        "turn": session["turn_count"],
        "earlierCitations": session.get("earlier_citations", []),
    }
    return json_response(200, result)


lambda_handler = http_handler(app, services, family="answer")
