"""A long manual page read whole loses sections; the corpus puts them back (issue 32)."""

from __future__ import annotations

from pathlib import Path

import trafilatura

from core.search.corpus_extract import extract_text
from core.search.html_sections import restore_sections

PAGE = Path(__file__).parents[1] / "fixtures" / "pages" / "debian_reference_ssh.zh-cn.html"
LOST = "如果你遇到问题，检查配置文件的权限"


def test_trafilatura_alone_drops_the_last_section() -> None:
    # the reason for core.search.html_sections: if this starts passing, the module can go
    assert LOST not in (trafilatura.extract(PAGE.read_text(encoding="utf-8")) or "")


def test_the_corpus_text_has_the_dropped_section_under_its_heading() -> None:
    title, text, headings = extract_text(PAGE.name, PAGE.read_bytes())
    assert LOST in text
    ssh = next(h for h in headings if h.text == "SSH 故障排查")
    assert text[ssh.start:].lstrip().startswith("如果你遇到问题")
    # the sections trafilatura kept come out as it wrote them, before the restored one
    assert 0 <= text.index("shutdown -h now") < text.index(LOST)


def test_a_page_trafilatura_reads_whole_is_unchanged() -> None:
    html = ("<html><body>" + "".join(
        f"<h2>Part {i}</h2><p>Paragraph {i} says something long enough to keep.</p>"
        for i in range(6)) + "</body></html>")
    text = trafilatura.extract(html) or ""
    assert restore_sections(html, text) == text
