"""The three Debian documentation packages `bench/title_topics.py` generates topics from, read
as pages with the subject each one's title names: Python's and PostgreSQL's HTML manuals page by
page, and Debian Reference's Chinese chapters section by section (a chapter holds dozens of
subjects, so the gold is the section). Each corpus is copied to a folder of the bench's own.
"""

from __future__ import annotations

import html as htmllib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator


@dataclass(frozen=True)
class Page:
    path: Path  # the file, inside the corpus folder
    subject: str  # read from its title
    twins: tuple[Path, ...] = ()  # the same page in another format (python's _sources/*.txt)
    section: str = ""  # the gold section's text (squeezed), when the page holds many subjects


@dataclass(frozen=True)
class Corpus:
    name: str
    language: str
    source: Path  # where the Debian package put it
    pages: Callable[[Path], list[Page]]  # the eligible pages of a copy of it
    copy: Callable[[Path, Path], None]  # source -> a folder of the bench's own


def _title(path: Path) -> str:
    raw = path.read_text(encoding="utf-8", errors="replace")
    m = re.search(r"<title[^>]*>(.*?)</title>", raw, re.S | re.I)
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", m.group(1))).split()) if m else ""


_NUMBERING = re.compile(r"^(?:(?:Chapter|Part|Appendix)\s+[\dIVXLC]+[.:]?|[A-Z]?\d+(?:\.\d+)*\.|"
                        r"[A-Z]\.\d+(?:\.\d+)*\.|第\s*\d+\s*章)\s*", re.I)


def subject_of(title: str) -> str:
    """The subject a page's title names: its name before a " — " description, without
    numbering or the manual's own suffix."""
    title = re.sub(r"\s+[—-]\s+Python [\d.]+ documentation$", "", title)
    title = title.split(" — ")[0].strip()
    return _NUMBERING.sub("", title).strip(" .:")


_PY_SKIP = re.compile(r"(?:^|/)(?:genindex[^/]*|py-modindex|search|index|contents|copyright|"
                      r"license|about|bugs|download|glossary)\.html$|^(?:whatsnew|faq|_static|"
                      r"_sources|_images|_downloads|includes)/")


def _python_pages(folder: Path) -> list[Page]:
    out = []
    for path in sorted(folder.rglob("*.html")):
        rel = path.relative_to(folder).as_posix()
        if _PY_SKIP.search(rel):
            continue
        subject = subject_of(_title(path))
        twin = folder / "_sources" / (rel[:-len(".html")] + ".rst.txt")
        if len(subject) >= 3 and not subject.lower().startswith(("what's new", "changelog")):
            out.append(Page(path, subject, (twin,) if twin.exists() else ()))
    return out


_PG_SKIP = re.compile(r"^(?:index|bookindex|biblio|legalnotice|release[-\w]*|appendix-obsolete"
                      r"[-\w]*|docguide[-\w]*)\.html$")


def _postgres_pages(folder: Path) -> list[Page]:
    out = []
    for path in sorted(folder.glob("*.html")):
        if _PG_SKIP.match(path.name):
            continue
        subject = subject_of(_title(path))
        if len(subject) >= 3 and not subject.lower().startswith(("release", "part ")):
            out.append(Page(path, subject))
    return out


_HEADING = re.compile(r"<h([1-4])\b[^>]*>(.*?)</h\1>", re.S | re.I)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", htmllib.unescape(text))


def _text_of(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", re.sub(
        r"<(script|style)\b.*?</\1>", " ", fragment, flags=re.S | re.I)))


def _sections(path: Path) -> Iterator[tuple[str, str]]:
    """(heading, text under it up to the next heading of its level or higher) of a page."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    heads = [(m.start(), m.end(), int(m.group(1)), " ".join(_text_of(m.group(2)).split()))
             for m in _HEADING.finditer(raw)]
    for i, (_start, end, level, text) in enumerate(heads):
        stop = next((s for s, _e, lv, _t in heads[i + 1:] if lv <= level), len(raw))
        yield text, _text_of(raw[end:stop])


def _zh_pages(folder: Path) -> list[Page]:
    out = []
    for path in sorted(folder.glob("ch*.zh-cn.html")):
        for heading, text in _sections(path):
            subject = _NUMBERING.sub("", heading).strip()
            if heading == subject or len(re.findall(r"[\u4e00-\u9fff]", subject)) < 2:
                continue  # the chapter's own title, or a heading without Chinese words
            if len(squeeze(text)) >= 80:  # a heading over nothing but subheadings is no page
                out.append(Page(path, subject, section=squeeze(text)))
    return out


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, dirs_exist_ok=True)


def _copy_zh(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.zh-cn.html"):
        shutil.copyfile(path, target / path.name)


CORPORA = {
    "python": Corpus("python", "en", Path("/usr/share/doc/python3.11/html"), _python_pages,
                     _copy_tree),
    "postgres": Corpus("postgres", "en", Path("/usr/share/doc/postgresql-doc-15/html"),
                       _postgres_pages, _copy_tree),
    "zh": Corpus("zh", "zh", Path("/usr/share/debian-reference"), _zh_pages, _copy_zh),
}
