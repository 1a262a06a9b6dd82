"""The operator console (ui/console) in Debian's Chromium against the real server (`citegate serve`).

One operator's session, screen by screen, through the same HTTP API and policy as any client: sign
in with the service token, create a knowledge base, upload a Markdown file and a PDF at once
(presigned PUTs with progress, then ingestion), watch both tasks succeed, read the PDF's chunks,
retrieve and ask in the playground, approve the knowledge base, close a feedback item a reader
sent, read the audit log, edit a policy (the page's and the API's validation), and create and
revoke an agent credential. Every screen is scanned with axe-core (no serious or critical
violation, light and dark) and saved as console-*.png (docs/screenshots with make screenshots).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import secrets
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser.widget_support import AXE, UI, chromium, require_chromium
from tests.e2e.conftest import ROOT, SCREENSHOTS, TOKEN, Server
from tests.support.oidc_issuer import DISCOVERY_PATH, JWKS_PATH, OidcIssuer, b64url

pytestmark = pytest.mark.e2e

DIST = UI / "dist" / "console"
KB = "console-e2e"
CLIENT_ID = "citegate-console"
AGENT = "console-bot"


def _build_console() -> None:
    """Build ui/dist/console when it is missing or older than its sources (esbuild: well under a
    second), so the test always drives the console as the sources say."""
    sources = [p for p in (UI / "console").rglob("*") if p.is_file()]
    built = DIST / "console.js"
    if built.exists() and all(p.stat().st_mtime <= built.stat().st_mtime for p in sources):
        return
    node = shutil.which("node")
    if node is None or not (UI / "node_modules" / "esbuild").exists():
        # As `make ui` does without npm: no Node.js, no console to test.
        pytest.skip("the console is not built and cannot be here (no Node.js or ui/node_modules): make ui")
    # The console alone (ui/console/build.mjs), so the widget's files are never rewritten under
    # a test that is reading them.
    script = (
        "import * as esbuild from 'esbuild'; import { build } from './console/build.mjs';"
        " await build(esbuild, 'dist');"
    )
    subprocess.run(
        [node, "--input-type=module", "-e", script], cwd=UI, check=True, capture_output=True, timeout=120
    )


class LoginIssuer(OidcIssuer):
    """The test issuer plus what a browser sign-in needs: an authorization endpoint that logs
    `user` in at once and redirects back with a code, and a token endpoint that accepts the code
    only with the PKCE verifier of its challenge (S256), answering with CORS as real issuers do."""

    def __init__(self, user: str) -> None:
        super().__init__()
        self.user = user
        self.codes: dict[str, dict[str, Any]] = {}
        self.exchanges: list[dict[str, Any]] = []

    def start(self) -> LoginIssuer:
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path == DISCOVERY_PATH:
                    self._json(200, issuer.discovery_document())
                elif url.path == JWKS_PATH:
                    self._json(200, issuer.jwks())
                elif url.path == "/authorize":
                    query = dict(urllib.parse.parse_qsl(url.query))
                    code = secrets.token_urlsafe(16)
                    issuer.codes[code] = query
                    back = f"{query['redirect_uri']}?code={code}&state={urllib.parse.quote(query['state'])}"
                    self.send_response(302)
                    self.send_header("Location", back)
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self._cors()
                self.end_headers()

            def do_POST(self) -> None:
                form = dict(
                    urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode())
                )
                issuer.exchanges.append(form)
                asked = issuer.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "").encode()
                challenge = b64url(hashlib.sha256(verifier).digest())
                if (
                    asked is None
                    or asked.get("code_challenge_method") != "S256"
                    or asked.get("code_challenge") != challenge
                    or asked.get("redirect_uri") != form.get("redirect_uri")
                    or asked.get("client_id") != form.get("client_id")
                ):
                    self._json(400, {"error": "invalid_grant"})
                    return
                token = issuer.issue(
                    issuer.user,
                    audience=asked["client_id"],
                    claims={"nonce": asked["nonce"], "roles": ["maintainer"]},
                )
                self._json(200, {"id_token": token, "token_type": "Bearer", "expires_in": 300})

            def _cors(self) -> None:
                self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin") or "*")
                self.send_header("Access-Control-Allow-Headers", "content-type")
                self.send_header("Access-Control-Allow-Methods", "GET, POST")

            def _json(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self._cors()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # type: ignore[assignment]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def discovery_document(self) -> dict[str, Any]:
        return {
            **super().discovery_document(),
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "code_challenge_methods_supported": ["S256"],
        }


class _Static(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The server with the console at /console/ (as `make serve` runs it), the same files from a
    loopback static server on another origin (as a CDN hosts them in AWS: the API's CORS applies),
    and an OIDC issuer people sign in at."""
    require_chromium()
    _build_console()
    handler = functools.partial(_Static, directory=str(DIST))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    static_origin = f"http://127.0.0.1:{httpd.server_address[1]}"
    issuer = LoginIssuer("alice").start()
    ingest_root = tmp_path_factory.mktemp("console-sources")
    server = Server(
        tmp_path_factory.mktemp("console") / "data",
        {
            "CITEGATE_LOCAL_INGEST_ROOT": str(ingest_root),
            "CITEGATE_ALLOWED_ORIGINS": static_origin,
            "CITEGATE_ANONYMOUS_IP_RATE_LIMIT": "1000",
            "CITEGATE_OIDC_ISSUER": issuer.url,
            "CITEGATE_OIDC_AUDIENCE": CLIENT_ID,
        },
    )
    try:
        server.start()
        yield {
            "api": server.url,
            "console": f"{server.url}/console/",
            "static_console": f"{static_origin}/",
            "issuer": issuer,
            "ingest_root": ingest_root,
        }
    finally:
        if server.process is not None:
            server.stop()
        httpd.shutdown()
        issuer.stop()


@pytest.fixture(scope="module")
def browser(stack: dict[str, Any]) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def _api(stack: dict[str, Any], token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=stack["api"], headers=headers, timeout=30)


def _axe(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is now (every impact; the test fails on serious
    and critical ones and reports the rest)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    results = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in results
    ]


def _screen(
    page: Any, name: str, found: dict[str, list[dict[str, Any]]], dark_screenshot: bool = False
) -> None:
    """Scan the screen in light and dark, and save its screenshot (light; also dark when asked)."""
    page.wait_for_timeout(50)
    found[name] = _axe(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"console-{name}.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    found[f"{name} (dark)"] = _axe(page)
    if dark_screenshot:
        page.screenshot(path=str(SCREENSHOTS / f"console-{name}-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")


def test_an_operator_runs_citegate_from_the_console(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860}, color_scheme="light")
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on("dialog", lambda dialog: dialog.accept())  # the confirmations of delete and revoke
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    violations: dict[str, list[dict[str, Any]]] = {}
    api = _api(stack)

    try:
        _operator_session(page, stack, api, violations)
    except Exception:
        # What the browser showed when it failed, for whoever reads the failure.
        page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        print(f"console at failure: {tmp_path / 'failure.png'}\n{page.locator('main').inner_text()[:3000]}")
        raise
    context.close()
    api.close()
    assert errors == [], errors
    print(
        "axe-core, violations by screen:",
        {screen: [v["id"] for v in found] for screen, found in violations.items()},
    )
    bad = {
        screen: [v for v in found if v["impact"] in ("serious", "critical")]
        for screen, found in violations.items()
    }
    bad = {screen: found for screen, found in bad.items() if found}
    assert not bad, f"axe-core: serious or critical violations: {json.dumps(bad, indent=1)}"


def test_a_maintainer_signs_in_with_oidc_and_gets_only_what_their_policy_grants(
    stack: dict[str, Any], browser: Any
) -> None:
    """Authorization code with PKCE against the issuer; the ID token is then an ordinary bearer
    credential: the console can do only what the person's policy (human:*) lets any client do."""
    issuer: LoginIssuer = stack["issuer"]
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    # From another origin than the API's, as the console is hosted in AWS.
    page.goto(stack["static_console"])
    page.get_by_text("API location").click()
    page.get_by_label("API base URL").fill(stack["api"])
    page.get_by_label("Issuer URL").fill(issuer.url)
    page.get_by_label("Client ID").fill(CLIENT_ID)
    page.get_by_role("button", name="Sign in with OIDC").click()
    page.get_by_text("Signed in as human:alice").wait_for()
    assert "code=" not in page.url  # the code is not left in the address bar or history
    (exchange,) = issuer.exchanges
    assert exchange["grant_type"] == "authorization_code" and len(exchange["code_verifier"]) >= 43
    # The default people's policy grants no knowledge-base listing: the API says so, the console shows it.
    page.get_by_role("alert").filter(has_text="forbidden").wait_for()
    assert "HTTP 403" in page.get_by_role("alert").first.inner_text()
    token = page.evaluate("JSON.parse(sessionStorage.getItem('citegate.console.session')).token")
    assert page.evaluate("Object.keys(localStorage).length") == 0
    with _api(stack, token=token) as person:
        assert person.get("/v1/me").json()["principal"] == {
            "type": "human",
            "id": "alice",
            "tenant_id": "default",
        }
    context.close()


def test_a_revoked_credential_signs_the_console_out(stack: dict[str, Any], browser: Any) -> None:
    """An agent token signs in like the service token, sees what its policy grants, and is signed
    out with the API's 401 as soon as it is revoked: the console holds no session of its own."""
    with _api(stack) as admin:
        admin.put(
            "/admin/policies/agent:console-reader", json={"tools": ["rag_list_kb"], "knowledge_bases": ["*"]}
        )
        issued = admin.post("/admin/agents/console-reader/credentials", json={"kind": "token"}).json()
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(stack["console"])
    page.get_by_label("Bearer token").fill(issued["secret"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_text("Signed in as agent:console-reader").wait_for()
    page.get_by_role("heading", name="All knowledge bases").wait_for()
    with _api(stack) as admin:
        revoked = admin.delete(f"/admin/agents/console-reader/credentials/{issued['credential_id']}")
        assert revoked.status_code == 200, revoked.text
    page.get_by_role("button", name="Refresh").click()
    page.get_by_role("alert").filter(has_text="unauthorized").wait_for()
    page.get_by_label("Bearer token").wait_for()
    assert page.evaluate("sessionStorage.length") == 0
    context.close()


def test_an_operator_follows_a_folder_from_the_sources_tab(stack: dict[str, Any], browser: Any) -> None:
    """The sources tab of a knowledge base (issue 29): add a folder source, sync it now, read its
    runs with their counts; a file deleted from the folder leaves the knowledge base on the next sync."""
    from playwright.sync_api import expect

    folder = Path(stack["ingest_root"]) / "handbook"
    folder.mkdir()
    text = "# {0}\n\n" + "The {0} chapter explains how the keeper logs the weather each night. " * 8
    for name in ("tides", "storms"):
        (folder / f"{name}.md").write_text(text.format(name))
    with _api(stack) as admin:
        assert admin.post("/v1/kb", json={"kb_id": "console-sources", "name": "Handbook"}).status_code == 201
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    violations: dict[str, list[dict[str, Any]]] = {}
    page.goto(stack["console"])
    page.get_by_label("Bearer token").fill(TOKEN)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_text("Signed in as service:rag-service").wait_for()
    page.goto(stack["console"] + "#/kb/console-sources")
    page.get_by_role("link", name="Sources", exact=True).click()
    page.get_by_role("heading", name="Sources of console-sources").wait_for()
    page.get_by_text("No sources yet.").wait_for()
    page.get_by_label("Source name").fill("handbook")
    page.get_by_label("Kind").select_option("folder")
    page.get_by_label("Folder").fill(str(folder))
    page.get_by_role("button", name="Add source").click()
    page.get_by_role("status").filter(has_text="Added source handbook").wait_for()
    page.get_by_role("button", name="Sync now handbook").click()
    page.get_by_role("status").filter(has_text="Synced handbook: succeeded, 2 added").wait_for()
    expect(page.locator("tr.run")).to_have_count(1)
    assert "2 added, 0 changed, 0 unchanged, 0 deleted" in page.locator("tr.run").first.inner_text()
    (folder / "storms.md").unlink()
    page.get_by_role("button", name="Sync now handbook").click()
    page.get_by_role("status").filter(has_text="1 unchanged, 1 deleted").wait_for()
    expect(page.locator("tr.run")).to_have_count(2)
    _screen(page, "sources", violations)
    with _api(stack) as admin:
        names = [d["source_name"] for d in admin.get("/v1/kb/console-sources/documents").json()["documents"]]
    assert names == ["tides.md"]
    context.close()
    assert errors == [], errors
    bad = {k: [v for v in found if v["impact"] in ("serious", "critical")] for k, found in violations.items()}
    assert not any(bad.values()), f"axe-core: serious or critical violations: {json.dumps(bad, indent=1)}"


def _operator_session(
    page: Any, stack: dict[str, Any], api: httpx.Client, violations: dict[str, list[dict[str, Any]]]
) -> None:
    from playwright.sync_api import expect

    # Sign in: a wrong token is refused with the API's own code; the right one opens the console.
    page.goto(stack["console"])
    page.get_by_label("Bearer token").wait_for()
    page.get_by_label("Bearer token").fill("not-the-token")
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_role("alert").filter(has_text="unauthorized").wait_for()
    _screen(page, "signin", violations)
    page.get_by_label("Bearer token").fill(TOKEN)
    page.get_by_label("Bearer token").press("Enter")  # the keyboard signs in
    page.get_by_text("Signed in as service:rag-service").wait_for()
    assert page.evaluate("Object.keys(localStorage).length") == 0  # the token is in sessionStorage only

    # Create a knowledge base; it starts as working.
    page.get_by_label("Name", exact=True).fill("Console E2E")
    page.get_by_label("Id (optional)").fill(KB)
    page.get_by_role("button", name="Create", exact=True).click()
    row = page.get_by_role("row").filter(has_text=KB)
    row.get_by_text("working").wait_for()
    _screen(page, "knowledge-bases", violations)

    # Drop two files at once (one PDF) on the drop zone, pick a third with the keyboard through
    # the file chooser, and watch every task succeed.
    page.get_by_role("link", name="Console E2E").click()
    page.get_by_role("heading", name="Upload documents").wait_for()
    dropped = [
        {
            "name": name,
            "type": kind,
            "data": base64.b64encode((ROOT / "samples" / name).read_bytes()).decode(),
        }
        for name, kind in (("solar-system.md", "text/markdown"), ("lighthouses.pdf", "application/pdf"))
    ]
    page.locator(".dropzone").evaluate(
        """(zone, files) => {
            const transfer = new DataTransfer();
            for (const f of files) {
                const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
                transfer.items.add(new File([bytes], f.name, {type: f.type}));
            }
            const drop = {dataTransfer: transfer, bubbles: true, cancelable: true};
            zone.dispatchEvent(new DragEvent("drop", drop));
        }""",
        dropped,
    )
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Choose files").press("Enter")  # focus it, press Enter
    chooser.value.set_files(str(ROOT / "samples" / "tea-guide.txt"))
    page.wait_for_function(
        "document.querySelectorAll('li.upload[data-phase=\"succeeded\"]').length === 3", timeout=90_000
    )
    assert page.locator("li.upload progress").evaluate_all("els => els.map(e => e.value)") == [1, 1, 1]
    docs = api.get(f"/v1/kb/{KB}/documents").json()["documents"]
    assert sorted(d["source_name"] for d in docs) == ["lighthouses.pdf", "solar-system.md", "tea-guide.txt"]
    page.get_by_role("row").filter(has_text="lighthouses.pdf").get_by_text("indexed").wait_for()

    # Delete one document, reindex the rest: both through the API, both reported on the page.
    page.get_by_role("button", name="Delete tea-guide.txt").click()
    page.get_by_role("status").filter(has_text="Deleted tea-guide.txt").wait_for()
    expect(page.get_by_role("row").filter(has_text="tea-guide.txt")).to_have_count(0)
    page.get_by_role("button", name="Reindex all").click()
    page.get_by_role("status").filter(has_text="Reindexing 2 document(s)").wait_for()
    reindex = (
        page.get_by_role("status").filter(has_text="Reindexing").inner_text().split("task ")[-1].rstrip(".")
    )
    for _ in range(600):  # the page polls the documents while they are queued; so does the test
        if api.get(f"/v1/tasks/{reindex}").json()["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    assert api.get(f"/v1/tasks/{reindex}").json()["status"] == "succeeded"
    expect(page.get_by_role("row").filter(has_text="indexed")).to_have_count(2, timeout=30_000)
    _screen(page, "documents", violations)

    # The chunk viewer: the PDF's parents and their children with ref ids, as the API lists them.
    pdf = next(d for d in docs if d["source_name"] == "lighthouses.pdf")
    page.get_by_role("link", name="lighthouses.pdf").click()
    page.get_by_role("heading", name="lighthouses.pdf").wait_for()
    page.locator("li.parent").first.wait_for()
    chunks = api.get(f"/v1/kb/{KB}/documents/{pdf['document_id']}/chunks").json()
    refs = page.locator("code.ref").all_text_contents()  # collapsed parents included
    assert refs == [c["ref_id"] for c in chunks["children"]] and refs
    assert "page" in page.locator("li.parent").first.inner_text()  # PDF page numbers are kept
    _screen(page, "chunks", violations)

    # The playground: hits with scores and the fusion stats, then an answer with resolved citations.
    page.get_by_role("link", name="Playground").click()
    page.get_by_label("Knowledge base").select_option(KB)
    page.get_by_label("Query or question").fill("Which lighthouse was one of the seven wonders?")
    page.get_by_role("button", name="Retrieve").click()
    page.locator("li.hit").first.wait_for()
    assert "min_max" in page.locator("table.stats").first.inner_text()
    # Hits come in the order of the score the list says it follows (the rank score); the
    # relevance beside it is the absolute estimate, and the page says why the two orders differ.
    ranks = [float(r) for r in page.locator("li.hit .rank-score").all_inner_texts()]
    assert ranks and ranks == sorted(ranks, reverse=True), ranks
    relevance = [float(r) for r in page.locator("li.hit .relevance").all_inner_texts()]
    assert len(relevance) == len(ranks) and all(0 < r <= 1 for r in relevance)
    assert "Ranked by the rank score" in page.get_by_test_id("hit-order").inner_text()
    page.get_by_role("button", name="Ask").click()
    page.get_by_role("heading", name="Citations (resolve_refs)").wait_for()
    answer = page.get_by_test_id("answer").inner_text()
    assert "Alexandria" in answer or "Pharos" in answer, answer
    cited = page.locator("ol.citations li code.ref").all_inner_texts()
    assert cited and all(ref.startswith("r_") for ref in cited)
    assert "lighthouses.pdf" in page.locator("ol.citations").inner_text()
    _screen(page, "playground", violations, dark_screenshot=True)

    # Approve the knowledge base (readers see approved knowledge bases only).
    page.get_by_role("link", name="Knowledge bases").click()
    page.get_by_role("button", name="Approve Console E2E").click()
    page.get_by_role("row").filter(has_text=KB).get_by_text("approved").wait_for()
    assert api.get(f"/v1/kb/{KB}").json()["status"] == "approved"

    # A reader's no-answer feedback, sent as the widget sends it (anonymous), arrives and is closed.
    with _api(stack, token=None) as reader:
        sent = reader.post(
            "/agent/tools/create_feedback",
            json={
                "eventType": "no_answer",
                "question": "Who painted the lighthouse keeper's cat?",
                "title": "No answer: lighthouse keeper's cat",
                "comment": "asked from the docs page",
            },
        )
        assert sent.status_code in (200, 201), sent.text
    page.get_by_role("link", name="Feedback").click()
    item = page.locator("li.record").filter(has_text="lighthouse keeper's cat")
    item.wait_for()
    assert item.get_by_test_id("count").inner_text() == "1" and "anonymous (1)" in item.inner_text()
    _screen(page, "feedback", violations)
    item.get_by_label("Resolution").fill("added a page about the keeper's cat")
    item.get_by_role("button", name="Close “No answer: lighthouse keeper's cat”").click()
    page.get_by_role("status").filter(has_text="Closed").wait_for()
    expect(page.locator("li.record").filter(has_text="lighthouse keeper's cat")).to_have_count(0)
    closed = api.get("/admin/feedback", params={"status": "closed"}).json()["records"]
    assert [r["resolution"] for r in closed if "keeper" in (r.get("title") or "")] == [
        "added a page about the keeper's cat"
    ]

    # The audit log: the reader's call, found by caller and route, with its decision.
    page.get_by_role("link", name="Audit log").click()
    page.get_by_label("Caller").fill("anonymous")
    page.get_by_label("Route contains").fill("create_feedback")
    page.get_by_label("Decision").select_option("allow")
    page.get_by_role("button", name="Apply").click()
    audit_row = page.locator("table.audit tbody tr").filter(has_text="POST /agent/tools/create_feedback")
    audit_row.first.wait_for()
    assert all("anonymous" in text for text in page.locator("table.audit tbody tr").all_inner_texts())
    page.get_by_label("Until").fill("2000-01-01T00:00")  # the time window is the API's filter
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("No records match.").wait_for()
    page.get_by_label("Until").fill("")
    page.get_by_role("button", name="Apply").click()
    audit_row.first.wait_for()
    _screen(page, "audit", violations)

    # Policies: the page refuses malformed JSON, the API refuses an invalid field (its code shown).
    page.get_by_role("link", name="Policies").click()
    page.get_by_label("New policy for").fill(f"agent:{AGENT}")
    page.get_by_role("button", name="Start").click()
    editor = page.get_by_label("Policy (JSON, replaced whole)")
    template = json.loads(editor.input_value())
    editor.fill("{not json")
    page.get_by_text("not valid JSON").wait_for()
    assert page.get_by_role("button", name="Save policy").is_disabled()
    editor.fill(json.dumps({**template, "rate_limit_per_minute": 0}))
    page.get_by_role("button", name="Save policy").click()
    page.get_by_role("alert").filter(has_text="invalid_request").wait_for()
    assert "rate_limit_per_minute" in page.locator("ul.problems").inner_text()
    editor.fill(json.dumps({**template, "tools": ["me", "rag_list_kb"], "description": "console test bot"}))
    page.get_by_role("button", name="Save policy").click()
    page.get_by_text(f"Saved the policy of agent:{AGENT}.").wait_for()
    assert api.get(f"/admin/policies/agent:{AGENT}").json()["tools"] == ["me", "rag_list_kb"]
    _screen(page, "policies", violations)

    # Agent credentials: the secret is shown once and works; revoked, it stops working at once.
    page.get_by_role("link", name="Agent credentials").click()
    page.get_by_label("Agent id").fill(AGENT)
    page.get_by_role("button", name="Show credentials").click()
    page.get_by_label("Description").fill("made by the console test")
    page.get_by_role("button", name="Create", exact=True).click()
    secret = page.locator("#new-secret").input_value()
    assert secret.startswith("cgat_")
    with _api(stack, token=secret) as bot:
        assert bot.get("/v1/me").json()["principal"]["id"] == AGENT
        _screen(page, "credentials", violations)
        page.get_by_role("button", name="I have copied it").click()
        expect(page.locator("#new-secret")).to_have_count(0)  # gone from the page, never shown again
        page.get_by_role("button", name="Revoke").click()
        page.get_by_role("row").filter(has_text="made by the console test").get_by_text("revoked").wait_for()
        refused = bot.get("/v1/me")
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"

    # Sign out forgets the credential.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Bearer token").wait_for()
    assert page.evaluate("sessionStorage.length") == 0
