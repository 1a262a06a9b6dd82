"""GET /healthz: liveness and backend checks; no token needed."""

from citegate.api.http import http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/healthz")
def healthz():  # type: ignore[no-untyped-def]
    from citegate.api.health import health

    report = health(services())
    return json_response(200 if report["status"] == "ok" else 503, report)


lambda_handler = http_handler(app, services, audited=False)
