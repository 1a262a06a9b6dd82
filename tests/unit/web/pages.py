"""A loopback-only HTTP server with the pages the web tests need (never any other host)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ARTICLE = """<!doctype html><html><head><title>Citegate Field Notes</title></head><body>
<nav class="menu"><a href="/">Home</a> | <a href="/pricing">Pricing</a> | <a href="/login">Log in</a></nav>
<div class="ad banner">BUY CHEAP WIDGETS TODAY</div>
<article id="main"><h1>Reading the web safely</h1>
<p>Citegate reads public pages and turns their main content into Markdown for agents.
Every address is checked before any connection is made, and again after every redirect.</p>
<p class="lead">The reader keeps headings, paragraphs and links, and drops navigation and adverts
so that the text an agent cites is the text the author wrote.</p>
<aside class="related">Related: nothing to see here</aside>
</article>
<footer>Copyright 2025 Example Corp. All rights reserved.</footer></body></html>"""

SCRIPTS = """<html><head><title>Active content</title><script>document.cookie='x'</script></head><body>
<div id="content"><h1>Scripts are dropped</h1>
<p onclick="steal()" onmouseover="steal()">This paragraph has event handlers that must not survive
the extraction into Markdown, whatever the reader does with the rest of the page.</p>
<p>A <a href="javascript:alert(document.domain)">dangerous link</a>, a
<a href="JaVaScRiPt:alert(1)">mixed-case one</a> and a <a href="https://example.org/safe">safe link</a>
are in this sentence, which is long enough for the extractor to keep it.</p>
<script>alert("inline")</script><img src="x" onerror="alert(1)">
<p>&lt;script&gt;alert('escaped')&lt;/script&gt; appears as text in this paragraph of the page.</p>
</div></body></html>"""

# A single-page app: the shell says "Loading", the article arrives from /spa-data after a delay.
SPA = """<!doctype html><html><head><title>Late App</title></head><body>
<div id="app"><p>Loading...</p></div><script src="/spa.js"></script></body></html>"""
SPA_JS = """setTimeout(function () {
  fetch("/spa-data").then(function (r) { return r.json(); }).then(function (data) {
    document.getElementById("app").innerHTML = '<article id="story"><h1>' + data.heading + '</h1>'
      + data.paragraphs.map(function (p) { return "<p>" + p + "</p>"; }).join("")
      + '<p class="promo">Subscribe to our newsletter for more stories like this one today.</p>'
      + '<p onclick="steal()">A <a href="javascript:alert(1)">script link</a> sits in this rendered'
      + ' sentence, which is long enough for the extractor to keep it.</p></article>';
  });
}, %(delay)d);"""
SPA_DATA = {
    "heading": "Rendered after a delay",
    "paragraphs": [
        "This paragraph was not in the HTML the server sent: a script inserted it into the page.",
        "A reader that does not run scripts sees only the loading message, never these sentences.",
    ],
}
# Scripts and tags that try to reach internal addresses from inside the browser.
SSRF = """<!doctype html><html><head><title>Probe</title>
<link rel="stylesheet" href="http://10.0.0.8/style.css"></head><body>
<img src="http://169.254.169.254/latest/meta-data/iam.png"><iframe src="http://10.0.0.8/"></iframe>
<script src="http://[fd00:ec2::254]/x.js"></script>
<div id="results"></div><script>
var targets = [
  "http://169.254.169.254/latest/meta-data/",
  "http://10.0.0.8/",
  "http://internal.test/",
  "http://127.0.0.1:%(port)d/article",
  "http://[::ffff:127.0.0.1]:%(port)d/article",
  "/redirect?to=http://169.254.169.254/latest/meta-data/",
  "/redirect?to=http://127.0.0.1:%(port)d/article",
  "/spa-data"
];
try { new WebSocket("ws://10.0.0.8/socket"); } catch (e) {}
Promise.allSettled(targets.map(function (t) { return fetch(t).then(function (r) { return r.text(); }); }))
  .then(function (results) {
    var items = results.map(function (r, i) { return "<li>target " + i + " " + r.status + "</li>"; });
    document.getElementById("results").innerHTML =
      '<article id="done"><h1>Probe results</h1><ul>' + items.join("") + "</ul></article>";
  });
</script></body></html>"""
# The page's own script navigates to an internal address (through a redirect).
NAVIGATES = """<!doctype html><html><head><title>Leaving</title></head><body><p>Leaving soon.</p>
<script>setTimeout(function () {
  location.href = "/redirect?to=http://169.254.169.254/latest/meta-data/";
}, 100);</script></body></html>"""

# A few hundred bytes of HTML whose script grows the DOM past any small cap.
GROWS = """<!doctype html><html><head><title>Grows</title></head><body><script>
var rows = [];
for (var i = 0; i < %(rows)d; i++) { rows.push("<p>Row " + i + " of a page that grows in the browser.</p>"); }
document.body.insertAdjacentHTML("beforeend", '<article id="grown">' + rows.join("") + "</article>");
</script></body></html>"""


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.hits: dict[str, int] = {}
        self.conditional: list[dict[str, str]] = []
        self.headers: dict[str, dict[str, str]] = {}
        self.queries: dict[str, dict[str, list[str]]] = {}
        self.etag_version = "v1"


def _handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(
            self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8", **extra: str
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in extra.items():
                self.send_header(key.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            with state.lock:
                state.hits[path] = state.hits.get(path, 0) + 1
                state.headers[path] = {k.lower(): v for k, v in self.headers.items()}
                state.queries[path] = query
            if path == "/article":
                self._send(200, ARTICLE.encode())
            elif path == "/scripts":
                self._send(200, SCRIPTS.encode())
            elif path == "/spa":
                self._send(200, SPA.encode())
            elif path == "/spa.js":
                delay = int(query.get("delay", ["400"])[0])
                self._send(200, (SPA_JS % {"delay": delay}).encode(), "application/javascript")
            elif path == "/spa-data":
                self._send(200, json.dumps(SPA_DATA).encode(), "application/json")
            elif path == "/ssrf":
                self._send(200, (SSRF % {"port": self.server.server_address[1]}).encode())
            elif path == "/grows":
                rows = int(query.get("rows", ["10"])[0])
                self._send(200, (GROWS % {"rows": rows}).encode())
            elif path == "/navigates":
                self._send(200, NAVIGATES.encode())
            elif path == "/text":
                self._send(200, b"Plain notes\n\nJust text, no markup at all.", "text/plain; charset=utf-8")
            elif path == "/latin1":
                body = (
                    "<html><head><title>Caf\u00e9</title></head><body><article><p>"
                    + ("Un caf\u00e9 cr\u00e8me \u00e0 la terrasse, s'il vous pla\u00eet. " * 8)
                    + "</p></article></body></html>"
                )
                self._send(200, body.encode("iso-8859-1"), "text/html; charset=iso-8859-1")
            elif path == "/pdf":
                self._send(200, b"%PDF-1.4 fake", "application/pdf")
            elif path == "/missing":
                self._send(404, b"not here")
            elif path == "/big":
                # Chunked, no Content-Length: the cap must hold while streaming.
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"<p>" + b"x" * 65530 + b"</p>"
                try:
                    for _ in range(96):  # about 6 MB
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
            elif path == "/big-declared":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(6 * 1024 * 1024))
                self.end_headers()
            elif path == "/slow":
                time.sleep(float(query.get("s", ["3"])[0]))
                self._send(200, ARTICLE.encode())
            elif path == "/redirect":
                self.send_response(302)
                self.send_header("Location", query["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/loop":
                n = int(query.get("n", ["0"])[0])
                self.send_response(302)
                self.send_header("Location", f"/loop?n={n + 1}")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/etag":
                etag = f'"{state.etag_version}"'
                with state.lock:
                    state.conditional.append(
                        {k: v for k, v in self.headers.items() if k.lower().startswith("if-")}
                    )
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                body = ARTICLE.replace("Reading the web safely", f"Version {state.etag_version}")
                self._send(200, body.encode(), ETag=etag, Last_Modified="Wed, 01 Jan 2025 00:00:00 GMT")
            elif path == "/concurrent":
                with state.lock:
                    state.in_flight += 1
                    state.max_in_flight = max(state.max_in_flight, state.in_flight)
                time.sleep(0.3)
                with state.lock:
                    state.in_flight -= 1
                self._send(200, ARTICLE.encode())
            elif path == "/searxng/search":
                q = query.get("q", [""])[0]
                if query.get("format") != ["json"]:
                    self._send(403, b"format not enabled")
                    return
                results = [
                    {
                        "url": f"https://docs.example.com/{i}",
                        "title": f"{q} result {i}",
                        "content": f"snippet {i} for {q}",
                        "engine": "google",
                        "publishedDate": "2025-01-01T00:00:00Z" if i == 1 else None,
                    }
                    for i in range(1, 4)
                ] + [{"url": "https://other.test/x", "title": "other", "content": "elsewhere"}]
                payload = {"query": q, "number_of_results": 1250, "results": results}
                self._send(200, json.dumps(payload).encode(), "application/json")
            elif path in ("/jina/", "/jina"):
                if self.headers.get("Authorization") != "Bearer jina-key":
                    self._send(401, b'{"code":401}', "application/json")
                    return
                q = query.get("q", [""])[0]
                data = [
                    {"title": f"{q} jina {i}", "url": f"https://news.example.net/{i}", "description": f"d{i}"}
                    for i in range(1, 3)
                ]
                self._send(200, json.dumps({"code": 200, "data": data}).encode(), "application/json")
            elif path == "/broken-json/search":
                self._send(200, b"<html>not json</html>", "application/json")
            elif path == "/failing/search":
                self._send(502, b"bad gateway")
            elif path == "/limited/search":
                self._send(429, b"slow down", Retry_After="42")
            elif path == "/slow/search":
                time.sleep(float(query.get("s", ["3"])[0]))
                self._send(200, b'{"results": []}', "application/json")
            else:
                self._send(404, b"no such page")

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up early (size cap, timeouts) are what the tests provoke


@contextmanager
def serve() -> Iterator[tuple[str, State]]:
    state = State()
    server = _QuietServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
