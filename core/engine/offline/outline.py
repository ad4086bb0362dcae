"""The offline plan: an outline drawn from what the corpus holds, not from a grammar.

From the topic itself only its parts, the options it compares and whether it asks for a
recommendation are read (core.engine.offline.question). The rest comes from the corpus, in
the spirit of STORM's outlines from retrieved material, done extractively:

1. every part of the question (and, for a comparison, every option with the question's
   context) is searched in the corpus;
2. an option the corpus never names is no option; fewer than two left, it is no comparison;
3. a part's section is named with the words the passages found for it share (a phrase of
   the sources, in their language), never a template around the topic;
4. the other passages found are grouped by meaning (the shared embedder) and each group, named
   the same way, is another section, ordered by closeness to the question;
5. a comparison's rows are the facets the sources discuss for every option (a phrase found
   beside each of them), its columns the options.

The subject a quote must name (a sub-question's `focus`) is the options of a comparison, else
the topic's words that the corpus's page titles name. Without a corpus to search (a web
backend), each part is a section named with its own words. Deterministic: the same corpus and
topic give the same plan.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from core.text.cjk import has_cjk
from core.text.embedding import Embedder, EmbeddingUnavailable, embedder as shared_embedder
from core.engine.offline.question import Question, read_question
from core.engine.sentences import STOPWORDS, query_words, terms
from core.text.language import resolve_language
from core.models import ResearchPlan, SearchResult, SubQuestion, Topic

Search = Callable[[str, int], Sequence[SearchResult]]

HITS = 10  # passages searched per part or option
GROUP_COSINE = 0.6  # a passage joins a group this close in meaning to the group's first
_TOKEN = re.compile(r"[A-Za-z][\w.+#-]*[\w+#]|[A-Za-z]|[\u4e00-\u9fff]+|\d+")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_CODE = re.compile(r"[_.#+]|[a-z][A-Z]|\d")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_CJK_CUT = re.compile(r"[的是在了和与或及而并也就都被把对为以于从到上中有这那一个些之其等能会可但更很还直]")
_CJK_TAIL = re.compile(r"[下里内外时后前]+$")  # "模式下", "应用里": a place or time, not a name
# Words a heading gains nothing from: the question's own wording, and what every page says.
_PLAIN = STOPWORDS | frozenset("""
use used using also may see one two example examples following option options default set
value values true false name names file files new like without within whether etc
""".split())


@dataclass(frozen=True)
class Draft:
    name: str  # the section's heading: the sources' words or the topic's
    queries: tuple[str, ...]


def draft_plan(topic: Topic, search: Search | None = None,
               embedder: Embedder | None = None) -> ResearchPlan:
    """The plan for `topic`: sections named from what `search` finds in the corpus."""
    q = read_question(topic.text)
    language = resolve_language(topic.language, q.text)
    found = _Found(search)
    n = max(1, topic.max_subquestions)
    options = tuple(o for o in q.options if found.names(o)) if search else q.options
    if len(options) >= 2:
        intent = "recommend" if q.recommend else "compare"
        focus, targets = options, options
        drafts = _rows(q, options, found, n, language, embedder)
    else:
        intent = "recommend" if q.recommend else "describe"
        focus, targets = _subject(q, found), ()
        drafts = _sections(q, found, n, language, focus, embedder)
    subqs = tuple(SubQuestion(index=i, question=d.name,
                              queries=tuple(dict.fromkeys(x for x in d.queries if x))[:3]
                              or (d.name,), focus=focus, language=language)
                  for i, d in enumerate(drafts[:n]))
    return ResearchPlan(topic=q.text, brief=q.text, intent=intent, targets=targets,
                        subquestions=subqs, language=language, report_words=topic.report_words)


class _Found:
    """The corpus's answers to the planner's searches, each search run once."""

    def __init__(self, search: Search | None) -> None:
        self._search = search
        self._seen: dict[str, list[SearchResult]] = {}

    def __call__(self, query: str, k: int = HITS) -> list[SearchResult]:
        key = " ".join(query.split())
        if self._search is None or not key:
            return []
        if key not in self._seen:
            self._seen[key] = list(self._search(key, k))
        return self._seen[key]

    def names(self, option: str) -> bool:
        """Whether a passage the corpus finds for `option` names each of its words (a word
        by its first five letters: the hit for "threading" may be headed "Threads")."""
        want = [w[:5] for w in terms(option)]

        def named(r: SearchResult) -> bool:
            seen = terms(re.sub(r"[-_./]", " ", f"{r.title} {r.snippet}"))
            return all(any(t.startswith(w) for t in seen) for w in want)

        return bool(want) and any(named(r) for r in self(option))


# -- naming ---------------------------------------------------------------------------------

def _phrases(text: str) -> list[str]:
    """Candidate names in a passage, as written: runs of one to three content words (a Han
    segment between function characters), never opening or closing on a plain word."""
    out: list[str] = []
    # A dotted name is code, not two phrases: "threading.py but uses processes" once named a
    # section "Py but uses".
    text = _DOTTED.sub(" ", text)
    for chunk in re.split(r"[.,;:!?()\[\]{}\"'`，。；：！？（）「」《》、]+", text):
        tokens = _TOKEN.findall(re.sub(r"\S*_\S*", " ", chunk))
        for i, tok in enumerate(tokens):
            if _HAN.match(tok):
                out += [seg for seg in (_CJK_TAIL.sub("", x) for x in _CJK_CUT.split(tok))
                        if 2 <= len(seg) <= 8]
                continue
            for size in (1, 2, 3):
                gram = tokens[i:i + size]
                if len(gram) < size or any(_HAN.match(g) for g in gram):
                    break
                if gram[0].lower() in _PLAIN or gram[-1].lower() in _PLAIN or \
                        any(len(g) < 2 or g.isdigit() or _CODE.search(g) for g in gram) or \
                        len(gram[-1]) < 3:
                    continue  # code ("__init__", "os.path") names no section
                out.append(" ".join(gram))
    return out


def _name(results: Sequence[SearchResult], want: str, avoid: set[str],
          language: str, taken: set[str], embedder: Embedder | None = None) -> str:
    """The phrase of the passages that says most about `want` (what was searched for): closest
    to it in meaning, found in more of the passages, naming its words. Phrases made only of
    the subject's words (`avoid`) say nothing a section's neighbours do not."""
    wanted = set(terms(want)) - avoid
    counts: Counter[str] = Counter()
    spelled: dict[str, str] = {}
    texts = [r.snippet for r in results]
    nominal: dict[str, bool] = {}
    for r in results:
        for p in dict.fromkeys(_phrases(f"{r.snippet}")):
            key = _key(p)
            if not key or set(key.split()) <= avoid or key in taken:
                continue
            if language.startswith(("zh", "ja", "ko")) and not has_cjk(p):
                continue
            if p not in nominal:
                nominal[p] = _nominal(p, texts)
            if not nominal[p]:  # "Available", "Simple": no section's name
                continue
            counts[key] += 1
            spelled.setdefault(key, p)
    if not counts:
        return ""
    keys = sorted(counts)
    try:
        closeness = (embedder or shared_embedder()).similarities(
            want, [spelled[k] for k in keys])
    except EmbeddingUnavailable:
        closeness = np.zeros(len(keys))
    near = dict(zip(keys, (float(c) for c in closeness)))
    best = max(keys, key=lambda k: (near[k] + 0.15 * min(counts[k], 3)
                                    + 0.3 * len(set(k.split()) & wanted)
                                    + 0.1 * bool(set(k.split()) & avoid), -len(k), k))
    taken.add(best)
    return spelled[best]


_DETERMINER = r"(?:the|a|an|its|their|this|these|those|each|every|any|no|some|your|our|of|per)"
_FUNCTION_WORD = "|".join(sorted(map(re.escape, STOPWORDS), key=len, reverse=True))


def _nominal(word: str, texts: Sequence[str]) -> bool:
    """Whether the sources use a single word as a noun somewhere: after a determiner (one
    modifier between allowed) and before punctuation, the end or a function word ("the
    documentation.", "of the API)"). "a simple wrapper", "is available" and "Equivalent of"
    name nothing; a phrase of several words, or a Chinese one, is taken as it is."""
    if " " in word or has_cjk(word):
        return True
    head = _noun_head(word.lower())
    return any(head.search(t) for t in texts)


@lru_cache(maxsize=4096)
def _noun_head(word: str) -> re.Pattern[str]:
    return re.compile(rf"\b{_DETERMINER}\s+(?:[\w-]+\s+)?{re.escape(word)}"
                      rf"(?=\s*(?:[^\w\s]|$)|\s+(?:{_FUNCTION_WORD})\b)", re.I)


def _key(phrase: str) -> str:
    """A phrase compared as its stems, split at punctuation ("git-stash" is git and stash)."""
    return " ".join(terms(re.sub(r"[-_./]", " ", phrase)))


def _heading(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:] if phrase and phrase[0].islower() else phrase


# -- one subject ----------------------------------------------------------------------------

def _subject(q: Question, found: _Found) -> tuple[str, ...]:
    """The topic's words the corpus names in the titles of the pages it finds for the topic
    (the sources' own name for the subject); a word in nearly every title (the corpus's own
    subject: "git" in git's manuals) narrows nothing. Else the topic's content words."""
    results = found(q.text)
    mine = query_words(q.text)
    if not results:
        return tuple(mine[:3]) or (q.text,)
    titles = [_title_terms(r) for r in results]
    named = []
    for word in mine:
        share = sum(set(terms(word)) <= t for t in titles) / len(titles)
        if share > 0 and (share < 0.9 or len(titles) < 5):  # a few pages: no corpus-wide word
            named.append((-share, mine.index(word), word))
    if named:
        # A word most of these titles name frames the question ("SQLite" in "SQLite 的 WAL
        # 模式"); one that only a few name is what it asks about ("WAL"): the frame alone
        # would let every sentence on SQLite pass as on subject.
        rarest = -max(named)[0]
        named = [n for n in named if -n[0] < 3 * rarest]
        return tuple(w for _, _, w in sorted(named)[:3])
    # No title names it: the words of the topic the passages name most.
    text = [set(terms(f"{r.title} {r.snippet}")) for r in results]
    counted = sorted(((-sum(set(terms(w)) <= t for t in text), i, w) for i, w in enumerate(mine)))
    return tuple(w for c, _, w in counted[:2] if c < 0) or tuple(mine[:2]) or (q.text,)


def _title_terms(r: SearchResult) -> set[str]:
    """A page's title words and its file's name, split at punctuation ("git-reflog(1)")."""
    name = r.url.split("#", 1)[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return set(terms(re.sub(r"[-_./()]", " ", f"{r.title} {name}")))


def _common(q: Question, found: _Found) -> set[str]:
    """The topic's words nearly every page found names in its title: the corpus's own
    subject ("git" in git's manuals), which names no section."""
    titles = [_title_terms(r) for r in found(q.text)]
    return {t for t in terms(q.text)
            if len(titles) >= 5 and sum(t in title for title in titles) >= 0.9 * len(titles)}


def _asking(part: str, focus: Sequence[str]) -> str:
    """A part's search: the part, with the subject when it does not name it ("how long are
    its entries kept" is searched with "reflog")."""
    if set(terms(part)) & set(terms(" ".join(focus))):
        return part
    return f"{' '.join(focus)} {part}"


def _sections(q: Question, found: _Found, n: int, language: str, focus: Sequence[str],
              embedder: Embedder | None) -> list[Draft]:
    avoid = set(terms(" ".join(focus)))
    subject = " ".join(focus)
    common = _common(q, found)
    taken: set[str] = set()
    drafts: list[Draft] = []
    used: set[str] = set()
    asked = [_asking(part, focus) for part in q.parts]
    for part, query in zip(q.parts, asked):  # every part of the question has a section
        results = found(query)
        words = query_words(part)
        name = _name(results[:5], part, avoid | common, language, taken, embedder)
        if not name:  # the corpus has nothing on it: the part's own words, briefly
            name = " ".join(words[:4]) or part
        used.update(r.url for r in results[:2])
        drafts.append(Draft(_heading(name), (" ".join(query_words(query)[:6]),
                                             " ".join(dict.fromkeys(f"{subject} {name}".split())))))
    # The rest of what was found, grouped by meaning: the sections the corpus adds.
    pool = [r for query in [q.text, *asked] for r in found(query) if r.url not in used]
    for group in _groups(q.text, list(dict.fromkeys(pool)), embedder):
        if len(drafts) >= n:
            break
        name = _name(group, q.text, avoid | common, language, taken, embedder)
        if name:  # searched with the question's own words: a section answers it
            own = " ".join(w for w in query_words(q.text) if w not in subject.lower().split())
            drafts.append(Draft(_heading(name), (
                " ".join(list(dict.fromkeys(f"{subject} {name} {own}".split()))[:8]),
                " ".join(dict.fromkeys(f"{subject} {name}".split())))))
    return drafts


def _groups(topic: str, results: list[SearchResult],
            embedder: Embedder | None) -> list[list[SearchResult]]:
    """Passages grouped by meaning, closest groups to the topic first (a group of passages
    saying one thing ranks above one passage)."""
    if not results:
        return []
    try:
        vectors = (embedder or shared_embedder()).embed(
            [topic] + [f"{r.title}. {r.snippet}" for r in results])
    except EmbeddingUnavailable:
        return [[r] for r in results]
    query, rest = vectors[0], vectors[1:]
    groups: list[list[int]] = []
    for i in range(len(results)):
        home = next((g for g in groups if float(rest[g[0]] @ rest[i]) >= GROUP_COSINE), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)

    def score(group: list[int]) -> tuple[float, int]:
        return (-float(np.mean(rest[group] @ query)) * (1 + 0.25 * (len(group) - 1)), group[0])

    return [[results[i] for i in g] for g in sorted(groups, key=score)]


# -- comparisons ----------------------------------------------------------------------------

def _rows(q: Question, options: Sequence[str], found: _Found, n: int,
          language: str, embedder: Embedder | None) -> list[Draft]:
    """One row per facet the sources discuss for every option: the question's own context
    first when it has one, then the phrases found beside each option, most shared first."""
    avoid = set(terms(" ".join(options))) | _common(q, found)
    avoid |= {w for o in options for w in terms(re.sub(r"[-_./]", " ", o))}
    drafts: list[Draft] = []
    context = " ".join(query_words(q.context)[:4])
    if q.context:
        drafts.append(Draft(_heading(q.context),
                            tuple(f"{o} {context}" for o in options)))
    beside: list[Counter[str]] = []
    spelled: dict[str, str] = {}
    # The searches carry the context ("for concurrent I/O") as well as the options alone: a
    # corpus of API listings rarely states a purpose, and its facets come from either.
    together = found(" ".join([*options, context]))  # passages discussing them side by side
    side_by_side: set[str] = set()  # facets of passages naming two options or more
    for r in together:
        text = set(terms(re.sub(r"[-_./]", " ", f"{r.title} {r.snippet}")))
        if sum(set(terms(o)) <= text for o in options) >= 2:
            side_by_side.update(_key(p) for p in _phrases(r.snippet))
    # What is compared in each option, named before them ("JSON" in "JSON in SQLite or
    # PostgreSQL"): a facet is one said of it, from passages naming it, or the rows drift to
    # whatever the sources say of the options ("Database", "Driver"). Fewer rows then, each
    # about the question. A purpose after them ("for concurrent I/O") narrows no passage.
    about = set(terms(q.respect)) - avoid - set(terms(" ".join(_PLAIN)))
    texts: list[str] = []
    for option in options:
        counts: Counter[str] = Counter()
        mine = set(terms(option))
        alone = found(option)  # what the corpus says of it at all, beside the context's
        for r in dict.fromkeys([*found(f"{option} {context}".strip()), *alone, *together]):
            named = set(terms(re.sub(r"[-_./]", " ", f"{r.title} {r.snippet}")))
            if not mine <= named or (about and not about & named):
                continue
            texts.append(r.snippet)
            for p in dict.fromkeys(_phrases(r.snippet)):
                key = _key(p)
                if not key or any(w[:4] == a[:4] for w in key.split() for a in avoid):
                    continue  # "merging" beside "merge" is the option again
                if language.startswith(("zh", "ja", "ko")) and not has_cjk(p):
                    continue
                if " " not in p and p[:1].isupper() and not p.isupper():
                    # A capitalised word may open a sentence: spelled lower case elsewhere,
                    # it is a word; never, it is a name ("Gitster"), not a facet.
                    spelled.setdefault("^" + key, p)
                    continue
                counts[key] += 1
                spelled[key] = p
        beside.append(counts)
    shared = {k for c in beside for k in c if sum(k in other for other in beside) >= 2} \
        if len(beside) > 1 else set()
    taken = set(terms(q.context))
    keys = sorted(shared)
    try:
        closeness = (embedder or shared_embedder()).similarities(
            q.text, [spelled[k] for k in keys]) if keys else []
    except EmbeddingUnavailable:
        closeness = np.zeros(len(keys))
    near = dict(zip(keys, (float(c) for c in closeness)))
    # Discussed beside every option (the rarest side counts), and about what was asked.
    ranked = sorted(keys, key=lambda k: (-(0.1 * sum(min(c[k], 3) for c in beside) + near[k]
                                           + 0.3 * (k in side_by_side)),
                                         -len(k.split()), k))
    for key in ranked:
        if len(drafts) >= n:
            break
        if any(w[:4] == t[:4] for w in key.split() for t in taken):
            continue  # "commits are included" after "commits", "handling" after "handle"
        if not _nominal(spelled[key], texts):  # "Available", "Simple": no facet
            continue
        taken |= set(key.split())
        drafts.append(Draft(_heading(spelled[key]),
                            tuple(" ".join(f"{o} {spelled[key]} {context}".split()[:6])
                                  for o in options)))
    if not drafts:  # the sources share no facet: what each of them is
        drafts.append(Draft(" / ".join(options), tuple(options)))
    return drafts
