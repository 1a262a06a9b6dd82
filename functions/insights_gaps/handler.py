"""GET /v1/insights/gaps?kb=&since=&until=&kind=&caller=&limit=&questions=&format=json|csv|md: the questions
the documents do not answer, grouped by meaning and ranked by count (docs/insights.md)."""

from citegate.api.http import authorized, http_handler, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/insights/gaps")
def list_gaps():  # type: ignore[no-untyped-def]
    from citegate.api.insights import filters_of, limit_of, respond, window_of
    from citegate.insights.export import gaps_text
    from citegate.insights.service import gaps

    call = authorized(app)
    s = services()
    view = gaps(
        s,
        call,
        window_of(app, s),
        filters_of(app, call),
        limit=limit_of(app),
        questions=limit_of(app, "questions", 10),
    )
    return respond(app, view, gaps_text, "gaps")


lambda_handler = http_handler(app, services)
