"""POST /answer/sessions/{sessionId}/turns: a follow-up in the session's scope (token, owner, expiry)."""

from citegate.container import services
from citegate.http.api import govern, http_handler, json_response, make_resolver, parse_body

app = make_resolver("answer")


@app.post("/answer/sessions/<sessionId>/turns")
def add_turn(sessionId: str):  # type: ignore[no-untyped-def]
    from citegate.answer_api import answer_question
    from citegate.governance import current_call
    from citegate.models.answer import TurnBody
    from citegate.sessions import SESSION_TOKEN_HEADER, follow_up_query, turn_record, turn_scope

    s = services()
    body = parse_body(app, TurnBody)
    # The caller is re-authorized on every turn; the session's scope is the most it may see.
    call = govern(app, requested=body.scope)
    token = app.current_event.headers.get(SESSION_TOKEN_HEADER)
    session = s.sessions.open(sessionId, token, call.principal)
    current_call().note(session_id=sessionId)
    turn_scope(session, body.scope, call)
    from citegate.policy.model import EffectiveScope

    call.scope = EffectiveScope.model_validate(session["scope"])
    number = len(session["turns"]) + 1 + len((session.get("earlier_citations") and [0]) or [])
    asked = answer_question(
        s,
        call,
        body.question,
        retrieval_query=follow_up_query(session, body.question),
        require_citations=body.requireCitations,
    )
    session = s.sessions.add_turn(session, turn_record(number, body.question, asked.result))
    result = {
        **asked.result.model_dump(),
        "sessionId": sessionId,
        "turn": number,
        "earlierCitations": session.get("earlier_citations", []),
    }
    return json_response(200, result)


lambda_handler = http_handler(app, family="answer")
