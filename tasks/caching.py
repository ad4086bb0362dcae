"""Cross-run result caching shared by the research tasks (ARCHITECTURE.md, "Caching and reruns").

The default policy includes the run id, so nothing would carry across runs; inputs + task source
does, and a UI retry of a failed run reuses what already succeeded. Inputs are pydantic models
(topic, plan, transcript, RunConfig), never clients or keys. The task source alone would miss a
change in `core/` (where the logic lives), so the code of `core` is part of the key as well: its
syntax, not its comments.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from prefect.cache_policies import INPUTS, TASK_SOURCE, CacheKeyFnPolicy

import core
from core.settings import Settings
from tasks.result_serializer import DATA, METADATA


_computing = threading.Lock()


@functools.lru_cache(maxsize=1)
def core_fingerprint() -> str:
    """A hash of the code in `core/`, computed once per process.

    It hashes each module's syntax tree without docstrings, so an edit to a comment, a docstring
    or the layout of a line (a checkout updated between a failure and its retry, say) does not
    make every finished call be paid for again; a change to what the code does still does.
    Parsing every module costs ~0.4 s of CPU on the first task of a run, so the tree's hash is
    remembered on disk against a hash of the files' bytes (a few ms to recompute).
    """
    with _computing:  # topics starting together wait for one parse instead of each parsing
        return code_fingerprint(Path(core.__file__).parent,
                                Settings.load().cache_dir / "code-fingerprints.json")


def code_fingerprint(root: Path, memo_path: Path) -> str:
    """The hash of the syntax of every module under `root`, remembered in `memo_path`."""
    files = sorted(root.rglob("*.py"))
    raw = hashlib.sha256()
    for path in files:
        raw.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    memo = _Memo(memo_path)
    known = memo.get(raw.hexdigest())
    if known:
        return known
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(_code_only(path.read_text(encoding="utf-8")).encode())
    fingerprint = digest.hexdigest()[:16]
    memo.put(raw.hexdigest(), fingerprint)
    return fingerprint


@dataclass(frozen=True)
class _Memo:
    """A small JSON map on disk; unreadable or unwritable, it is simply not used."""

    path: Path

    def get(self, key: str) -> str:
        try:
            value = json.loads(self.path.read_text(encoding="utf-8")).get(key, "")
        except (OSError, ValueError, AttributeError):
            return ""
        return value if isinstance(value, str) else ""

    def put(self, key: str, value: str, keep: int = 32) -> None:
        try:
            known = json.loads(self.path.read_text(encoding="utf-8"))
            known = known if isinstance(known, dict) else {}
        except (OSError, ValueError):
            known = {}
        known.pop(key, None)
        known[key] = value
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            spare = self.path.with_suffix(f".{os.getpid()}.tmp")
            spare.write_text(json.dumps(dict(list(known.items())[-keep:])), encoding="utf-8")
            spare.replace(self.path)  # atomic: a reader sees the old map or the new one
        except OSError:
            pass


def _code_only(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


CORE_CODE = CacheKeyFnPolicy(cache_key_fn=lambda _ctx, _params: core_fingerprint())


# -- what a step read ------------------------------------------------------------------------
# A step that reads the corpus keys its cache on what it read, not only on what it was asked:
# a retry, a rerun or a new edition after the user adds, edits or removes files sees them, and a
# step the change does not touch is served from the cache. A web search observes the world once
# per edition instead (its searches are billed; the edition is in the key).
RESULTS_PER_FINGERPRINT = 10  # hits per search that may change a sub-question's reading


def _topic_words(_ctx, params: dict) -> str:
    """The plan reads the topic against the corpus's vocabulary (core.relevance.subject): the
    counts of the topic's words are part of its key (a page that adds a word the topic asks
    about makes a new plan, whose parts can be answered)."""
    from core.relevance.subject import content_words
    from core.search.registry import vocabulary_of
    from tasks.contexts import context_for

    config, topic = params.get("config"), params.get("topic")
    if config is None or topic is None or config.search != "corpus":
        return ""
    vocabulary = vocabulary_of(context_for(config).search)
    if vocabulary is None:
        return ""
    counted = vocabulary([w for w, _, _ in content_words(topic.text)])
    return hashlib.sha256(json.dumps([counted.documents, sorted(
        (w, s.documents, s.titled) for w, s in counted.words.items())]).encode()).hexdigest()[:24]


def _sources_seen(_ctx, params: dict) -> str:
    """A sub-question's research over a corpus keys on the documents its searches could read
    (and their contents): core.search.corpus.CorpusSearch.fingerprint. Over the web, on its
    edition."""
    from core.search.corpus import CorpusSearch
    from tasks.contexts import context_for

    config, subquestion = params.get("config"), params.get("subquestion")
    search = context_for(config).search if config is not None else None
    if subquestion is None or not isinstance(search, CorpusSearch):
        return f"edition:{params.get('edition', '')}"
    asked = [subquestion.question, *subquestion.queries, " ".join(subquestion.focus)]
    return "corpus:" + search.fingerprint(asked, RESULTS_PER_FINGERPRINT)


def keep_out_of_cache() -> None:
    """The running task's result is not written under its key: an answer of "nothing found"
    is never served to a later run, whose sources or search may have changed."""
    from prefect.transactions import get_transaction

    active = get_transaction()
    if active is not None:
        active.write_on_commit = False


TOPIC_WORDS = CacheKeyFnPolicy(cache_key_fn=_topic_words)
SOURCES_SEEN = CacheKeyFnPolicy(cache_key_fn=_sources_seen)
# Results persist as data that cannot run code when loaded: written by DataSerializer, their
# metadata kept where only what DataSerializer wrote is handed back (tasks.result_serializer).
def cache_policy(*, ignore: tuple[str, ...] = (), reads=None):
    """INPUTS (less the `ignore`d parameters) + TASK_SOURCE + CORE_CODE (+ `reads`: what the
    step read, TOPIC_WORDS or SOURCES_SEEN), its metadata in the key storage that hands back
    only what DataSerializer wrote. Every cached task takes its policy from here: a policy built
    elsewhere would load whatever a tampered file names."""
    inputs = INPUTS
    for name in ignore:
        inputs = inputs - name
    policy = inputs + TASK_SOURCE + CORE_CODE
    if reads is not None:
        policy = policy + reads
    return policy.configure(key_storage=METADATA)


CACHE_POLICY = cache_policy()
CACHE_EXPIRATION = timedelta(hours=24)
# Steps whose inputs carry everything their answer depends on (a page's text, a transcript,
# findings) may be reused by the next editions of a schedule: a nightly or weekly batch finds
# yesterday's answers to unchanged inputs. Steps that observe the world (a search, a fetch,
# the research of a sub-question) take the edition as an input instead, so each edition asks.
LASTING_EXPIRATION = timedelta(days=8)

CACHED = dict(cache_policy=CACHE_POLICY, cache_expiration=CACHE_EXPIRATION, persist_result=True,
              result_serializer=DATA)
LASTING = dict(cache_policy=CACHE_POLICY, cache_expiration=LASTING_EXPIRATION,
               persist_result=True, result_serializer=DATA)
# The plan: what it was asked, and what the corpus says of the topic's words.
PLANNING = {**LASTING, "cache_policy": cache_policy(reads=TOPIC_WORDS)}
# A sub-question's research: what it was asked, and what its searches could read (its
# edition's part, `edition`, counts only where the world is the web).
RESEARCHING = {**CACHED, "cache_policy": cache_policy(ignore=("edition",), reads=SOURCES_SEEN)}
