"""Real documentation pages are read as their readers read them.

The fixtures are excerpts of published manuals (PostgreSQL's DocBook, Python's Sphinx, git's
AsciiDoc HTML; Docusaurus, WebdriverIO and MkDocs Markdown; see fixtures/README.md). Navigation,
tables of contents and sidebars are dropped; definition lists, tables, code and admonitions are
kept; headings carry the page's element ids, so a chunk cites `page.html#the-anchor`.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

import pytest

from citegate.knowledge.ingest.chunking import DEFAULT_CHUNKING, ChunkingConfig, chunk_document, iter_headings
from citegate.knowledge.ingest.documents import ChildChunk, ChunkedDocument, ParsedDocument
from citegate.knowledge.ingest.parsing import parse_document

FIXTURES = Path(__file__).parent / "fixtures"
PAGES = sorted(path.name for path in FIXTURES.iterdir() if path.suffix in (".html", ".md", ".mdx"))


def _page(name: str) -> ParsedDocument:
    return parse_document((FIXTURES / name).read_bytes(), mime_type=None, source_name=name)


def _lines(doc: ParsedDocument) -> list[str]:
    return doc.text.split("\n")


def _child_saying(doc: ParsedDocument, chunked: ChunkedDocument, phrase: str) -> ChildChunk:
    """The child that states `phrase` in its own section (the next child may hold it too, in the
    overlap it shares with the section before)."""
    offset = doc.text.index(phrase)
    starts = [h.start for h in iter_headings(doc.text)]
    for child in chunked.children:
        if child.start <= offset and offset + len(phrase) <= child.end:
            own = max((start for start in starts if start <= (child.start + child.end) // 2), default=0)
            if own <= offset:
                return child
    raise AssertionError(f"no child states {phrase!r}")


# -- PostgreSQL (DocBook) ---------------------------------------------------------------------------


def test_postgresql_navigation_and_the_repeated_table_of_contents_are_dropped() -> None:
    doc = _page("postgresql-15-runtime-config-resource.html")
    lines = _lines(doc)
    for furniture in ("Prev", "Up", "Home", "Next", "Chapter 20. Server Configuration"):
        assert not any(furniture in line for line in lines if not line.startswith("#")), furniture
    # The section list at the top of the page (its table of contents) is not text: each section
    # name appears once, as its heading.
    assert doc.text.count("20.4.2. Disk") == 1
    assert doc.text.count("20.4.6. Asynchronous Behavior") == 0
    assert doc.title == "20.4. Resource Consumption"
    assert lines[0] == "# 20.4. Resource Consumption {#RUNTIME-CONFIG-RESOURCE}"


def test_a_setting_with_its_own_id_is_its_own_section_and_its_chunk_cites_that_anchor() -> None:
    doc = _page("postgresql-15-runtime-config-resource.html")
    assert "## 20.4.1. Memory {#RUNTIME-CONFIG-RESOURCE-MEMORY}" in _lines(doc)
    assert "### work_mem (integer) {#GUC-WORK-MEM}" in _lines(doc)
    chunked = chunk_document(doc)
    default = _child_saying(doc, chunked, "The default value is four megabytes (4MB).")
    assert (default.heading, default.anchor) == ("work_mem (integer)", "GUC-WORK-MEM")
    # A sentence that mentions a setting cites the entry it is in (max_wal_size, in shared_buffers').
    mention = _child_saying(doc, chunked, "a corresponding increase in max_wal_size")
    assert mention.anchor == "GUC-SHARED-BUFFERS"
    # Headings under the setting keep the manual's hierarchy.
    assert default.heading_path == ("20.4. Resource Consumption", "20.4.1. Memory", "work_mem (integer)")


def test_a_table_row_reads_alone_with_its_column_names_under_its_caption() -> None:
    doc = _page("postgresql-15-datatype-numeric.html")
    lines = _lines(doc)
    row = "Name: smallint; Storage Size: 2 bytes; Description: small-range integer; Range: -32768 to +32767."
    assert row in lines
    caption = lines.index("Table 8.2. Numeric Types")
    assert lines[caption + 2] == row  # the caption, a blank line, then the rows
    assert "Name: bigserial; Storage Size: 8 bytes; Description: large autoincrementing integer;" in doc.text
    # The answerer quotes sentences: each row is one, so a chunk holding it can be quoted from.
    chunked = chunk_document(doc)
    assert any(row in child.text for child in chunked.children)


def test_a_reference_page_keeps_its_title_its_synopsis_and_its_parameters_with_their_descriptions() -> None:
    doc = _page("postgresql-15-sql-truncate.html")
    lines = _lines(doc)
    assert doc.title == "TRUNCATE"
    # DocBook gives the title and every section the same <h2>: the title still heads the page.
    assert lines[0] == "# TRUNCATE {#SQL-TRUNCATE}"
    assert "## Description {#id-1.9.3.181.5}" in lines and "## Synopsis" in lines
    assert "```\nTRUNCATE [ TABLE ] [ ONLY ] name [ * ] [, ... ]\n" in doc.text
    # Terms without an id of their own stay with their description.
    assert "**CASCADE**\nAutomatically truncate all tables that have foreign-key references" in doc.text
    child = _child_saying(doc, chunk_document(doc), "quickly removes all rows from a set of")
    assert child.heading_path == ("TRUNCATE", "Description") and child.anchor == "id-1.9.3.181.5"


# -- Python (Sphinx) --------------------------------------------------------------------------------


def test_sphinx_sidebars_related_bars_headerlinks_and_footer_are_dropped() -> None:
    doc = _page("python-3.11-os.path.html")
    for furniture in ("¶", "Table of Contents", "Previous topic", "Quick search", "Copyright", "»", "Theme"):
        assert furniture not in doc.text, furniture
    assert doc.title == "os.path — Common pathname manipulations"  # not "... — Python 3.11.2 documentation"
    assert _lines(doc)[0] == "# os.path — Common pathname manipulations {#module-os.path}"


def test_sphinx_api_entries_admonitions_and_code_are_kept() -> None:
    doc = _page("python-3.11-os.path.html")
    lines = _lines(doc)
    assert "## os.path.basename(path) {#os.path.basename}" in lines
    assert any(line.startswith("Note: All of these functions accept either only bytes") for line in lines)
    assert "See also: The pathlib module offers high-level path objects." in lines
    assert "```python3\n>>> os.path.commonprefix(['/usr/lib', '/usr/local/lib'])\n'/usr/l'\n" in doc.text
    child = _child_saying(doc, chunk_document(doc), "Return the base name of pathname path.")
    assert (child.heading, child.anchor) == ("os.path.basename(path)", "os.path.basename")


# -- git (AsciiDoc) ---------------------------------------------------------------------------------


def test_asciidoc_options_keep_every_spelling_with_their_description() -> None:
    doc = _page("git-2.39-git-commit.html")
    assert doc.title.startswith("git-commit(1)")
    assert "**-a**, **--all**\nTell the command to automatically stage files" in doc.text
    assert "## OPTIONS {#_options}" in _lines(doc)
    assert "```\ngit commit [-a | --interactive | --patch]" in doc.text
    assert "Last updated" not in doc.text  # the footer


# -- Markdown sites ---------------------------------------------------------------------------------


def test_a_docusaurus_page_drops_front_matter_and_imports_and_labels_admonitions_and_tabs() -> None:
    doc = _page("docusaurus-deployment-github-pages.mdx")
    assert doc.mime_type == "text/markdown"
    assert doc.title == "Deploying to GitHub Pages"
    for source_only in ("sidebar_label", "import Tabs", ":::", "<TabItem", "mdx-code-block", "{/*"):
        assert source_only not in doc.text, source_only
    lines = _lines(doc)
    assert any(line.startswith("Info: In case you want to use your custom domain") for line in lines)
    assert any(line.startswith("Warning: GitHub Pages adds a trailing slash") for line in lines)
    assert "Bash:\n```bash\nGIT_USER=<GITHUB_USERNAME> yarn deploy\n```" in doc.text
    assert "PowerShell:\n```powershell\n" in doc.text
    # Docusaurus' `{/* #id */}` heading ids are the anchors the site publishes.
    assert [(h.text, h.anchor) for h in iter_headings(doc.text)][:2] == [
        ("Deploying to GitHub Pages", ""),
        ("Overview", "github-pages-overview"),
    ]
    child = _child_saying(doc, chunk_document(doc), "create a `CNAME` file")
    assert child.anchor == "github-pages-overview"


def test_front_matter_title_names_the_document_and_tabs_take_their_labels_from_tabs_values() -> None:
    doc = _page("webdriverio-timeouts.md")
    assert doc.title == "Timeouts"
    assert not doc.text.startswith("---") and "id: timeouts" not in doc.text
    assert "<LiteYouTubeEmbed" not in doc.text and "<Tabs" not in doc.text
    for label, option in (("Mocha", "mochaOpts"), ("Jasmine", "jasmineOpts"), ("Cucumber", "cucumberOpts")):
        tab = doc.text.index(f"{label}:\n```js")
        assert option in doc.text[tab : doc.text.index("```\n", tab + 10)]


def test_mkdocs_admonitions_become_labelled_paragraphs_with_their_indented_body() -> None:
    doc = _page("mkdocs-user-guide-configuration.md")
    lines = _lines(doc)
    assert "Note: On a few known hosts (specifically GitHub, Bitbucket and GitLab), the" in lines
    assert "would be automatically set as `edit/master/docs/` (Note the `edit` path" in lines  # de-indented
    assert 'Warning: On GitHub and GitLab, the default "edit" path (`edit/master/docs/`) opens' in lines
    assert "Note: If you are using source code control you will normally want to ensure that" in lines
    assert "    site/" in lines  # an indented code block inside the note stays one
    # An untitled block (`!!! block ""`) has no label; its headings are headings again.
    assert "#### custom_dir:" in lines
    assert not any(line.lstrip().startswith("!!!") for line in lines)


# Built sites: the markup Docusaurus 3 and Material for MkDocs write around a page (shortened).

DOCUSAURUS_PAGE = """<!doctype html><html lang="en"><head><meta name="generator" content="Docusaurus v3.5.2">
<title>Deploy | My Site</title></head>
<body><div id="__docusaurus"><nav class="navbar navbar--fixed-top">
<a class="navbar__brand" href="/">My Site</a><a href="/docs/intro">Docs</a></nav>
<div class="main-wrapper"><div class="docsWrapper_hBAB"><aside class="theme-doc-sidebar-container">
<ul class="menu__list"><li><a href="/docs/intro">Intro</a></li></ul></aside>
<main class="docMainContainer_TBSr"><div class="container"><div class="row">
<div class="col docItemCol_VOVn"><div class="docItemContainer_Djhp"><article>
<nav class="theme-doc-breadcrumbs" aria-label="Breadcrumbs"><ul class="breadcrumbs"><li>
<a href="/">Home</a></li><li>Deploy</li></ul></nav>
<div class="tocCollapsible_ETCw theme-doc-toc-mobile"><button type="button">On this page</button>
</div>
<div class="theme-doc-markdown markdown"><header><h1>Deploy</h1></header>
<p>Run the deploy command from the project root.</p>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="deploy-command">Deploy command<a href="#deploy-command"
 class="hash-link" aria-label="Direct link to Deploy command" title="Direct link to Deploy command">​</a>
</h2>
<div class="tabs-container tabList__CuJ">
<ul role="tablist" aria-orientation="horizontal" class="tabs">
<li role="tab" tabindex="0" aria-selected="true" class="tabs__item tabItem_LNqP tabs__item--active">npm</li>
<li role="tab" tabindex="-1" aria-selected="false" class="tabs__item tabItem_LNqP">Yarn</li></ul>
<div class="margin-top--md"><div role="tabpanel" class="tabItem_Ymn6">
<div class="language-bash codeBlockContainer_Ckt0">
<div class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-bash codeBlock_bY9V"
><code class="codeBlockLines_e6Vv"><span class="token-line">npm run deploy</span></code></pre></div>
</div></div>
<div role="tabpanel" class="tabItem_Ymn6" hidden="">
<div class="language-bash codeBlockContainer_Ckt0">
<div class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-bash codeBlock_bY9V"
><code class="codeBlockLines_e6Vv"><span class="token-line">yarn deploy</span></code></pre></div>
</div></div></div></div>
<div class="theme-admonition theme-admonition-warning admonition_xJq3 alert alert--warning">
<div class="admonitionHeading_Gvgb"><span class="admonitionIcon_Rf37"><svg viewBox="0 0 16 16">
<path d="M0 0"></path></svg></span>warning</div><div class="admonitionContent_BuS1">
<p>Deploying overwrites the <code>gh-pages</code> branch.</p></div></div>
</div>
<footer class="theme-doc-footer docusaurus-mt-lg"><div class="theme-doc-footer-edit-meta-row row">
<a href="https://github.com/x/edit/main/docs/deploy.md" class="theme-edit-this-page">Edit this page</a>
</div></footer></article>
<nav class="pagination-nav docusaurus-mt-lg" aria-label="Docs pages">
<a class="pagination-nav__link pagination-nav__link--prev" href="/docs/intro">
<div class="pagination-nav__sublabel">Previous</div><div class="pagination-nav__label">Intro</div>
</a></nav></div></div>
<div class="col col--3"><div class="tableOfContents_bqdL thin-scrollbar theme-doc-toc-desktop">
<ul class="table-of-contents table-of-contents__left-border"><li>
<a href="#deploy-command" class="table-of-contents__link toc-highlight">Deploy command</a></li></ul>
</div></div></div></div></main></div></div>
<footer class="footer footer--dark">
<div class="container">Copyright © 2024 My Site. Built with Docusaurus.</div></footer></div></body>
</html>"""

MATERIAL_PAGE = """<!doctype html><html lang="en"><head>
<meta name="generator" content="mkdocs-1.6.0, mkdocs-material-9.5.30"><title>Setup - My Docs</title>
</head>
<body><header class="md-header" data-md-component="header">
<nav class="md-header__inner md-grid" aria-label="Header">
<a href="." class="md-header__button md-logo">My Docs</a>
<div class="md-search" data-md-component="search" role="dialog">
<input type="text" class="md-search__input" placeholder="Search"></div></nav></header>
<div class="md-container"><main class="md-main" data-md-component="main">
<div class="md-main__inner md-grid">
<div class="md-sidebar md-sidebar--primary" data-md-component="sidebar">
<nav class="md-nav md-nav--primary"><ul class="md-nav__list"><li class="md-nav__item">
<a href="." class="md-nav__link">Home</a></li></ul></nav></div>
<div class="md-sidebar md-sidebar--secondary" data-md-component="sidebar">
<nav class="md-nav md-nav--secondary" aria-label="Table of contents">
<label class="md-nav__title" for="__toc">Table of contents</label></nav></div>
<div class="md-content" data-md-component="content"><article class="md-content__inner md-typeset">
<h1 id="setup">Setup</h1>
<h2 id="install">Install<a class="headerlink" href="#install" title="Permanent link">&para;</a></h2>
<div class="admonition note"><p class="admonition-title">Before you start</p>
<p>You need Python 3.8 or later.</p></div>
<div class="tabbed-set tabbed-alternate" data-tabs="1:2">
<input checked="checked" id="__tabbed_1_1" name="__tabbed_1" type="radio">
<input id="__tabbed_1_2" name="__tabbed_1" type="radio"><div class="tabbed-labels">
<label for="__tabbed_1_1">pip</label><label for="__tabbed_1_2">conda</label></div>
<div class="tabbed-content"><div class="tabbed-block"><div class="highlight"><pre><span></span>
<code>pip install mkdocs-material
</code></pre></div></div><div class="tabbed-block"><div class="highlight"><pre><span></span>
<code>conda install -c conda-forge mkdocs-material
</code></pre></div></div></div></div>
</article></div></div></main>
<footer class="md-footer"><nav class="md-footer__inner md-grid" aria-label="Footer">
<a href="." class="md-footer__link md-footer__link--prev">Previous Home</a></nav>
<div class="md-copyright">Made with Material for MkDocs</div></footer></div></body></html>"""


def test_a_built_docusaurus_page_keeps_its_article_tabs_and_admonition_and_drops_the_rest() -> None:
    doc = parse_document(DOCUSAURUS_PAGE.encode(), mime_type="text/html", source_name="deploy.html")
    assert doc.title == "Deploy"
    assert doc.text == (
        "# Deploy\n\nRun the deploy command from the project root.\n\n"
        "## Deploy command {#deploy-command}\n\n"
        "npm:\n```bash\nnpm run deploy\n```\n\n"
        "Yarn:\n```bash\nyarn deploy\n```\n\n"  # the hidden tab too: a reader can open it
        "Warning: Deploying overwrites the gh-pages branch."
    )


def test_a_built_material_for_mkdocs_page_keeps_its_admonition_and_content_tabs() -> None:
    doc = parse_document(MATERIAL_PAGE.encode(), mime_type="text/html", source_name="setup.html")
    assert doc.title == "Setup"
    assert doc.text == (
        "# Setup {#setup}\n\n## Install {#install}\n\n"
        "Before you start: You need Python 3.8 or later.\n\n"
        "pip:\n```\npip install mkdocs-material\n```\n\n"
        "conda:\n```\nconda install -c conda-forge mkdocs-material\n```"
    )


# -- anchors and chunking ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "anchor"),
    [
        ('<h2 id="install">Installing</h2>', "install"),
        ('<section id="module-zipfile"><h2>zipfile</h2><p>x</p></section>', "module-zipfile"),
        ('<div class="sect2" id="SETUP"><div class="titlepage"><h3>Setup</h3></div></div>', "SETUP"),
        ('<h2><a name="old-style"></a>Old style</h2>', "old-style"),
        ('<h2>Linked<a class="headerlink" href="#linked-here">¶</a></h2>', "linked-here"),
    ],
)
def test_a_heading_takes_its_anchor_from_its_id_its_section_or_an_anchor_inside(
    html: str, anchor: str
) -> None:
    page = f"<html><body><main>{html}<p>{'Some text of the section. ' * 12}</p></main></body></html>"
    doc = parse_document(page.encode(), mime_type="text/html", source_name="page.html")
    headings = list(iter_headings(doc.text))
    assert [h.anchor for h in headings] == [anchor]
    assert "{#" not in headings[0].text  # the heading's text has no markup
    assert {c.anchor for c in chunk_document(doc).children} == {anchor}


def test_a_section_id_is_not_taken_by_a_heading_that_does_not_open_it() -> None:
    page = (
        "<html><body><div id='intro'><p>Welcome to the guide.</p><h2>Later</h2><p>More text.</p></div>"
        "</body></html>"
    )
    doc = parse_document(page.encode(), mime_type="text/html", source_name="page.html")
    assert [h.anchor for h in iter_headings(doc.text)] == [""]


def test_text_after_a_list_of_entries_is_back_in_the_section_that_holds_the_list() -> None:
    page = """<html><body><main><section id="limits"><h2>Limits</h2>
    <dl><dt id="max-files">max_files</dt><dd><p>How many files may be open at once.</p></dd>
    <dt id="max-size">max_size</dt><dd><p>The largest file, in bytes.</p></dd></dl>
    <p>Both limits apply per process.</p></section></main></body></html>"""
    doc = parse_document(page.encode(), mime_type="text/html", source_name="limits.html")
    chunked = chunk_document(doc, ChunkingConfig(child_size=60, child_overlap=10))
    assert _child_saying(doc, chunked, "The largest file").anchor == "max-size"
    assert _child_saying(doc, chunked, "Both limits apply per process.").anchor == "limits"


def test_a_page_that_is_only_a_table_of_contents_keeps_it() -> None:
    items = "".join(f'<dt><a href="ch{n}.html">Chapter {n}. Topic number {n}</a></dt>' for n in range(1, 15))
    toc = f'<div class="toc"><dl class="toc">{items}</dl></div>'
    page = f"<html><body><h1>Part I. Tutorial</h1>{toc}</body></html>"
    doc = parse_document(page.encode(), mime_type="text/html", source_name="part1.html")
    assert "Chapter 3. Topic number 3" in _lines(doc)


def test_a_news_page_without_documentation_structure_is_read_by_main_content_extraction() -> None:
    menu = "".join(
        f'<div class="item"><a href="/s/{n}">Story {n} about the council and the weather</a></div>'
        for n in range(40)
    )
    page = f"""<html><head><title>Harbour reopens | The Daily Tide</title></head><body>
    <div class="top"><a href="/">The Daily Tide</a> <a href="/news">News</a> <a href="/sport">Sport</a></div>
    <div class="col-left">{menu}</div>
    <div class="col-main"><h1>Harbour reopens after storm repairs</h1>
    <p>The harbour reopened on Monday after three weeks of repairs to the breakwater, which was damaged
    when the storm of early March drove waves over the outer wall.</p>
    <p>Fishing boats returned to their moorings by noon, and the ferry service to the islands will
    resume its summer timetable from Friday, the harbour master said.</p></div>
    <div class="col-right">{menu}</div></body></html>"""
    doc = parse_document(page.encode(), mime_type="text/html", source_name="news.html")
    assert doc.title == "Harbour reopens after storm repairs"
    assert "the ferry service to the islands" in doc.text
    assert "Story 7 about the council" not in doc.text


@pytest.mark.parametrize("depth", [600, 3000])
def test_absurdly_deep_markup_still_parses(depth: int) -> None:
    """Deeper than Python's recursion (600) or than libxml2 builds a tree for (3000)."""
    page = (
        "<html><body>"
        + "<div>" * depth
        + "<p>Deep down there is text.</p>"
        + "</div>" * depth
        + "</body></html>"
    )
    doc = parse_document(page.encode(), mime_type="text/html", source_name="deep.html")
    assert "Deep down there is text." in doc.text


# -- overlap of children (issue 28) -----------------------------------------------------------------


def _own_length(child: ChildChunk, section_starts: list[int]) -> int:
    """How much of the child is in its own section (the rest is overlap with the section before)."""
    start = section_starts[bisect_right(section_starts, (child.start + child.end) // 2) - 1]
    return child.end - max(start, child.start)


def test_consecutive_children_of_a_parent_overlap_by_about_the_configured_amount() -> None:
    """Every pair of consecutive children inside one parent shares between half and all of
    CHILD_CHUNK_OVERLAP characters, across section boundaries too. Only the first child of a
    section shorter than that overlap shares less, about its own length: reaching further back
    would move its middle, which names its section, out of it. A section that ends with a code
    block is not reached back into: the child would open inside the block."""
    overlap = DEFAULT_CHUNKING.child_overlap
    pairs = crossing = ends_in_code = 0
    for name in PAGES:
        doc = _page(name)
        chunked = chunk_document(doc)
        starts = [h.start for h in iter_headings(doc.text)]
        starts = starts if starts and starts[0] == 0 else [0, *starts]
        for before, after in zip(chunked.children, chunked.children[1:], strict=False):
            if before.parent_index != after.parent_index:
                continue
            pairs += 1
            shared = before.end - after.start
            if shared <= 0 and "```" in doc.text[max(0, after.start - overlap) : after.start]:
                ends_in_code += 1  # a child never opens with the end of the code block before it
                continue
            expected = min(overlap // 2, _own_length(after, starts) // 2)
            assert expected - 3 <= shared <= overlap, (name, shared, doc.text[after.start : after.start + 80])
            crossing += any(after.start < start and before.end <= start < after.end for start in starts)
    assert pairs >= 40, "the pages have consecutive children to compare"
    assert crossing >= 10, "and many of them meet at a section boundary"
    assert ends_in_code < pairs // 4, "only a section ending in code is not reached back into"


def test_children_overlap_across_a_section_boundary_and_keep_their_own_heading() -> None:
    first = "## Fog\n\n" + " ".join(
        ["Fog rolled in from the west and the horn sounded every thirty seconds."] * 5
    )
    second = "## Ships\n\n" + " ".join(["Ships passing the reef kept well clear of the breaking water."] * 5)
    doc = ParsedDocument(text=f"{first}\n\n{second}")
    chunked = chunk_document(doc)
    assert len(chunked.parents) == 1
    last_fog = max((c for c in chunked.children if c.heading == "Fog"), key=lambda c: c.start)
    first_ships = min((c for c in chunked.children if c.heading == "Ships"), key=lambda c: c.start)
    shared = last_fog.end - first_ships.start
    assert DEFAULT_CHUNKING.child_overlap // 2 <= shared <= DEFAULT_CHUNKING.child_overlap
    assert first_ships.start < doc.text.index("## Ships") and doc.text[first_ships.start - 1] == " "
    assert first_ships.text.rstrip().endswith("water.") and first_ships.anchor == "ships"
