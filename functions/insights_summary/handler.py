"""GET /v1/insights/summary?kb=&since=&until=&caller=&format=json|csv|md: questions, answer and
decline rates (by reason), the confidence mix, the most cited pages, per day (docs/insights.md)."""

from citegate.api.http import authorized, http_handler, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/insights/summary")
def get_summary():  # type: ignore[no-untyped-def]
    from citegate.api.insights import filters_of, respond, window_of
    from citegate.insights.export import summary_text
    from citegate.insights.service import summary

    call = authorized(app)
    s = services()
    view = summary(s, call, window_of(app, s), filters_of(app, call, kinds=False))
    return respond(app, view, summary_text, "summary")


lambda_handler = http_handler(app, services)
