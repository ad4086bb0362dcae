"""A topic, a title or a quote is text in a report's markdown: it renders as written, never as a
link, an image or HTML (defect 11, and the escaped quote and titles of defect 17). Links exist
only where the report puts them, and go only to http(s) or file URLs.

Rendered here with markdown-it (what the HTML export and `show` use); Prefect's UI (marked)
reads backslash escapes the same way except inside a link's label, so no untrusted text is
ever a label, and bare URLs are escaped where marked would link them.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from core.models import ReportDraft, SectionDraft
from core.reports.export import to_html
from core.models import Claim, Evidence, Finding, ResearchPlan, SubQuestion
from core.reports.report import assemble
from tests.security.conftest import PLANTED

QUOTE = "JSON (JavaScript Object Notation) <https://json.org> is a subset of __JavaScript__."
TITLE = "json — JSON encoder and decoder [docs] *stdlib* <b>"
EVIL_URL = "javascript:alert(document.cookie)"


def _report(topic: str = f"{PLANTED} How does asyncio cancel a task?"):
    evidence = (Evidence(url="https://docs.python.org/3/library/json.html", title=TITLE,
                         quote=QUOTE),
                Evidence(url=EVIL_URL, title="evil", quote="a quote from a page"))
    plan = ResearchPlan(topic=topic, brief="b", subquestions=(
        SubQuestion(index=0, question=f"What is {topic}?"),))
    findings = (Finding(subquestion_index=0, subquestion=f"What is {topic}?", claims=(
        Claim(text="JSON is a subset of JavaScript.", evidence=evidence[:1]),
        Claim(text=f"Disputed {PLANTED}", evidence=evidence[1:], confidence="conflict"))),)
    draft = ReportDraft(
        title=f"Research report: {topic}",
        summary=("A model may write [a link](javascript:alert(2)), ![an image](http://x/t.png), "
                 "<img src=x onerror=alert(3)> and [a fine link](https://ok.example) [E1]."),
        sections=(SectionDraft(0, f"What is {topic}?", "JSON is a subset of JavaScript [E1]."),))
    return assemble(plan, findings, draft, report_id="r_test", engine="offline")


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


def _links(html: str) -> list[str]:
    return re.findall(r'<a href="([^"]*)"', html)


def test_the_planted_topic_is_text_in_the_report() -> None:
    html = _html(_report().markdown)
    assert "<img" not in html and "<script" not in html
    assert all(url.startswith(("https://", "http://", "file://")) for url in _links(html))
    # It renders as the user wrote it, in the title, the topic line and the section heading.
    shown = PLANTED.replace("<", "&lt;").replace(">", "&gt;")
    assert html.count(shown) >= 3


def test_model_prose_keeps_only_web_links_and_no_html_or_images() -> None:
    html = _html(_report().markdown)
    assert _links(html).count("https://ok.example") == 1
    assert "javascript:" not in "".join(_links(html))
    assert "<img" not in html  # an image is not fetched: at most a link to it


def test_a_quote_and_a_title_render_as_written() -> None:
    markdown = _report().markdown
    references = markdown[markdown.index("## References"):]
    html = _html(references)
    text = re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">").replace(
        "&amp;", "&")
    assert QUOTE in text and TITLE in text
    # Not a label: Prefect's UI shows a link's label as typed, backslashes and all.
    labels = re.findall(r"(?<!\\)\[([^\]]*)\]\(", references)
    assert labels and not any("\\" in label for label in labels)
    # Not a bare URL either: Prefect's renderer would link "https://json.org\>" by itself.
    assert "https://json.org" not in references


def test_a_reference_to_another_scheme_is_not_a_link() -> None:
    report = _report()
    assert EVIL_URL not in "".join(_links(_html(report.markdown)))
    assert EVIL_URL not in "".join(_links(to_html(report)))


def test_the_html_export_shows_the_planted_topic_as_text() -> None:
    page = to_html(_report())
    assert "<img" not in page and 'href="javascript' not in page
    assert "[click](javascript:alert(1))" in page
