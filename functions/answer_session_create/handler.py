"""POST /answer/sessions: open a multi-turn session (its token is returned once)."""

from citegate.container import services
from citegate.http.api import govern, http_handler, json_response, make_resolver, parse_body

app = make_resolver("answer")


@app.post("/answer/sessions")
def create_session():  # type: ignore[no-untyped-def]
    from citegate.answer_api import answer_question
    from citegate.models.answer import SessionCreateBody
    from citegate.sessions import SESSION_TOKEN_HEADER, turn_record

    s = services()
    body = parse_body(app, SessionCreateBody, allow_empty=True)
    call = govern(app, requested=body.scope)
    session, token = s.sessions.create(call.principal, call.scope)
    reply = {
        "sessionId": session["session_id"],
        "sessionToken": token,
        "tokenHeader": SESSION_TOKEN_HEADER,
        "owner": {"type": call.principal.type, "id": call.principal.id},
        "scope": session["scope"],
        "limits": session["limits"],
        "createdAt": session["created_at"],
        "expiresAt": session["expires_at"],
    }
    if body.question:
        asked = answer_question(s, call, body.question, require_citations=body.requireCitations)
        s.sessions.add_turn(session, turn_record(1, body.question, asked.result))
        reply["turn"] = {**asked.result.model_dump(), "sessionId": session["session_id"], "turn": 1}
    return json_response(201, reply)


lambda_handler = http_handler(app, family="answer")
