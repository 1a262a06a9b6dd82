"""POST /agent/tools/create_improvement_task: ask maintainers to close a knowledge gap.

Same deduplication and idempotency as create_feedback; callers need the improvement_task write
action, so anonymous readers cannot open tasks.
"""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body, request_id
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/create_improvement_task")
def create_improvement_task():  # type: ignore[no-untyped-def]
    from citegate.answers.feedback import feedback_service, note_report
    from citegate.answers.schemas.feedback import ImprovementTaskBody
    from citegate.governance.calls import current_call

    body = parse_body(app, ImprovementTaskBody)
    call = govern(app, requested=body.scope)
    current_call().note(query=body.question, purpose=body.caller.purpose)
    result, replayed = feedback_service(services()).report(
        "improvement_task",
        body,
        call.principal,
        request_id(app),
        remaining_ms=app.lambda_context.get_remaining_time_in_millis(),
    )
    if not replayed:
        note_report(services(), call, body, "improvement_task", result)
    headers = {"Idempotency-Replayed": "true"} if replayed else None
    return json_response(200, result.model_dump(mode="json"), headers=headers)


lambda_handler = http_handler(app, services, family="answer")
