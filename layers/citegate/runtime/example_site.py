"""The example documentation site the local gateway serves at /example/: the sample corpus
(samples/*.md, *.txt) as pages that embed the widget, the way a Docusaurus site would.

Each page's headings carry the ids the ingestion gives their sections (the same `_sections`), so a
citation's `url#anchor` lands on the cited section. `make demo` ingests the same files with
`ingest_metadata`: project, path (`example/<slug>`), version and url, which is what the widget's
scope (the page's section, `example`) and its citation links rely on.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from citegate.knowledge.ingest.chunking import _sections  # the anchors the chunks carry

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
SECTION = "example"
PROJECT = "citegate-samples"
VERSION = "main"
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class ExamplePage:
    slug: str
    source: Path
    title: str
    lang: str

    @property
    def url(self) -> str:
        return f"/{SECTION}/{quote(self.slug)}/"

    @property
    def path(self) -> str:
        return f"{SECTION}/{self.slug}"


def ingest_metadata(page: ExamplePage) -> dict[str, str]:
    """The document metadata that ties the ingested sample to its page (spec 000 citations)."""
    return {"project": PROJECT, "path": page.path, "version": VERSION, "url": page.url}


@lru_cache(maxsize=1)
def example_pages(samples: Path = SAMPLES) -> tuple[ExamplePage, ...]:
    pages = []
    for source in sorted(samples.glob("*")):
        if source.suffix not in (".md", ".txt") or source.name == "README.md":
            continue
        text = source.read_text(encoding="utf-8")
        first = next((line for line in text.splitlines() if line.strip()), source.stem)
        title = first.lstrip("#").strip()
        lang = "zh" if _CJK.search(text[:2000]) else "en"
        pages.append(ExamplePage(source.stem.lower(), source, title, lang))
    return tuple(pages)


def page_for(slug: str) -> ExamplePage | None:
    return next((p for p in example_pages() if p.slug == slug), None)


def _body(text: str, markdown: bool) -> str:
    """Headings with their section anchors, lists and paragraphs; everything else is escaped text."""
    anchors = {start: anchor for start, _, _, anchor in _sections(text)} if markdown else {}
    out: list[str] = []
    offset = 0
    for block in re.split(r"(\n\s*\n)", text):
        start, offset = offset, offset + len(block)
        stripped = block.strip()
        if not stripped:
            continue
        lead = start + len(block) - len(block.lstrip())
        heading = re.match(r"(#{1,6})\s+(.*)", stripped) if markdown else None
        if heading:
            level = min(len(heading.group(1)), 4)
            anchor = anchors.get(lead, "")
            ident = f' id="{html.escape(anchor)}"' if anchor else ""
            out.append(f"<h{level}{ident}>{html.escape(heading.group(2).strip())}</h{level}>")
        elif all(re.match(r"\s*[-*]\s+", line) for line in stripped.splitlines()):
            items = (re.sub(r"^\s*[-*]\s+", "", line) for line in stripped.splitlines())
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
        elif not markdown and start == 0:
            out.append(f"<h1>{html.escape(stripped)}</h1>")
        else:
            out.append(f"<p>{html.escape(' '.join(stripped.split()))}</p>")
    return "\n".join(out)


_STYLE = """
body { margin: 0; font: 16px/1.6 system-ui, sans-serif; color: #1f2328; background: #fff; }
.layout { display: flex; max-width: 1100px; margin: 0 auto; }
nav { width: 220px; padding: 24px 16px; border-right: 1px solid #d0d7de; }
nav a { display: block; color: #0b57d0; padding: 4px 0; }
nav a[aria-current="page"] { font-weight: 700; color: #1f2328; }
main { flex: 1; padding: 24px 40px 80px; max-width: 780px; }
h1, h2, h3 { line-height: 1.25; }
@media (prefers-color-scheme: dark) {
  body { color: #e6edf3; background: #0d1117; } nav { border-color: #3d444d; }
  nav a { color: #8ab4f8; } nav a[aria-current="page"] { color: #e6edf3; }
}
"""


def content_security_policy() -> str:
    """A strict policy for the example pages, as a careful documentation site would send: the
    widget needs only its script and the citegate URL (its styles are a constructed stylesheet)."""
    style = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
    return (
        f"default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'sha256-{style}'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def render(page: ExamplePage | None) -> str:
    """One page of the example site (None: the index), with the widget's script tag."""
    pages = example_pages()
    current = ' aria-current="page"'
    nav = "".join(
        f'<a href="{p.url}"{current if p == page else ""}>{html.escape(p.title)}</a>' for p in pages
    )
    if page is None:
        lang, title = "en", "citegate example documentation"
        items = "".join(f'<li><a href="{p.url}">{html.escape(p.title)}</a></li>' for p in pages)
        body = (
            f"<h1>{title}</h1><p>The sample corpus as a small documentation site. Press the Ask button "
            f"(or Ctrl+K) and ask about these pages.</p><ul>{items}</ul>"
        )
    else:
        lang, title = page.lang, page.title
        body = _body(page.source.read_text(encoding="utf-8"), markdown=page.source.suffix == ".md")
    # The widget reads its scope from these: the project and version here, the section from the URL.
    widget = f'<script src="/widget.js" data-project="{PROJECT}" data-version="{VERSION}" defer></script>'
    return f"""<!doctype html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_STYLE}</style>
{widget}
</head>
<body>
<div class="layout">
<nav aria-label="Pages"><a href="/{SECTION}/">Overview</a>{nav}</nav>
<main>
{body}
</main>
</div>
</body>
</html>
"""
