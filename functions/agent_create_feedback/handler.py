"""POST /agent/tools/create_feedback: report a question the knowledge base could not answer.

Deduplicated by the content's dedupeKey (the open record counts the report), idempotent on the
caller's idempotencyKey. Anonymous readers may report too: the public-read policy grants it.
"""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body, request_id
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/create_feedback")
def create_feedback():  # type: ignore[no-untyped-def]
    from citegate.answers.feedback import feedback_service, note_report
    from citegate.answers.schemas.feedback import FeedbackBody
    from citegate.governance.calls import current_call

    body = parse_body(app, FeedbackBody)
    call = govern(app, requested=body.scope)
    current_call().note(query=body.question, purpose=body.caller.purpose)
    result, replayed = feedback_service(services()).report(
        "feedback",
        body,
        call.principal,
        request_id(app),
        remaining_ms=app.lambda_context.get_remaining_time_in_millis(),
    )
    if not replayed:
        note_report(services(), call, body, "feedback", result)
    headers = {"Idempotency-Replayed": "true"} if replayed else None
    return json_response(200, result.model_dump(mode="json"), headers=headers)


lambda_handler = http_handler(app, services, family="answer")
