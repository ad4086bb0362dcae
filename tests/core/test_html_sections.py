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


def test_a_chapter_is_the_outermost_heading_of_the_pages_it_lists() -> None:
    # PostgreSQL's "Chapter 1. Getting Started" page is a table of contents: the chapter is
    # named by its pages, each of which links "up" to it (DocBook; Sphinx writes accesskey="U")
    page = ('<html><head><title>1.1. Installation</title></head><body><div class="navheader">'
            '<a accesskey="u" href="tutorial-start.html" title="Chapter 1. Getting Started">Up</a>'
            '</div><h2>1.1. Installation</h2><p>Before you can use PostgreSQL you need to install'
            ' it, of course. It is possible that PostgreSQL is already installed at your site.'
            '</p></body></html>')
    _title, _text, headings = extract_text("tutorial-install.html", page.encode())
    assert headings[0].text == "Getting Started" and headings[0].level == 0
    sphinx = page.replace('<a accesskey="u" href="tutorial-start.html" title="Chapter 1. '
                          'Getting Started">Up</a>',
                          '<a href="netdata.html" accesskey="U">Internet Data Handling</a>')
    assert extract_text("json.html", sphinx.encode())[2][0].text == "Internet Data Handling"
    # the book itself is every page's parent, and no subject
    root = page.replace("tutorial-start.html", "index.html")
    assert all(h.level > 0 for h in extract_text("x.html", root.encode())[2])


def test_a_navigation_bar_trafilatura_dropped_stays_out() -> None:
    # Sphinx's top bar sits under its own "Navigation" heading: it names places, says nothing
    nav = ('<h3>Navigation</h3><div class="related"><ul><li><a href="i.html">index</a> |</li>'
           '<li><a href="m.html">modules</a> |</li><li>Python &#187;</li><li>3.11.2 '
           'Documentation &#187;</li><li>The Python Standard Library &#187;</li>'
           '<li>Theme Auto Light Dark</li></ul></div>')
    body = "".join(f"<h2>Part {i}</h2><p>Paragraph {i} says something long enough to keep, "
                   f"and then a little more.</p>" for i in range(5))
    html = f"<html><body>{nav}<div class='body'>{body}</div></body></html>"
    text = "\n".join(f"Paragraph {i} says something long enough to keep, and then a little more."
                     for i in range(5))
    assert restore_sections(html, text) == text


def test_a_sentence_over_a_table_of_linked_names_is_restored() -> None:
    # Debian Reference's "9.3.9. 记录配置文件的变更": one sentence, then a table whose package
    # names are links. Most of its text is link text, like a table of contents, yet it says
    # something, and trafilatura dropped it.
    rows = "".join(f'<tr><td><a href="https://packages.debian.org/{p}">{p}</a></td>'
                   f'<td><a href="https://packages.debian.org/{p}">{p}-doc</a></td></tr>'
                   for p in ("etckeeper", "timeshift", "snapper", "changetrack"))
    # (DocBook's XHTML marks each heading with an empty anchor, <a id="..."/>)
    lost = ('<h3><a id="_recording_changes"/>9.3.9. 记录配置文件的变更</h3><p>有特定的工具可以通过 DVCS '
            "的帮助来记录配置文件"
            '的变更和在 <a href="https://zh.wikipedia.org/wiki/Btrfs">Btrfs</a> 上制作系统快照。'
            f"</p><table>{rows}</table>")
    toc = "<h3>目录</h3><ul>" + "".join(
        f'<li><a href="#s{i}">9.3.{i}. 第 {i} 节的标题很长很长。</a></li>' for i in range(6)) + "</ul>"
    body = "".join(f"<h2>Part {i}</h2><p>Paragraph {i} says something long enough to keep, "
                   f"and then a little more.</p>" for i in range(4))
    html = f"<html><body>{toc}{body}{lost}</body></html>"
    text = "\n".join(f"Paragraph {i} says something long enough to keep, and then a little more."
                     for i in range(4))
    restored = restore_sections(html, text)
    assert "有特定的工具可以通过 DVCS 的帮助来记录配置文件的变更" in restored
    assert "第 1 节的标题" not in restored  # the table of contents stays out
