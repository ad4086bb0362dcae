"""The default offline corpus: CPython's own documentation, written out to a cache folder.

`materialize_pydocs(cache_dir)` writes the language-reference topics that ship in
`pydoc_data.topics` (one .txt per topic) and the pydoc text of a curated list of standard-library
modules (one .md per module). Nothing is copied into the repository; the text comes from the
running interpreter. A manifest records the Python version and module list, so a new interpreter
re-materializes and an unchanged one returns at once.

Why a curated list: importing every stdlib module has side effects (`antigravity` opens a browser,
`this` prints, GUI modules need a display). Modules that fail to import here are skipped.

Writes are atomic: the corpus is built in a sibling temp folder and renamed into place, so two
processes racing to build it never leave a half-written folder behind.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pydoc
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

MODULES: tuple[str, ...] = (
    "threading", "multiprocessing", "multiprocessing.pool", "asyncio", "asyncio.tasks",
    "asyncio.events", "asyncio.queues", "asyncio.locks", "asyncio.subprocess",
    "concurrent.futures", "queue", "subprocess", "socket", "selectors", "json", "pickle", "csv",
    "sqlite3", "collections", "functools", "itertools", "dataclasses", "typing", "pathlib", "os",
    "re", "logging", "unittest", "http.client", "urllib.request", "zipfile", "tarfile", "hashlib",
    "random", "statistics", "decimal", "datetime", "heapq", "bisect", "contextlib", "abc", "enum",
    "io", "tempfile", "shutil", "weakref", "gc", "time", "sched", "signal", "argparse", "string",
    "textwrap", "struct", "copy", "operator", "math", "fractions", "traceback", "warnings",
    "inspect", "dis", "ast", "timeit", "secrets", "base64", "gzip", "uuid",
)
MANIFEST = "MANIFEST.json"
_BUILDING = threading.Lock()
_OVERSTRIKE = re.compile(r".\x08")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_GUTTER = re.compile(r"^[ |]*\|", re.MULTILINE)  # pydoc's " |  " class-body margins


def materialize_pydocs(cache_dir: Path, modules: tuple[str, ...] = MODULES) -> Path:
    """Return `cache_dir` holding the CPython docs corpus, building it first if missing or stale."""
    cache_dir = Path(cache_dir)
    wanted = _manifest(modules)
    if _read_manifest(cache_dir) == wanted:
        return cache_dir
    # A batch's topics start together: one thread builds, the others wait and find its corpus
    # (pydoc rendering in several threads at once also trips over half-imported modules).
    with _BUILDING:
        if _read_manifest(cache_dir) == wanted:
            return cache_dir
        _build(cache_dir, modules, wanted)
    return cache_dir


def _build(cache_dir: Path, modules: tuple[str, ...], wanted: dict) -> None:
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.", dir=cache_dir.parent))
    try:
        _write_corpus(tmp, modules)
        (tmp / MANIFEST).write_text(json.dumps(wanted, indent=1), encoding="utf-8")
        _swap_into_place(tmp, cache_dir, wanted)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _manifest(modules: tuple[str, ...]) -> dict:
    return {"python": sys.version, "modules": hashlib.sha256(
        "\n".join(modules).encode()).hexdigest()[:16], "format": 4}


def _read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _swap_into_place(tmp: Path, target: Path, wanted: dict) -> None:
    """Rename tmp to target. If another process got there first with a good corpus, keep
    theirs; if target is stale, move it aside first (rename onto a non-empty dir fails)."""
    for _ in range(3):
        try:
            os.rename(tmp, target)
            return
        except OSError:
            if _read_manifest(target) == wanted:
                return
            aside = target.with_name(f".{target.name}.old.{os.getpid()}")
            try:
                os.rename(target, aside)
            except OSError:
                continue  # someone else moved it; try again
            shutil.rmtree(aside, ignore_errors=True)
    raise OSError(f"could not move the docs corpus into place at {target}")


def _write_corpus(folder: Path, modules: tuple[str, ...]) -> None:
    from pydoc_data.topics import topics  # imported here: nothing happens at import time

    topic_dir = folder / "reference"
    topic_dir.mkdir()
    for key, text in sorted(topics.items()):
        (topic_dir / f"{_UNSAFE.sub('_', key)}.txt").write_text(text, encoding="utf-8")
    lib_dir = folder / "library"
    lib_dir.mkdir()
    for name in modules:
        text = module_doc(name)
        if text:
            (lib_dir / f"{name}.md").write_text(text, encoding="utf-8")


def module_doc(name: str, attempts: int = 3) -> str | None:
    """pydoc's plain-text page for module `name` under a markdown title; None if unimportable."""
    for attempt in range(attempts):
        try:
            module = importlib.import_module(name)
            body = pydoc.render_doc(module, title="%s", renderer=pydoc.plaintext)
            break
        except ModuleNotFoundError:
            return None  # missing from this build: simply left out
        except Exception:  # noqa: BLE001
            # Rendering imports a package's lazy submodules (concurrent.futures): while another
            # thread of the run imports them too, one side may see a half-initialised module.
            # Once cached, the corpus would lack the page for good, so try again.
            if attempt == attempts - 1:
                return None
            time.sleep(0.2 * (attempt + 1))
    summary = (module.__doc__ or "").strip().splitlines()
    headline = f"{name} — {summary[0].strip()}" if summary else name
    body = _GUTTER.sub(lambda m: " " * len(m.group(0)), _OVERSTRIKE.sub("", body))
    return f"# {headline}\n\n{_drop_builtin_inherited(_uncommented_description(body))}"


_COMMENT = re.compile(r"^(\s+)# ?")


def _uncommented_description(body: str) -> str:
    """A package without a docstring is described by its leading comments ("# Package analogous
    to 'threading.py' but using processes"): kept as prose, without the markers that split its
    sentences at every line."""
    out: list[str] = []
    inside = False
    for line in body.splitlines():
        if line and not line[0].isspace():  # a section header: NAME, DESCRIPTION, CLASSES...
            inside = line.strip() == "DESCRIPTION"
        elif inside:
            line = _COMMENT.sub(r"\1", line)
        out.append(line)
    return "\n".join(out) + "\n"


_INHERITED = re.compile(r"^(\s*)\S.* inherited from builtins\.\w+:\s*$")


def _drop_builtin_inherited(body: str) -> str:
    """Remove the 'Methods inherited from builtins.object:' style sections: the same dunder
    boilerplate repeated in every class, which only adds noise to search."""
    out: list[str] = []
    skip_indent: int | None = None
    for line in body.splitlines():
        if skip_indent is not None:
            indent = len(line) - len(line.lstrip())
            if line.strip().startswith("-----") or (line.strip() and indent < skip_indent):
                skip_indent = None
            else:
                continue
        match = _INHERITED.match(line)
        if match:
            skip_indent = len(match.group(1))
            if out and out[-1].strip().startswith("-----"):
                out.pop()  # the separator that introduced the dropped section
            continue
        out.append(line)
    return "\n".join(out) + "\n"
