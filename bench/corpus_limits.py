"""A corpus folder with hostile entries in it: what indexing costs and what it keeps out.

Writes a small corpus of good pages plus, each on its own, the entries that used to fail a topic
or leak into it: one 20 MB HTML page, a file symlinked from outside the folder, folders nested
1,000 deep, a binary file with a text name, a file of undecodable bytes, a 666 KB .docx whose
document.xml unpacks to 190 MB of 2.2 million short paragraphs and (when this process
may drop CAP_DAC_OVERRIDE, or is not root) a file nobody may read. Then, in a fresh process per
case (so high-water marks stay apart), it builds the index of the good pages plus that one entry
and prints, per case: whether indexing finished, its peak RSS (getrusage RUSAGE_SELF and
RUSAGE_CHILDREN, workers included), the files indexed, the skips the index build reported, and
whether text from outside the folder is searchable.

    .venv/bin/python bench/corpus_limits.py            # every case
    .venv/bin/python bench/corpus_limits.py --case html-20mb

Run it against an older checkout with `git stash` / `git worktree`: the child imports `core`
from --code (default: this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "TOPSECRET-outside-the-corpus"
GOOD_PAGES = 40

CHILD = r"""
import json, logging, resource, sys, time
sys.path.insert(0, sys.argv[1])
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep()); logging.getLogger().setLevel(logging.INFO)
from pathlib import Path
from core.search.corpus import CorpusSearch
search = CorpusSearch(Path(sys.argv[2]), Path(sys.argv[3]), workers=1)
out = {"ok": True}
began = time.perf_counter()
try:
    stats = search.index()
    out["files"] = stats.files
    out["skipped"] = getattr(stats, "skipped", None)
    hits = search.search("threads memory outside secret", k=10)
    out["leak"] = any(sys.argv[4] in (search.read(h).text if search.read(h) else "") for h in hits)
except BaseException as exc:  # the measurement: did it fail, and how
    out.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:100]}")
out["seconds"] = round(time.perf_counter() - began, 2)
out["rss_mb"] = round(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024)
out["log"] = [m.split(": ", 1)[-1] for m in records if ": indexed " in m]
print(json.dumps(out))
"""


def good_pages(folder: Path) -> None:
    for i in range(GOOD_PAGES):
        (folder / f"page{i:03}.md").write_text(
            f"# Threads {i}\n\nThreads share memory inside one process; page {i} says so "
            f"in its own words, and locks protect what they share.\n", encoding="utf-8")


def html_page(path: Path, megabytes: int) -> None:
    block = ("<div class='section'><h2>Threads and memory</h2><p>Threads share memory inside "
             "one process, and a lock protects shared data from two threads at once. "
             "<a href='#x'>A link</a> and <b>bold</b> text keep the parser busy.</p></div>\n")
    with path.open("w", encoding="utf-8") as fh:
        fh.write("<html><head><title>A big page</title></head><body><article>\n")
        for _ in range((megabytes * 1_000_000 - 200) // len(block)):
            fh.write(block)
        fh.write("</article></body></html>\n")


def paragraph_bomb(path: Path, paragraphs: int = 2_200_000) -> Path:
    """A .docx of about 666 KB whose word/document.xml unpacks to about 190 MB: millions of
    short paragraphs (it passes the 200 MB unpack cap; python-docx parsed it as one tree)."""
    import io
    import zipfile

    from docx import Document

    template = io.BytesIO()
    Document().save(template)
    para = ('<w:p><w:pPr><w:jc w:val="left"/></w:pPr><w:r><w:t>'
            'threads share mem</w:t></w:r></w:p>')
    with zipfile.ZipFile(template) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                out.writestr(info, source.read(info.filename))
                continue
            head, _, tail = source.read(info.filename).decode().partition("<w:body>")
            with out.open("word/document.xml", "w", force_zip64=True) as body:
                body.write((head + "<w:body>").encode())
                chunk = (para * 1000).encode()
                for _ in range(paragraphs // 1000):
                    body.write(chunk)
                body.write(("<w:sectPr/></w:body></w:document>").encode())
    return path


def build(case: str, corpus: Path, outside: Path) -> None:
    if case == "html-20mb":
        html_page(corpus / "big.html", 20)
    elif case == "symlink-out":
        secret = outside / "secret.md"
        secret.write_text(f"# Threads memory secret\n\n{SECRET} threads memory outside secret.\n")
        (corpus / "outside.md").symlink_to(secret)
    elif case == "nested-1000":
        folder = corpus
        for _ in range(1000):
            folder = folder / "d"
            folder.mkdir()
        (folder / "deep.md").write_text("# Deep\n\nThreads deep down.\n")
    elif case == "binary":
        (corpus / "image.md").write_bytes(bytes(range(256)) * 64)
    elif case == "undecodable":
        # Text with a long run of bytes no encoding reads (a corrupted download, say).
        rng = random.Random(7)
        junk = bytes(rng.randrange(128, 256) for _ in range(4000))
        (corpus / "corrupt.txt").write_bytes(b"Threads share memory. " * 100 + junk)
    elif case == "docx-bomb":
        paragraph_bomb(corpus / "paragraphs.docx")
    elif case == "unreadable":
        locked = corpus / "locked.md"
        locked.write_text("# Locked\n\nThreads locked away.\n")
        locked.chmod(0)


CASES = ("html-20mb", "symlink-out", "nested-1000", "binary", "undecodable", "unreadable",
         "docx-bomb")


def run_case(case: str, code: Path, scratch: Path) -> dict:
    where = scratch / case
    corpus, outside = where / "corpus", where / "outside"
    corpus.mkdir(parents=True)
    outside.mkdir()
    good_pages(corpus)
    build(case, corpus, outside)
    command = [sys.executable, "-c", CHILD, str(code), str(corpus), str(where / "index.duckdb"),
               SECRET]
    if case == "unreadable" and os.geteuid() == 0:
        if not shutil.which("setpriv"):
            return {"ok": None, "error": "root without setpriv: cannot make a file unreadable"}
        # Root reads a chmod 000 file; without these two capabilities it cannot, as a user.
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] + command
    done = subprocess.run(command, capture_output=True, text=True, cwd=code)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"ok": False, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=CASES, action="append")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose core/ to run")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="rf-corpus-limits-"))
    try:
        print(f"{'case':<13} {'indexed':>7} {'peak RSS':>9} {'s':>6}  {'leak':<5} result")
        for case in args.case or CASES:
            r = run_case(case, args.code.resolve(), scratch)
            result = (r.get("log") or [""])[0] if r.get("ok") else r.get("error", "")
            rss = f"{r['rss_mb']} MB" if "rss_mb" in r else "-"
            print(f"{case:<13} {str(r.get('files', '-')):>7} {rss:>9} "
                  f"{str(r.get('seconds', '-')):>6}  {str(r.get('leak', '-')):<5} "
                  f"{'ok' if r.get('ok') else 'FAILED'}: {result}")
    finally:
        # Iteratively: Python's tree walks recurse, and 1,000 folders deep is past their limit.
        subprocess.run(["rm", "-rf", str(scratch)], check=False)


if __name__ == "__main__":
    main()
