"""Extraction to Markdown: main content, selectors, sanitising, counts."""

from __future__ import annotations

import pytest
from tests.unit.web.pages import ARTICLE, SCRIPTS

from citegate.web import WebReadFailed
from citegate.web.reader import (
    InvalidSelector,
    css_to_xpath,
    extract,
    extract_text,
    sanitize_markdown,
    word_count,
)


def test_main_content_without_navigation_or_footer() -> None:
    page = extract(ARTICLE, url="http://public.test/article")
    assert page.title == "Citegate Field Notes"
    assert page.content.startswith("# Reading the web safely")
    assert "Every address is checked" in page.content
    for noise in ("Pricing", "Log in", "Copyright 2025"):
        assert noise not in page.content
    assert page.word_count > 40 and page.token_count > page.word_count


def test_css_selector_keeps_only_matching_nodes() -> None:
    page = extract(ARTICLE, url="http://x/", css_selector="p.lead")
    assert "drops navigation and adverts" in page.content
    assert "Every address is checked" not in page.content
    nav = extract(ARTICLE, url="http://x/", css_selector="nav.menu > a[href='/pricing'], footer")
    assert "Pricing" in nav.content and "Copyright" in nav.content and "Log in" not in nav.content


def test_exclude_selector_removes_nodes() -> None:
    page = extract(ARTICLE, url="http://x/", css_selector="#main", exclude_selector="p.lead, .related")
    assert "Every address is checked" in page.content
    assert "drops navigation" not in page.content and "nothing to see" not in page.content


def test_a_selector_matching_nothing_is_a_read_failure() -> None:
    with pytest.raises(WebReadFailed, match="matches"):
        extract(ARTICLE, url="http://x/", css_selector="#does-not-exist")


@pytest.mark.parametrize("selector", ["div:hover", "a::before", "p ~ p", "p + p", "> p", "p >", ""])
def test_unsupported_selectors_are_refused(selector: str) -> None:
    with pytest.raises((InvalidSelector, ValueError)):
        extract(ARTICLE, url="http://x/", css_selector=selector or ",")


def test_css_translation() -> None:
    assert css_to_xpath("#a") == 'descendant-or-self::*[@id="a"]'
    assert css_to_xpath("div > p") == "descendant-or-self::div/p"
    assert css_to_xpath("div p") == "descendant-or-self::div//p"
    assert "starts-with(@href" in css_to_xpath("a[href^='http']")


def test_scripts_handlers_and_script_links_do_not_survive() -> None:
    page = extract(SCRIPTS, url="http://x/")
    lowered = page.content.lower()
    for bad in ("<script", "onclick", "onmouseover", "onerror", "javascript:", "document.cookie", "alert(1)"):
        assert bad not in lowered, bad
    assert "[safe link](https://example.org/safe)" in page.content
    assert "dangerous link" in page.content  # the words stay, the target goes


def test_sanitize_markdown() -> None:
    dirty = (
        "[x](javascript:alert(1)) ![i](data:text/html;base64,AAA) [ok](https://a.b/c)\n"
        "<img src=x onerror=alert(1)> <script>bad()</script>text <a href='https://q'>k</a>"
    )
    clean = sanitize_markdown(dirty)
    assert "javascript" not in clean and "data:" not in clean and "<" not in clean
    assert "[ok](https://a.b/c)" in clean and "bad()" not in clean


def test_plain_text_and_counts() -> None:
    text = extract_text("Plain notes\n\nJust text, no markup at all.")
    assert text.title == "Plain notes" and text.word_count == 8
    assert word_count("ApeRAG 在2025年 将重点发展") == 9
    with pytest.raises(WebReadFailed):
        extract("   ", url="http://x/")
