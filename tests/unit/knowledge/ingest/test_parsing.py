"""Parsing turns every supported upload into Markdown-like text, and refuses the rest with a clear code."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from citegate.knowledge.ingest.parsing import (
    SUPPORTED_MIME_TYPES,
    ParseError,
    detect_mime_type,
    parse_document,
)

SAMPLES = Path(__file__).resolve().parents[4] / "samples"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def _pdf(pages: list[list[str]], **options: object) -> bytes:
    """A PDF whose pages hold exactly these lines (drawn one by one, so line breaks are ours)."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4, invariant=1, **options)
    for lines in pages:
        y = 780.0
        for line in lines:
            pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def _sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def _error(data: bytes, **kwargs: object) -> ParseError:
    with pytest.raises(ParseError) as caught:
        parse_document(data, **kwargs)  # type: ignore[arg-type]
    return caught.value


# -- Markdown and plain text ------------------------------------------------------------------------


def test_markdown_sample_keeps_headings_and_takes_the_title_from_the_first_h1() -> None:
    doc = parse_document(_sample("solar-system.md"), mime_type="text/markdown", source_name="solar-system.md")
    assert doc.title == "The Solar System"
    assert doc.mime_type == "text/markdown"
    assert "### Mars" in doc.text and "Olympus Mons" in doc.text
    assert doc.pages == ()


def test_markdown_newlines_are_normalised_and_nul_characters_dropped() -> None:
    doc = parse_document(b"intro\r\n\r\n## Part\x00 one\r\nbody\r", mime_type=None, source_name="notes/a.md")
    assert doc.text == "intro\n\n## Part one\nbody\n"
    assert doc.title == "a"  # no level-1 heading: the file stem


def test_an_explicit_title_wins() -> None:
    doc = parse_document(b"# Heading\n\ntext", mime_type=None, source_name="x.md", title="  Chosen  ")
    assert doc.title == "Chosen"


def test_plain_text_sample_is_titled_by_its_file_stem() -> None:
    doc = parse_document(_sample("tea-guide.txt"), mime_type=None, source_name="tea-guide.txt")
    assert doc.mime_type == "text/plain"
    assert doc.title == "tea-guide"
    assert "70 to 80 degrees Celsius" in doc.text


def test_chinese_markdown_in_utf8() -> None:
    doc = parse_document(_sample("长城.md"), mime_type=None, source_name="长城.md")
    assert doc.title == "长城"
    assert "21,196.18 公里" in doc.text


def test_chinese_text_saved_as_gb18030_decodes() -> None:
    text = "长城是中国古代的军事防御工程。\n明长城东起虎山，西至嘉峪关。"
    doc = parse_document(text.encode("gb18030"), mime_type="text/plain", source_name="长城.txt")
    assert doc.text == text


def test_a_utf8_byte_order_mark_is_not_part_of_the_text() -> None:
    doc = parse_document(b"\xef\xbb\xbf# Title\n", mime_type=None, source_name="bom.md")
    assert doc.text == "# Title\n"
    assert doc.title == "Title"


def test_text_in_no_supported_encoding_is_refused() -> None:
    error = _error(b"caf\xe9 au lait, cr\xe8me br\xfbl\xe9e", mime_type=None, source_name="menu.txt")
    assert error.code == "invalid_encoding"


@pytest.mark.parametrize("data", [b"", b"   \n\t\r\n", b"\x00\x00"])
def test_empty_text_is_refused(data: bytes) -> None:
    assert _error(data, mime_type="text/markdown", source_name="empty.md").code == "empty_document"


def test_front_matter_gives_the_title_and_is_not_text() -> None:
    data = b"---\nid: setup\ntitle: 'Setting up: the quick way'\nsidebar_position: 2\n---\n\nInstall it.\n"
    doc = parse_document(data, mime_type=None, source_name="setup.md")
    assert doc.title == "Setting up: the quick way"
    assert doc.text == "\nInstall it.\n"


def test_two_thematic_breaks_at_the_top_are_not_front_matter() -> None:
    data = b"---\nA line between two rules.\n---\n"
    assert parse_document(data, mime_type=None, source_name="rules.md").text == data.decode()


def test_nested_admonitions_with_custom_titles_are_labelled() -> None:
    data = b"""Before.

::::warning[Read this first]
The outer warning.

:::tip
The inner tip.
:::
::::

After.
"""
    text = parse_document(data, mime_type=None, source_name="a.md").text
    assert "Read this first: The outer warning." in text
    assert "Tip: The inner tip." in text
    assert ":::" not in text and text.rstrip().endswith("After.")


def test_mkdocs_collapsible_admonitions_and_content_tabs_keep_their_body_under_their_label() -> None:
    data = b"""???+ tip "Faster builds"
    Use `--dirty` to rebuild changed pages only.

=== "pip"

    ```
    pip install mkdocs
    ```

=== "conda"

    ```
    conda install -c conda-forge mkdocs
    ```
"""
    text = parse_document(data, mime_type=None, source_name="b.md").text
    assert "Faster builds: Use `--dirty` to rebuild changed pages only." in text
    assert "pip:\n```\npip install mkdocs\n```" in text
    assert "conda:\n```\nconda install -c conda-forge mkdocs\n```" in text


def test_admonition_markers_inside_code_fences_are_code() -> None:
    data = b"```md\n:::note\nThis is how you write a note.\n:::\n```\n"
    assert parse_document(data, mime_type=None, source_name="c.md").text == data.decode()


# -- HTML -------------------------------------------------------------------------------------------

ARTICLE = """<!DOCTYPE html>
<html><head><title>Brewing Oolong</title>
<style>body { font-family: serif }</style>
<script>window.analytics = function () { track("page") };</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/shop">Shop</a></nav>
<article>
<h1>How to brew oolong</h1>
<p>Oolong tea sits between green and black tea. It is partly oxidised, and the degree of oxidation
ranges from light, floral teas such as Tieguanyin to dark, roasted rock teas from the Wuyi mountains.</p>
<h2>Water temperature</h2>
<p>Use water between 85 and 95 degrees Celsius. Lighter oolongs prefer the lower end of the range, and
roasted oolongs can take water that is close to boiling without turning bitter.</p>
<script>document.write("injected advert")</script>
<h2>Steeping time</h2>
<p>Steep for three to five minutes in a Western teapot, or for 20 to 30 seconds per infusion when brewing
gongfu style with more leaf. Good oolong gives many infusions, each tasting a little different.</p>
</article>
<footer>Copyright 2024 The Tea Shop</footer>
</body></html>"""


def test_html_main_text_keeps_headings_and_drops_scripts_and_styles() -> None:
    doc = parse_document(ARTICLE.encode(), mime_type="text/html; charset=utf-8", source_name="oolong.html")
    assert doc.mime_type == "text/html"
    assert doc.title == "Brewing Oolong"
    lines = doc.text.split("\n")
    assert "## Water temperature" in lines and "## Steeping time" in lines
    assert "85 and 95 degrees Celsius" in doc.text
    for noise in ("analytics", "injected advert", "font-family", "<"):
        assert noise not in doc.text


def test_a_tiny_html_page_falls_back_to_the_visible_body_text() -> None:
    html = "<html><body><h1>Tiny page</h1><p>One short line.</p><script>x()</script></body></html>"
    doc = parse_document(html.encode(), mime_type=None, source_name="tiny.htm")
    assert doc.text.startswith("# Tiny page")
    assert "One short line." in doc.text and "x()" not in doc.text
    assert doc.title == "Tiny page"  # no <title>: the first <h1>


def test_html_declared_as_gbk_in_a_meta_tag_decodes() -> None:
    html = '<html><head><meta charset="gbk"><title>长城</title></head><body><p>万里长城。</p></body></html>'
    doc = parse_document(html.encode("gbk"), mime_type=None, source_name="page.html")
    assert doc.title == "长城"
    assert "万里长城。" in doc.text


def test_html_without_visible_text_is_empty() -> None:
    html = b"<html><head><title>Nothing</title><script>var a = 1;</script></head><body> </body></html>"
    assert _error(html, mime_type="text/html", source_name="blank.html").code == "empty_document"


# -- PDF --------------------------------------------------------------------------------------------


def test_sample_pdf_pages_map_offsets_back_to_their_page() -> None:
    doc = parse_document(_sample("lighthouses.pdf"), mime_type=None, source_name="lighthouses.pdf")
    assert doc.mime_type == "application/pdf"
    assert doc.title == "Famous Lighthouses"  # from the PDF metadata
    assert [span.page for span in doc.pages] == [1, 2, 3]
    for phrase, page in [("Sostratus of Cnidus", 1), ("Henry Winstanley", 2), ("North Foreland", 3)]:
        assert doc.page_at(doc.text.index(phrase)) == page
    # Spans cover whole pages of the joined text, separated by a blank line.
    assert doc.pages[0].start == 0 and doc.pages[-1].end == len(doc.text)
    for before, after in zip(doc.pages, doc.pages[1:], strict=False):
        assert doc.text[before.end : after.start] == "\n\n"
    # Larger-font lines become Markdown headings, so chunking can cite them.
    assert "# The Eddystone Lighthouse" in doc.text.split("\n")


def test_pdf_lines_are_rejoined_into_paragraphs_and_dehyphenated() -> None:
    lines = [
        "Lighthouse keepers kept a log with detailed infor-",
        "mation about the weather, passing ships and every",
        "change of the lamp and the lens during the night.",
        "It was signed each morning.",
        "",
        "The second paragraph starts after a blank line and it",
        "is long enough to wrap onto a second line of the page.",
    ]
    doc = parse_document(_pdf([lines]), mime_type="application/pdf", source_name="log.pdf")
    assert "detailed information about the weather" in doc.text
    assert "infor-" not in doc.text
    paragraphs = doc.text.split("\n\n")
    assert paragraphs[0].startswith("Lighthouse keepers")
    assert paragraphs[0].endswith("It was signed each morning.")
    assert paragraphs[-1].startswith("The second paragraph")


def test_pdf_title_falls_back_to_the_first_line() -> None:
    data = _pdf([["Keeper's Log", "", "An entry for every night of the year 1901."]])
    assert parse_document(data, mime_type=None, source_name="log.pdf").title == "Keeper's Log"


def test_a_damaged_pdf_is_reported_as_corrupt_with_a_readable_reason() -> None:
    error = _error(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage", mime_type=None, source_name="bad.pdf")
    assert error.code == "corrupt_document"
    assert str(error).startswith("the PDF could not be read: ")


def test_a_password_protected_pdf_is_reported_as_corrupt() -> None:
    data = _pdf([["Secret lighthouse plans."]], encrypt="secret")
    error = _error(data, mime_type="application/pdf", source_name="secret.pdf")
    assert error.code == "corrupt_document"
    assert "password" in str(error)


def test_a_pdf_without_text_is_empty() -> None:
    assert _error(_pdf([[]]), mime_type=None, source_name="scan.pdf").code == "empty_document"
    assert _error(b"", mime_type="application/pdf", source_name="zero.pdf").code == "empty_document"


# -- Type detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime_type", "source_name", "expected"),
    [
        (b"# x", "text/markdown", "x", "text/markdown"),
        (b"# x", "text/x-markdown; charset=utf-8", "x", "text/markdown"),
        (b"# x", "text/plain", "notes.md", "text/markdown"),  # clients often label .md as text/plain
        (b"<p>x</p>", "application/xhtml+xml", "x", "text/html"),
        (b"# x", None, "README.markdown", "text/markdown"),
        (b"# x", None, "docs/intro.mdx", "text/markdown"),  # Docusaurus MDX
        (b"x", "application/octet-stream", "a.TXT", "text/plain"),
        (b"x", None, "https://example.com/docs/page.htm?lang=en", "text/html"),
        (b"%PDF-1.4 ...", None, "upload", "application/pdf"),
        (b"\n  <!DOCTYPE html><html></html>", None, "upload", "text/html"),
        (b"just some words", None, "upload", "text/plain"),
    ],
)
def test_type_comes_from_the_mime_type_then_the_name_then_the_bytes(
    data: bytes, mime_type: str | None, source_name: str, expected: str
) -> None:
    assert detect_mime_type(data, mime_type, source_name) == expected
    assert expected in SUPPORTED_MIME_TYPES


@pytest.mark.parametrize(
    ("data", "mime_type", "source_name"),
    [
        (PNG, None, "photo.png"),
        (PNG, "image/png", "photo"),
        (b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00" + bytes(range(256)), None, "report.docx"),
        (bytes(range(256)) * 4, None, "blob"),
    ],
)
def test_images_office_files_and_binaries_are_unsupported(
    data: bytes, mime_type: str | None, source_name: str
) -> None:
    assert _error(data, mime_type=mime_type, source_name=source_name).code == "unsupported_media_type"
