"""`export --format docx|pdf`: files an analyst can send on, read back with python-docx and pypdf.

The report has what real ones have: a title, an offline-engine note as a quote, bold labels,
sections, a comparison table, prose in Chinese, citation markers, and references whose URLs are
a web page (linked), a javascript: URL and a local file (shown, never linked). Quotes must come
back as written, CJK included.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from core.reports.export import ExportError, render
from core.reports.export_pdf import find_font
from core.models import Citation, Report, Source

MARKDOWN = """# Research report: threads or coroutines?

> Extractive offline report: assembled from verbatim sentences of the sources below.

**Topic:** threads or coroutines  
**Intent:** compare

## Executive summary

Threads share one process's memory, so **a lock** guards shared data [1]. A coroutine yields
at each *await* [2], and `asyncio.run` starts the loop. See [the docs](https://docs.python.org/3/)
or [this](javascript:alert(1)).

## Comparison

| Dimension | threads | coroutines |
|---|---|---|
| memory | shared, guarded by a lock [1] | one event loop [2] |
| cost | a thread each | 线程比协程更重 [3] |

## 中文小结

线程共享同一进程的内存，需要用锁保护共享数据。 [3]

- first point
- second point

## References

1. [Locks](https://example.org/locks?a=1&b=2) — “a lock guards shared data”
"""

REPORT = Report(
    report_id="r_export01", topic="threads or coroutines", title="Threads or coroutines?",
    markdown=MARKDOWN, engine="offline-extractive", language="en", citations=(
        Citation(number=1, url="https://example.org/locks?a=1&b=2", title="Locks & threads",
                 quote="Threads share one process's memory; a lock guards shared data."),
        Citation(number=2, url="javascript:alert(document.cookie)", title="Evil page",
                 quote="A coroutine yields control at each await\x0b."),
        Citation(number=3, url="file:///srv/corpus/zh.pdf#page=2", title="线程与协程 (p. 2)",
                 quote="线程共享同一进程的内存，需要用锁保护共享数据。")))


def test_docx_reads_back_with_its_structure_links_and_quotes() -> None:
    import docx

    data = render(REPORT, "docx")
    assert isinstance(data, bytes) and data[:2] == b"PK"
    doc = docx.Document(io.BytesIO(data))
    assert doc.core_properties.title == "Threads or coroutines?"
    styles = [(p.style.name, p.text) for p in doc.paragraphs]
    assert ("Title", "Research report: threads or coroutines?") in styles
    assert ("Heading 1", "Comparison") in styles and ("Heading 1", "中文小结") in styles
    assert any(s == "Quote" and t.startswith("Extractive offline report") for s, t in styles)
    assert any(s == "List Bullet" and t == "second point" for s, t in styles)
    text = "\n".join(t for _, t in styles)
    assert "线程共享同一进程的内存，需要用锁保护共享数据。 [3]" in text
    for c in REPORT.citations:  # the references, rebuilt from the citations, quotes as written
        assert (c.url if "file:" not in c.url else "zh.pdf#page=2") in text and c.title in text
        assert f"“{c.quote}”".replace("\x0b", "") in text
    table = doc.tables[0]
    assert [c.text for c in table.rows[0].cells] == ["Dimension", "threads", "coroutines"]
    assert table.rows[2].cells[2].text == "线程比协程更重 [3]"
    assert all(run.bold for run in table.rows[0].cells[0].paragraphs[0].runs)
    external = sorted(r.target_ref for r in doc.part.rels.values() if r.is_external)
    assert external == ["https://docs.python.org/3/", "https://example.org/locks?a=1&b=2"]
    xml = doc.element.xml
    assert set(re.findall(r'w:anchor="(ref_\d)"', xml)) == {"ref_1", "ref_2", "ref_3"}
    assert set(re.findall(r'w:bookmarkStart w:id="\d" w:name="(ref_\d)"', xml)) == {
        "ref_1", "ref_2", "ref_3"}
    assert "javascript:" not in " ".join(external)


@pytest.fixture(scope="module")
def pdf_reader():
    from pypdf import PdfReader

    data = render(REPORT, "pdf")
    assert data.startswith(b"%PDF-")
    return PdfReader(io.BytesIO(data))


def test_pdf_reads_back_with_the_report_text_and_references(pdf_reader) -> None:
    text = "\n".join(page.extract_text() for page in pdf_reader.pages)
    flat = " ".join(text.split())
    assert pdf_reader.metadata.title == "Threads or coroutines?"
    for expected in ("Research report: threads or coroutines?", "Executive summary",
                     "Dimension", "shared, guarded by a lock [1]", "second point",
                     "https://example.org/locks?a=1&b=2", "javascript:alert(document.cookie)",
                     "“Threads share one process's memory; a lock guards shared data.”"):
        assert expected in flat, expected
    if "wqy" in find_font().name or "Droid" in find_font().name:  # a font with CJK glyphs
        assert "线程共享同一进程的内存，需要用锁保护共享数据。" in text.replace("\n", "")
        assert "线程与协程 (p. 2)" in flat


def test_pdf_links_only_web_pages_and_its_own_references(pdf_reader) -> None:
    uris, internal = [], []
    for page in pdf_reader.pages:
        for annot in page.get("/Annots") or []:
            annot = annot.get_object()
            action = annot.get("/A")
            if action is not None and "/URI" in action:
                uris.append(str(action["/URI"]))
            elif annot.get("/Dest") is not None:
                internal.append(str(annot["/Dest"]))
    assert set(uris) == {"https://docs.python.org/3/", "https://example.org/locks?a=1&b=2"}
    assert {"ref-1", "ref-2", "ref-3"} <= set(internal)  # each marker jumps to its reference
    def titles(items) -> list[str]:
        return [t for item in items
                for t in (titles(item) if isinstance(item, list) else [item.title])]

    outline = titles(pdf_reader.outline)
    assert outline[0] == "Research report: threads or coroutines?"
    assert "Comparison" in outline and "References" in outline


def test_pdf_font_must_exist_and_be_truetype(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no such file"):
        find_font(tmp_path / "nope.ttf")
    otf = tmp_path / "NotoSansCJK.otf"
    otf.write_bytes(b"OTTO")
    with pytest.raises(ExportError, match="TrueType"):
        find_font(otf)


def test_cli_exports_docx_and_pdf_files(tmp_path: Path, monkeypatch) -> None:
    """`researchflow export ID --format docx|pdf -o FILE` on a stored report."""
    from datetime import timezone

    import docx
    from pypdf import PdfReader

    from core.store import ResultStore
    from core.store.connection import release_all
    from core.store.query import read_report
    from tests.core.test_store_views import cite, topic_result
    from tests.flows.test_cli_reports import PAGE, run

    corpus = tmp_path / "corpus"
    notes = Source(url=(corpus / "notes" / "locks.md").as_uri() + "#p2", title="Lock notes",
                   text="One process writes at a time.")
    monkeypatch.setenv("RESEARCHFLOW_CORPUS_DIR", str(corpus))
    corpus.mkdir()
    store = ResultStore(tmp_path / "rf.duckdb")
    rid = store.save_result(topic_result(
        "DuckDB concurrency", title="Concurrency [/] in DuckDB", body="One writer [1] [2].",
        sources=(PAGE, notes), citations=(cite(1, PAGE, "an exclusive lock"),
                                          cite(2, notes, "One process writes at a time."))),
        run_id="r1", engine="offline")
    release_all()
    for fmt in ("docx", "pdf"):
        target = tmp_path / f"report.{fmt}"
        result = run("export", rid, "--format", fmt, "-o", str(target), "--db", str(store.path))
        assert result.exit_code == 0 and "wrote" in result.output, result.output
        if fmt == "docx":
            text = "\n".join(p.text for p in docx.Document(str(target)).paragraphs)
        else:
            text = " ".join(" ".join(p.extract_text() for p in PdfReader(target).pages).split())
        assert "Concurrency [/] in DuckDB" in text and PAGE.url in text
        assert "“an exclusive lock”" in text
        # the corpus file by its path in RESEARCHFLOW_CORPUS_DIR, not this machine's file: URL
        assert "notes/locks.md#p2" in text and "file:" not in text
    stored = read_report(store.path, rid).created_at  # the store's time, in the file's properties
    assert stored is not None
    assert docx.Document(str(tmp_path / "report.docx")).core_properties.created == stored.replace(
        microsecond=0).astimezone(timezone.utc)
    monkeypatch.setenv("RESEARCHFLOW_PDF_FONT", str(tmp_path / "missing.ttf"))
    refused = run("export", rid, "--format", "pdf", "-o", str(tmp_path / "x.pdf"),
                  "--db", str(store.path))
    assert refused.exit_code == 2 and "RESEARCHFLOW_PDF_FONT" in refused.output


def test_docx_properties_come_from_the_report_not_the_template() -> None:
    """Not python-docx's template: its creator, its 2013 dates, its blank thumbnail."""
    import zipfile
    from datetime import datetime, timedelta, timezone

    import docx

    stored = datetime(2026, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    data = render(REPORT.model_copy(update={"created_at": stored}), "docx")
    props = docx.Document(io.BytesIO(data)).core_properties
    assert props.title == "Threads or coroutines?" and props.subject == "threads or coroutines"
    assert props.author == props.last_modified_by == "researchflow"
    assert "python-docx" not in f"{props.comments} {props.keywords}"
    utc = datetime(2026, 3, 1, 10, 30, tzinfo=timezone.utc)
    assert props.created == props.modified == utc
    assert "docProps/thumbnail.jpeg" not in zipfile.ZipFile(io.BytesIO(data)).namelist()
    app = zipfile.ZipFile(io.BytesIO(data)).read("docProps/app.xml").decode()
    assert "<Application>researchflow</Application>" in app
    assert "Microsoft" not in app and "Normal.dotm" not in app
    unsaved = docx.Document(io.BytesIO(render(REPORT, "docx"))).core_properties
    assert abs(unsaved.created - datetime.now(timezone.utc)) < timedelta(minutes=5)


def test_quotes_are_reflowed_for_display_and_stored_as_written() -> None:
    """A page's hard line breaks and indentation do not break the quote's lines in the document;
    the stored quote, which verification compares with the page, keeps them."""
    import docx
    from pypdf import PdfReader

    quote = "Threads share\n      one process's\tmemory;\r\n   a lock guards it."
    shown = "Threads share one process's memory; a lock guards it."
    report = REPORT.model_copy(update={"citations": (
        REPORT.citations[0].model_copy(update={"quote": quote}),) + REPORT.citations[1:]})
    paragraphs = [p.text for p in docx.Document(io.BytesIO(render(report, "docx"))).paragraphs]
    assert f"“{shown}”" in paragraphs
    assert not any("share\n" in p or "  one" in p for p in paragraphs)
    pages = PdfReader(io.BytesIO(render(report, "pdf"))).pages
    lines = [line.strip() for page in pages for line in page.extract_text().splitlines()]
    assert f"“{shown}”" in lines
    assert report.citations[0].quote == quote  # the report itself is untouched
    from core.reports.export_blocks import reflow

    assert reflow("线程共享同一\n  进程的内存。\n需要用锁") == "线程共享同一进程的内存。需要用锁"


def test_pdf_links_every_citation_marker_table_cells_included(pdf_reader) -> None:
    """Each `[n]` of the prose and of the comparison table is a link annotation to reference n
    (fpdf2's own table took one link per cell, so the table's markers were plain text)."""
    from core.reports.export_blocks import split_references

    prose, _ = split_references(REPORT.markdown)
    table = "\n".join(line for line in prose.splitlines() if line.startswith("|"))
    assert re.findall(r"\[(\d)\]", table) == ["1", "2", "3"]
    internal = [str(annot.get_object()["/Dest"]) for page in pdf_reader.pages
                for annot in page.get("/Annots") or [] if annot.get_object().get("/Dest")]
    assert sorted(internal) == sorted(f"ref-{n}" for n in re.findall(r"\[(\d)\]", prose))
    assert len(internal) == 6


@pytest.mark.parametrize("fmt", ["docx", "pdf"])
def test_local_sources_are_named_in_their_corpus_folder_not_by_file_url(fmt: str) -> None:
    """The batch machine's absolute file: URLs mean nothing to whoever the document is sent to:
    a corpus file is named by its path in the corpus folder; web URLs stay links."""
    import zipfile

    from pypdf import PdfReader

    data = render(REPORT, fmt, corpus_dirs=[Path("/srv")])
    if fmt == "docx":
        xml = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
        text = re.sub(r"<[^>]+>", "", xml)
        rels = zipfile.ZipFile(io.BytesIO(data)).read("word/_rels/document.xml.rels").decode()
        assert "https://example.org/locks?a=1&amp;b=2" in rels and "file:" not in rels
    else:
        text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)
        assert b"file:" not in data
    assert "corpus/zh.pdf#page=2" in text and "file:" not in text
    assert "zh.pdf#page=2" in str(render(REPORT, "html"))  # no corpus folder known: its name


def test_breakable_marks_breaks_between_cjk_characters_with_the_no_break_rules() -> None:
    from core.text.cjk import ZWSP, breakable

    shown = breakable("线程，共享（内存）。A coroutine 使用DuckDB……好").replace(ZWSP, "|")
    assert shown == "线|程，|共|享|（内|存）。|A coroutine 使|用|DuckDB……|好"
    assert breakable("plain English, no change.") == "plain English, no change."
    assert breakable("存", before="内") == f"{ZWSP}存" and breakable("，", before="内") == "，"


CLOSING, OPENING = "，。、；：！？）」』", "（「『"


def test_pdf_breaks_chinese_lines_between_characters_not_only_at_spaces() -> None:
    """A line ended at the last space before a long run of Chinese (most of it blank), and a
    break anywhere would start lines with a comma: lines fill the width, none starts with
    closing punctuation or ends with opening punctuation, and the text reads back whole."""
    from pypdf import PdfReader

    from core.reports.export_pdf import to_pdf

    if not ("wqy" in find_font().name or "Droid" in find_font().name):
        pytest.skip("no CJK font installed")
    chinese = "线程共享同一进程的内存，需要用锁保护共享数据；「协程」在每个等待点让出控制权。" * 6
    paragraph = f"See the notes: {chinese}"
    report = Report(report_id="r_zh", topic="线程", title="线程", language="zh",
                    markdown=f"# 线程\n\n{paragraph}\n", engine="offline", citations=())
    text = PdfReader(io.BytesIO(to_pdf(report))).pages[0].extract_text()
    lines = [line for line in text.splitlines() if line.strip()]
    first = next(i for i, line in enumerate(lines) if line.startswith("See the notes:"))
    body = [line for line in lines[first:] if not line.startswith("report r_zh")]
    assert "线程共享" in body[0], lines  # not cut short at the space
    assert len(body) > 3, lines
    for line in body:
        assert line[0] not in CLOSING and line[-1] not in OPENING, lines
        assert "\u200b" not in line
    assert chinese in "".join(body).replace("See the notes: ", "", 1)


def test_a_chinese_report_without_a_cjk_font_fails_saying_what_to_install(
        tmp_path: Path, monkeypatch) -> None:
    """It was written mostly blank, with exit 0. A Latin report in a Latin font still is."""
    from core.reports import export_pdf

    monkeypatch.setattr(export_pdf, "SYSTEM_FONTS", ())  # the font lookup finds nothing
    with pytest.raises(ExportError, match="apt-get install fonts-wqy-microhei"):
        render(REPORT, "pdf")
    latin = next((f for f in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                              "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf")
                  if Path(f).is_file()), None)
    if latin is None:
        pytest.skip("no Latin-only font installed")
    monkeypatch.setattr(export_pdf, "SYSTEM_FONTS", (latin,))
    with pytest.raises(ExportError) as refused:
        render(REPORT, "pdf")
    said = str(refused.value)
    assert "no Chinese, Japanese or Korean glyphs" in said and "fonts-wqy-microhei" in said
    assert "\n" not in said
    english = Report(report_id="r_en", topic="locks", title="Locks", language="en",
                     markdown="# Locks\n\nA lock guards shared data.\n", engine="offline",
                     citations=())
    assert render(english, "pdf").startswith(b"%PDF-")
