"""POST /answer/sessions: open a multi-turn session (spec 000 section 7's AnswerSession; its token
is returned once, here)."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/answer/sessions")
def create_session():  # type: ignore[no-untyped-def]
    from citegate.answers.answer_api import answer_question
    from citegate.answers.schemas.answer import AnswerSession, SessionCreateBody, SessionTurn
    from citegate.answers.sessions import turn_record, wire_scope
    from citegate.governance.calls import current_call

    s = services()
    body = parse_body(app, SessionCreateBody, allow_empty=True)
    call = govern(app, requested=body.scope)
    # The first question is answered before the session exists: if answering fails, no session is
    # left behind whose token the caller never received.
    asked = (
        answer_question(s, call, body.question, require_citations=body.requireCitations)
        if body.question
        else None
    )
    session, token = s.sessions.create(call.principal, call.scope)
    current_call().note(session_id=session["session_id"])
    turns = []
    if body.question and asked is not None:
        session = s.sessions.add_turn(session, turn_record(body.question, asked.result))
        first = {
            **asked.result.model_dump(),
            "sessionId": session["session_id"],
            "turn": session["turn_count"],
        }
        turns.append(SessionTurn(**first, question=body.question))
    reply = AnswerSession(
        sessionId=session["session_id"],
        sessionToken=token,
        sessionTokenHash=session["session_token_hash"],
        owner={"type": call.principal.type, "id": call.principal.id},
        scope=wire_scope(call.scope),
        turns=turns,
        limits=session["limits"],
        createdAt=session["created_at"],
        expiresAt=session["expires_at"],
    )
    return json_response(201, reply.model_dump())


lambda_handler = http_handler(app, services, family="answer")
