"""GET /v1/tasks/{task_id}: follow an ingestion or reindex until it succeeds or fails."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services
from citegate.platform.errors import TaskNotFound

app = make_resolver()


@app.get("/v1/tasks/<task_id>")
def get_task(task_id: str):  # type: ignore[no-untyped-def]
    s = services()
    call = authorized(app)
    task = s.tasks.get(task_id)
    kb = s.kbs.find(task.kb_id)
    if kb is None or kb.tenant_id != call.principal.tenant_id or not call.policy.allows_kb(kb.kb_id):
        raise TaskNotFound(f"task {task_id!r} not found", details={"task_id": task_id})
    view = s.ingestion.task_view(task)
    return json_response(200, view.model_dump(exclude_none=True, exclude={"children"}) | _children(view))


def _children(task):  # type: ignore[no-untyped-def]
    return {"children": task.children} if task.children else {}


lambda_handler = http_handler(app, services)
