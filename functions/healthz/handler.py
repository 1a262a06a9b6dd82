"""GET /healthz: liveness and backend checks; no token needed."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver

app = make_resolver()


@app.get("/healthz")
def healthz():  # type: ignore[no-untyped-def]
    from citegate.health import health

    report = health(services())
    return json_response(200 if report["status"] == "ok" else 503, report)


lambda_handler = http_handler(app, audited=False)
