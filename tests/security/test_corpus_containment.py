"""A corpus folder cannot fail a topic or bring in text from outside itself.

Each hostile entry sits beside good pages: a symlink to a file outside the folder, folders nested
1,000 deep, a page over its size cap, a binary file and an undecodable one with text names, and a
file nobody may read. Indexing must finish, keep the good pages searchable, keep the outside
text out of every search and read, and count each skipped file with its reason. The unreadable
file is tested in a child process without CAP_DAC_OVERRIDE when the suite runs as root (CI
does): root reads a chmod 000 file, a user does not.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.models import TopicOptions
from core.search import corpus_extract, corpus_files, page_text as textlib
from core.search.corpus import CorpusSearch

SECRET = "TOPSECRET-hunter2-outside-the-corpus"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i in range(3):
        (folder / f"threads{i}.md").write_text(
            f"# Threads {i}\n\nThreads share memory inside one process; a lock protects "
            f"shared data (page {i}).\n", encoding="utf-8")
    return folder


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "private" / "notes.md"
    secret.parent.mkdir()
    secret.write_text(f"# Threads memory notes\n\n{SECRET}: threads share memory.\n")
    return secret


def _everything_found(search: CorpusSearch) -> str:
    hits = search.search("threads memory notes share lock", k=20)
    return "\n".join(search.read(h).text for h in hits) + "".join(h.url for h in hits)


def test_a_symlink_out_of_the_folder_is_skipped(corpus, outside, tmp_path):
    (corpus / "notes.md").symlink_to(outside)
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1)
    stats = search.index()
    assert SECRET not in _everything_found(search)
    assert stats.files == 3 and stats.skipped == {"outside the folder": 1}


def test_symlinks_inside_the_folder_still_count_and_the_option_follows_them_out(
        corpus, outside, tmp_path):
    (corpus / "alias.md").symlink_to(corpus / "threads0.md")
    (corpus / "notes.md").symlink_to(outside)
    inside = CorpusSearch(corpus, tmp_path / "a.duckdb", workers=1).index()
    assert inside.files == 4 and inside.skipped == {"outside the folder": 1}
    search = CorpusSearch(corpus, tmp_path / "b.duckdb", workers=1, follow_symlinks=True)
    assert search.index().skipped == {}
    assert SECRET in _everything_found(search)


def test_a_link_swapped_after_the_walk_is_refused_when_read(corpus, outside):
    # The walk saw a plain file; by the time it is read it points out of the folder.
    (corpus / "notes.md").write_text("# Notes\n\nThreads.\n")
    job = corpus_extract.FileJob("notes.md", 1, 1, None)
    (corpus / "notes.md").unlink()
    (corpus / "notes.md").symlink_to(outside)
    extraction = corpus_extract.extract_file(corpus, job, 1500)
    assert extraction.skipped == "outside the folder" and SECRET not in extraction.text


def test_folders_nested_a_thousand_deep_are_skipped_not_a_recursion_error(corpus, tmp_path):
    folder = corpus
    for depth in range(1000):
        folder = folder / "d"
        folder.mkdir()
        if depth == 5:
            (folder / "shallow.md").write_text("# Shallow\n\nThreads five folders down.\n")
    (folder / "deep.md").write_text("# Deep\n\nThreads a thousand folders down.\n")
    try:
        search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1)
        stats = search.index()
        assert stats.files == 4 and stats.skipped == {"too deep": 1}
        assert any("shallow" in h.url for h in search.search("threads five folders", k=5))
    finally:
        subprocess.run(["rm", "-rf", str(corpus / "d")], check=False)  # Python's walks recurse


def test_an_oversized_page_is_skipped_before_it_is_parsed(corpus, tmp_path, monkeypatch):
    parsed: list[int] = []
    real = textlib.extract_html
    monkeypatch.setattr(textlib, "extract_html",
                        lambda html, url=None: parsed.append(len(html)) or real(html, url))
    (corpus / "big.html").write_text("<html><body><p>" + "Threads share memory. " * 12_000
                                     + "</p></body></html>")
    (corpus / "small.html").write_text("<html><body><article><p>Threads share memory with "
                                       "their process, small page.</p></article></body></html>")
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1, max_html_bytes=100_000)
    stats = search.index()
    assert stats.skipped == {"too large": 1} and stats.files == 4
    assert parsed and max(parsed) < 100_000  # only the small page reached the parser


def test_a_file_grown_past_its_cap_after_the_walk_is_refused_when_read(corpus):
    (corpus / "log.txt").write_text("Threads. " * 1000)
    job = corpus_extract.FileJob("log.txt", 10, 1, None)
    limits = corpus_extract.ReadLimits(max_file_bytes=5_000)
    assert corpus_extract.extract_file(corpus, job, 1500, limits).skipped == "too large"


def test_binary_and_undecodable_files_are_skipped_with_their_reason(corpus, tmp_path):
    (corpus / "image.md").write_bytes(bytes(range(256)) * 64)
    rng = random.Random(3)
    (corpus / "corrupt.txt").write_bytes(b"Threads share memory. " * 20
                                         + bytes(rng.randrange(128, 256) for _ in range(3000)))
    (corpus / "latin1.txt").write_bytes("Threads in a caf\xe9, na\xefvely. ".encode("latin-1")
                                        * 50)  # not UTF-8, still text: kept
    stats = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1).index()
    assert stats.skipped == {"binary": 1, "undecodable": 1}
    assert stats.files == 4


def test_skips_are_logged_once_per_build_and_not_read_again(corpus, outside, tmp_path, caplog):
    (corpus / "notes.md").symlink_to(outside)
    (corpus / "image.md").write_bytes(bytes(range(256)) * 64)
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1)
    with caplog.at_level(logging.INFO, logger="core.search.corpus"):
        first = search.index()
        again = search.index()
    lines = [r.getMessage() for r in caplog.records if "indexed" in r.getMessage()]
    assert lines[0].endswith("indexed 3, skipped 2: 1 outside the folder, 1 binary"), lines
    assert (again.extracted, again.rebuilt) == (0, False)  # the binary file is not read again
    assert first.skipped == again.skipped


CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from core.search.corpus import CorpusSearch
search = CorpusSearch(Path(sys.argv[2]), Path(sys.argv[3]), workers=1)
try:
    stats = search.index()
    hits = search.search("threads memory", k=10)
    print(json.dumps({"skipped": stats.skipped, "files": stats.files,
                      "hits": sorted(h.url.rsplit("/", 1)[-1] for h in hits)}))
except BaseException as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def test_an_unreadable_file_is_skipped_not_a_permission_error(corpus, tmp_path):
    locked = corpus / "locked.md"
    locked.write_text("# Locked\n\nThreads share memory, locked away.\n")
    locked.chmod(0)
    command = [sys.executable, "-c", CHILD, str(ROOT), str(corpus), str(tmp_path / "i.duckdb")]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: a chmod 000 file is readable")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] + command
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    finally:
        locked.chmod(0o600)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in result, result
    assert result["skipped"] == {"unreadable": 1} and result["files"] == 3
    assert len(result["hits"]) == 3


# -- through a topic ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_topic_over_a_hostile_corpus_completes_without_the_outside_text(corpus, outside,
                                                                           tmp_path):
    from tasks import contexts
    from core.store import query_readonly
    from flows.topic import research_topic

    (corpus / "notes.md").symlink_to(outside)
    (corpus / "image.md").write_bytes(bytes(range(256)) * 64)
    folder = corpus
    for _ in range(60):
        folder = folder / "d"
        folder.mkdir()
    (folder / "deep.md").write_text("# Deep\n\nThreads deep down.\n")
    contexts.close()
    db = tmp_path / "store.duckdb"
    try:
        state = research_topic(topic="How do threads share memory? (hostile corpus)",
                               batch_id="hostile", model="offline", search="corpus", corpus_dir=str(corpus),
                               db_path=str(db), return_state=True,
                               options=TopicOptions(max_subquestions=2, max_rounds=1))
    finally:
        contexts.close()
    assert state.is_completed(), state.message
    texts = [t for (t,) in query_readonly(db, "SELECT text FROM sources")[1]]
    report = query_readonly(db, "SELECT markdown FROM reports")[1][0][0]
    assert texts and not [t for t in texts if SECRET in t]
    assert SECRET not in report


DOCX_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from core.search.documents import document_text
raw = open(sys.argv[2], "rb").read()
began = time.perf_counter()
try:
    doc = document_text("paragraphs.docx", raw)
    out = {"chars": len(doc.text), "refused": None}
except Exception as exc:
    out = {"refused": str(exc)}
out["seconds"] = time.perf_counter() - began
# VmHWM: this process's own peak (ru_maxrss keeps the forking pytest worker's across exec)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
out["rss_mb"] = (int(hwm[0].split()[1]) if hwm else
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024
print(json.dumps(out))
"""


def test_a_docx_of_millions_of_paragraphs_is_read_in_bounded_memory(tmp_path):
    """Issue 35 (3): a 666 KB .docx whose document.xml unpacks to 190 MB of 2.2 million short
    paragraphs cost 1.4 GB (2.5 GB measured with the bench) and over a minute per worker."""
    from bench.corpus_limits import paragraph_bomb

    bomb = paragraph_bomb(tmp_path / "paragraphs.docx")
    assert bomb.stat().st_size < 1_000_000
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", DOCX_CHILD, str(root), str(bomb)],
                          capture_output=True, text=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rss_mb"] < 300, result
    assert result["seconds"] < 30, result
    assert result["refused"] is None and 0 < result["chars"] <= 2_000_000, result


def test_a_deck_whose_xml_would_be_parsed_whole_past_its_cap_is_refused(tmp_path):
    """python-pptx parses every XML part of a deck when it opens it: their total is capped."""
    import io
    import zipfile

    from pptx import Presentation

    from core.search.documents import MAX_DECK_XML, document_text
    from core.search.fetch_types import PageRefused

    deck = io.BytesIO()
    Presentation().save(deck)
    bloated = io.BytesIO()
    with zipfile.ZipFile(deck) as source, zipfile.ZipFile(bloated, "w",
                                                          zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            out.writestr(info, source.read(info.filename))
        out.writestr("ppt/slides/slide99.xml", b"<a/>" * (MAX_DECK_XML // 4 + 1))
    with pytest.raises(PageRefused, match="XML unpacks to"):
        document_text("deck.pptx", bloated.getvalue())


def test_a_hard_link_is_skipped_unless_allowed_and_reported_like_a_symlink(corpus, outside,
                                                                          tmp_path):
    """Issue 35 (9): a hard link to a file outside the corpus was indexed: a path check cannot
    see it, so a file with more than one link is skipped unless allowed."""
    os.link(outside, corpus / "notes.md")
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1)
    stats = search.index()
    assert SECRET not in _everything_found(search)
    assert stats.files == 3 and stats.skipped == {"hard link": 1}
    with pytest.raises(corpus_files.Skipped, match="hard link"):
        corpus_files.read_file(corpus.resolve(), "notes.md", corpus_files.ReadLimits())
    allowed = CorpusSearch(corpus, tmp_path / "b.duckdb", workers=1, allow_hardlinks=True)
    assert allowed.index().skipped == {}
    assert SECRET in _everything_found(allowed)


def test_encrypted_pdfs_do_what_the_readme_says(tmp_path):
    """Issue 35 (8): a PDF encrypted with an empty open password was decrypted and indexed,
    while the README said encrypted files are indexed without text. Reading it is kept (any
    viewer opens it without asking; most "protected" manuals are only print-restricted) and
    the README now says so; a PDF that needs a password is still refused."""
    from pypdf import PdfReader, PdfWriter

    from core.search.documents import document_text
    from core.search.fetch_types import PageRefused
    from tests.fakes.documents import write_pdf

    plain = write_pdf(tmp_path / "plain.pdf", "Locks", ["Threads share memory; a lock guards it."])

    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=PdfReader(plain))
        writer.encrypt(user_password=user_password, owner_password="owner-only-pw",
                       algorithm="RC4-128")
        path = tmp_path / f"locked-{len(user_password)}.pdf"
        writer.write(path)
        return path.read_bytes()

    assert "a lock guards it" in document_text("open.pdf", encrypted("")).text
    with pytest.raises(PageRefused, match="needs a password"):
        document_text("locked.pdf", encrypted("a-real-password"))
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "encrypted with an empty open password" in readme
    assert "a file that needs a password to open" in readme


def test_an_extraction_worker_has_a_memory_cap_and_a_file_past_it_is_skipped(corpus,
                                                                             monkeypatch):
    """The second line of defence behind each reader's caps: a worker's address space is
    capped, and a file whose extraction runs out of it is skipped ("too large")."""
    import resource
    from concurrent.futures import ProcessPoolExecutor

    from core.search import corpus_build
    from core.search.corpus_extract import FileJob, extract_file

    pool = corpus_build._pool(1)
    assert isinstance(pool, ProcessPoolExecutor)
    with pool:
        soft, _ = pool.submit(resource.getrlimit, resource.RLIMIT_AS).result()
    assert 0 < soft <= corpus_build.WORKER_MEMORY

    def exhausted(rel, raw):
        raise MemoryError

    monkeypatch.setattr(corpus_extract, "extract_text", exhausted)
    size = (corpus / "threads0.md").stat().st_size
    done = extract_file(corpus.resolve(), FileJob("threads0.md", size, 0, None), 1500)
    assert done.skipped == "too large"
