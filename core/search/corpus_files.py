"""Which files of a corpus folder are read, and reading one without leaving the folder.

A corpus folder is untrusted input: anyone who can write to it can plant a symlink to a file of
yours, folders nested a thousand deep, a 20 MB page, a binary or a file nobody may read. None of
them may fail a topic or bring in text from outside the folder, so each is skipped, counted with
its reason and reported once per index build:

    indexed 240, skipped 3: 1 unreadable, 1 outside the folder, 1 too large

- `walk(root, limits)` lists the files to index without recursion (any depth is safe to look
  at), skipping hidden entries, folders deeper than `limits.max_depth` ("too deep"), folders it
  cannot list and files it cannot stat ("unreadable"), file symlinks whose target is outside the
  folder ("outside the folder", unless `limits.follow_symlinks`), files with more than one hard
  link ("hard link", unless `limits.allow_hardlinks`: a hard link to a file outside the folder
  looks like any file inside it, so no path check can tell) and files over their size cap
  ("too large": HTML has a smaller one, since parsing it costs memory and time far beyond its
  size). Folder symlinks are never followed.
- `read_file(root, rel, limits)` opens a listed file and checks again on what it opened (a file
  swapped for a symlink after the walk, or grown past its cap): on Linux the containment check
  reads the opened file's own path from /proc. Then `decode(raw)` turns the bytes into text or
  says why not ("binary", "undecodable"). Each refusal is a `Skipped` with its reason.

What it does not do: extract text (core.search.corpus_extract) or store anything.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from trafilatura.utils import detect_encoding

from core.search.page_text import looks_binary

EXTENSIONS = frozenset({".html", ".htm", ".md", ".txt", ".pdf", ".docx", ".pptx"})
HTML = (".html", ".htm")
# The order reasons are listed in; each is a key of the `skipped` counts.
REASONS = ("unreadable", "outside the folder", "hard link", "too deep", "too large", "binary",
           "undecodable")
_REPLACED_SHARE = 0.01  # more U+FFFD than this once decoding gave up: not text worth indexing


class Skipped(Exception):
    """A file that is not indexed, and why (one of REASONS)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ReadLimits:
    """What may be read: sizes in bytes, folder depth below the root, symlinks out, files
    with more than one hard link."""

    max_file_bytes: int = 20_000_000
    max_html_bytes: int = 2_000_000
    max_depth: int = 32
    follow_symlinks: bool = False
    allow_hardlinks: bool = False

    def cap(self, rel: str) -> int:
        return self.max_html_bytes if rel.lower().endswith(HTML) else self.max_file_bytes


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int


def walk(root: Path, limits: ReadLimits) -> tuple[dict[str, FileStat], Counter[str]]:
    """(posix path relative to root -> stat) of the files to index, sorted, and the skips."""
    found: dict[str, FileStat] = {}
    skipped: Counter[str] = Counter()
    folders: list[tuple[str, str, int]] = [(str(root), "", 0)]  # (path, rel prefix, depth)
    while folders:
        folder, prefix, depth = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            skipped["unreadable"] += 1
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth >= limits.max_depth:
                        skipped["too deep"] += 1
                    else:
                        folders.append((entry.path, rel + "/", depth + 1))
                    continue
                if os.path.splitext(entry.name)[1].lower() not in EXTENSIONS:
                    continue
                if (entry.is_symlink() and not limits.follow_symlinks
                        and not inside(root, os.path.realpath(entry.path))):
                    skipped["outside the folder"] += 1
                    continue
                st = entry.stat()  # the target's, for a symlink
            except OSError:
                skipped["unreadable"] += 1
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a folder symlink, a FIFO, a device: not a document
            if st.st_nlink > 1 and not limits.allow_hardlinks:
                skipped["hard link"] += 1
                continue
            if st.st_size > limits.cap(rel):
                skipped["too large"] += 1
                continue
            found[rel] = FileStat(st.st_size, st.st_mtime_ns)
    return dict(sorted(found.items())), skipped


def inside(root: Path, path: str) -> bool:
    """Whether `path` (already resolved) is `root` (resolved) or below it."""
    try:
        return os.path.commonpath([str(root), path]) == str(root)
    except ValueError:  # different drives, or a relative path
        return False


def read_file(root: Path, rel: str, limits: ReadLimits) -> bytes:
    """The bytes of one listed file, or Skipped: unreadable, outside the folder, too large."""
    path = root / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Skipped("unreadable") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Skipped("unreadable")
        if not limits.follow_symlinks and not inside(root, _opened_path(fd, path)):
            raise Skipped("outside the folder")
        if st.st_nlink > 1 and not limits.allow_hardlinks:
            raise Skipped("hard link")
        cap = limits.cap(rel)
        if st.st_size > cap:
            raise Skipped("too large")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(cap + 1)  # the cap holds even for a file growing as we read
    except OSError as exc:
        raise Skipped("unreadable") from exc
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise Skipped("too large")
    return raw


def _opened_path(fd: int, path: Path) -> str:
    """The real path of what `fd` opened: from /proc on Linux (no race with a swapped link),
    else resolved from the name."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def decode(raw: bytes) -> str:
    """Text of a document's bytes, or Skipped: "binary", "undecodable".

    A byte-order mark decides first (UTF-16 text is full of NULs), then bytes that are no text
    in any encoding are binary, then UTF-8, then the encodings detection proposes. Nothing is
    decompressed. When every encoding fails, a document with a few bad bytes keeps them as
    U+FFFD; one with more than 1% is undecodable.
    """
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"),
                          (b"\xfe\xff", "utf-16")):
        if raw.startswith(bom):
            try:
                return raw.decode(encoding)
            except UnicodeDecodeError as exc:
                raise Skipped("undecodable") from exc
    if looks_binary(raw):
        raise Skipped("binary")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for encoding in detect_encoding(raw):
        try:
            return raw.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    text = raw.decode("utf-8", errors="replace")
    if text.count("\ufffd") > _REPLACED_SHARE * max(1, len(text)):
        raise Skipped("undecodable")
    return text


def summary(indexed: int, skipped: Counter[str] | dict[str, int]) -> str:
    """`indexed 240, skipped 3: 1 unreadable, 1 outside the folder, 1 too large`."""
    total = sum(skipped.values())
    if not total:
        return f"indexed {indexed}"
    parts = [f"{skipped[r]} {r}" for r in REASONS if skipped.get(r)]
    parts += [f"{n} {r}" for r, n in sorted(skipped.items()) if r not in REASONS and n]
    return f"indexed {indexed}, skipped {total}: " + ", ".join(parts)
