"""Which sentences of what was read answer a sub-question, for the offline extractive engine.

Every prose sentence of the sources is a candidate (boilerplate that recurs on several pages is
not, and a page read twice, as copies, counts once). A candidate is scored by a blend of word
relevance (the BM25-like `Scorer` against the question, its queries and its focus) and meaning
(embedding cosine to the question and to the focus phrases), so a sentence that says the same
thing in other words still counts, and one that merely shares aspect words ("purpose",
"performance") does not win on those alone.

A sentence must be about the subject, the sub-question's `focus` (core.relevance.about): it
names a focus phrase, or its page's title or the headings it sits under do (and then it is
closer to the subject in meaning than the average sentence read: a page titled for the subject
has its fragments too). Meaning and word overlap rank what is about the subject; they never let
in what is not. Naming is not meaning,
though: a page that names the subject in another sense (the writer Franz Kafka on a
Kafka-the-broker question) is left out whole when, with the subject's own words masked, its
content is far from the other pages that name it (see `stray_pages`).

All candidates of one call are embedded in one batch; nothing is cached between calls. The
quotes are `Sentence` spans, exact substrings of the source text. Deterministic: embeddings are,
and ties break on url and position.
"""

from __future__ import annotations

import re
from itertools import chain
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from core.text.embedding import Embedder, embedder as shared_embedder
from core.engine.sentences import Scorer, Sentence, overlap, sentences, terms
from core.models import Source, SubQuestion, heading_chain
from core.relevance.about import (about as on_subject, agree, naming, own_page, said,
                                  split_terms)
from core.search.headings import clean

# Weights of the blend: words, meaning of the question, meaning of the subject, naming it,
# and being on the subject's own page (its title opens with the subject's name).
_W_WORDS, _W_QUESTION, _W_FOCUS, _W_NAMED, _W_OWN = 0.35, 0.35, 0.15, 0.15, 0.2
_HAN = re.compile(r"[\u4e00-\u9fff]")
# Terms a section's heading may have beyond the subject's and still be its own: one, or as many
# as the subject has ("对包管理问题的第一个回应" for "第一个回应 包管理": Chinese counts bigrams).
_OWN_SLACK = 1
# Near-duplicates: the same statement from two pages (or twice on one) is quoted once.
DUPLICATE_COSINE, DUPLICATE_OVERLAP = 0.92, 0.5
# Another page saying nearly the same thing corroborates a claim.
CORROBORATE_COSINE, CORROBORATE_OVERLAP = 0.85, 0.3
# A sentence recurring on this many pages is boilerplate (headers, disclaimers, cookie notes).
_BOILERPLATE_PAGES = 3
# A page sharing this much of its sentences with one before it is a copy of it.
COPY_SHARE = 0.8
# A page naming the subject is about something else when, subject words masked, it is this many
# times as far (1 - cosine) from the other naming pages' centroid as the typical naming page...
_STRAY_DISTANCE = 1.8
# ...and is not close to them either: its cosine, rescaled from the pool's unrelated sentences
# (their 10th percentile cosine, as 0) to 1, is below this. The writer Kafka's page scores 0.32
# among the broker's pages, the odd one out of pages on one subject 0.43 and up.
_STRAY_CLOSENESS = 0.375
# At least this many pages name the subject: a sense is a consensus of several pages.
_STRAY_MIN_PAGES = 3
# Sentences (evenly spaced) that estimate what unrelated text scores in the pool's language.
_BASELINE_SENTENCES = 400


@dataclass(frozen=True)
class Candidate:
    score: float
    sentence: Sentence
    source: Source
    vector: np.ndarray = field(compare=False, repr=False)


def page(url: str) -> str:
    """Passages of one document (url#p3, url#p7) are one page, not two witnesses."""
    return url.split("#", 1)[0]


def rank(subquestion: SubQuestion, sources: Sequence[Source],
         embedder: Embedder | None = None) -> list[Candidate]:
    """The sentences of `sources` that answer `subquestion`, best first; off-subject and
    irrelevant ones are left out."""
    pool = _pool(sources)
    if not pool:
        return []
    texts = [s.text for s, _ in pool]
    focus = [f for f in subquestion.focus if terms(f)]
    # A section's heading is a few words of the sources ("Transaction"): what it asks is the
    # heading with its first query, which carries the topic's own words ("SQLite transaction
    # handle concurrent writes"), or a quote may answer the heading but not the topic.
    asked = " ".join(dict.fromkeys([subquestion.question, *subquestion.queries[:1]]))
    anchors = [asked, *focus]
    vectors = (embedder or shared_embedder()).embed([*anchors, *texts])  # one batch per call
    anchor, vec = vectors[: len(anchors)], vectors[len(anchors):]
    q_sim = vec @ anchor[0]
    f_sim = (vec @ anchor[1:].T).max(axis=1) if focus else q_sim

    scorer = Scorer(texts)
    query = terms(" ".join([subquestion.question, *subquestion.queries, *focus]))
    words = np.array([scorer.score(i, query) for i in range(len(pool))])
    phrases = [terms(f) for f in focus]
    # What a sentence names, its cross-references left out: "参见 第 2.1.4 节 “Debian 档案库基础”"
    # says where the subject is treated, not anything about it.
    docs = [scorer.docs[i].keys() if said(t) == t else set(terms(said(t)))
            for i, t in enumerate(texts)]
    named = np.array([naming(phrases, d) for d in docs])
    own = {src.url: own_page(src.title, focus) for src in sources}
    # A manual that keeps many subjects on one page (a chapter per page) gives each its own
    # section: a sentence under a heading that is the subject as asked ("SSH 基础", not any
    # heading naming SSH) is on the subject's own page as much as one under such a title.
    asked_as = [p for p in dict.fromkeys([*subquestion.queries[:1], *focus]) if terms(p)]
    judged: dict[str, float] = {}  # a heading's verdict, once per call (pages hold hundreds)
    section = np.array([_own_section(src, sent.start, asked_as, judged) for sent, src in pool])
    own_here = np.maximum([own[src.url] for _, src in pool], section)
    # The subject as asked may say more than its key: "Database Access from PL/Tcl", keyed by
    # PL/Tcl. Where a page or section titled as asked was read, the key's own page (the PL/Tcl
    # chapter) is a neighbour of the answer, not its home.
    titled = {src.url: bool(asked_as) and _heading_is(src.title, asked_as) == 1.0
              for src in sources}
    if asked_as and focus and len(set(split_terms(asked_as[0]))) > max(
            len(set(split_terms(f))) for f in focus):
        exact = (section == 1.0) | np.array([titled[src.url] for _, src in pool], dtype=bool)
        if exact.any():
            own_here = np.where(exact, 1.0, np.minimum(own_here, 0.5))
    blend = (_W_WORDS * _unit(words) + _W_QUESTION * _minmax(q_sim)
             + _W_FOCUS * _minmax(f_sim) + _W_NAMED * named + _W_OWN * own_here)
    # About the subject: a sentence naming it, under a heading that names it, or on a page
    # whose title names it and closer to it in meaning than the average sentence read ("A
    # string kept for identification purposes only." on a page titled "Heat pumps" is not).
    closer = f_sim >= float(f_sim.mean())
    about = np.array([named[i] >= 1.0 or on_subject("", "", src.section_at(sent.start), focus)
                      or (closer[i] and on_subject("", src.title, "", focus))
                      for i, (sent, src) in enumerate(pool)], dtype=bool) if phrases else \
        np.ones(len(pool), dtype=bool)
    # A page naming the subject in another sense is left out; the subject's own page (its
    # title opens with the subject's name) never is, however little it says.
    stray = stray_pages(focus, sources, embedder) if phrases else set()
    about &= np.array([page(src.url) not in stray or own[src.url] >= 1.0 for _, src in pool],
                      dtype=bool)
    # Where the subject has its own page or section among those read, the answer is there, or
    # in a sentence naming the subject as asked ("SSH 基础", not any SSH): another page's
    # sentence naming one of its words is about something else that shares it.
    home = own_here >= 1.0
    if home.any() and asked_as:
        whole = set(terms(asked_as[0]))
        about &= home | np.array([all(any(agree(t, h) for h in d) for t in whole)
                                  for d in docs], dtype=bool)
    # An answer shares a word with the question, its queries or its subject, or names the
    # subject in other words ("threads" for "threading") or stands on the subject's own page
    # (an API reference rarely repeats its own name), and is nearer the question in meaning
    # than half the sentences read; and it is about the subject, however well it matches the
    # aspect words.
    page_own = own_here >= 1.0
    relevant = (words > 0) | (((named >= 1.0) | page_own) & (q_sim >= float(np.median(q_sim))))
    out = [Candidate(float(blend[i]), sent, src, vec[i]) for i, (sent, src) in enumerate(pool)
           if relevant[i] and about[i]]
    out.sort(key=lambda c: (-round(c.score, 9), c.source.url, c.sentence.start))
    # A page titled with the subject as asked ("Chapter 39. Triggers", "Preface") is its own
    # overview: its best sentence leads, however many pages that name the subject more often
    # score above it.
    lead = next((n for n, c in enumerate(out) if titled.get(c.source.url)), 0)
    return [out[lead], *out[:lead], *out[lead + 1:]] if out else out


def pick(ranked: Sequence[Candidate], limit: int,
         focus: Sequence[str] = ()) -> list[Candidate]:
    """The best `limit` candidates with near-duplicates (same meaning or mostly the same words,
    from any page) dropped. With several focus phrases (the options a comparison is between),
    the best candidate naming each comes first, so one option's pages cannot fill every slot."""
    chosen: list[Candidate] = []

    def take(cand: Candidate) -> bool:
        if len(chosen) == limit or any(c is cand for c in chosen) or any(
                _same(cand, c, DUPLICATE_COSINE, DUPLICATE_OVERLAP) for c in chosen):
            return False
        chosen.append(cand)
        return True

    phrases = [terms(f) for f in focus if terms(f)]
    for phrase in phrases if len(phrases) > 1 else ():
        # A sentence naming the option, else one from a page whose title names it: an API
        # reference ("multiprocessing") rarely repeats its own name in its sentences.
        by_sentence = (c for c in ranked if naming([phrase], terms(c.sentence.text)) >= 1.0)
        by_page = (c for c in ranked if naming([phrase], terms(c.source.title)) >= 1.0)
        for cand in chain(by_sentence, by_page):
            if take(cand):
                break  # this option has its best sentence
    for cand in ranked:
        take(cand)
    order = {id(c): i for i, c in enumerate(ranked)}
    return sorted(chosen, key=lambda c: order[id(c)])


def _own_section(source: Source, offset: int, asked_as: Sequence[str],
                 judged: dict[str, float]) -> float:
    """1.0 when a heading over `offset` is the subject as the question words it (its first
    query keeps the topic's phrase, in any order: "XML 数据提取" for "数据提取 XML"), so its
    subsections are the subject's too; 0.5 when the innermost heading opens with a focus phrase
    alone ("SSH 故障排查" for SSH). `judged` keeps each heading's verdict for the call."""
    chain = heading_chain(source.headings, offset)
    if not chain or not asked_as:
        return 0.0
    for heading in chain:
        if heading.text not in judged:
            judged[heading.text] = _heading_is(heading.text, asked_as)
    verdicts = [judged[h.text] for h in chain]
    return 1.0 if 1.0 in verdicts else verdicts[-1]


def _heading_is(heading: str, asked_as: Sequence[str]) -> float:
    asked, said = set(split_terms(asked_as[0])), set(split_terms(heading))
    if asked and asked <= said and len(said) <= len(asked) + max(_OWN_SLACK, len(asked)):
        return 1.0
    return 0.5 if any(own_page(heading, (p,)) >= 1.0 for p in asked_as[1:]) else 0.0


def distinct_pages(sources: Sequence[Source]) -> list[Source]:
    """The sources without copies: a page whose sentences are mostly those of a page before it,
    and the other way round (a manual's .html beside its .txt, a mirrored folder), is that page
    read again. Copies count
    once, and the first is quoted; two copies are not two witnesses, nor three boilerplate."""
    kept: list[tuple[str, set[str]]] = []
    out = []
    for src in sources:
        said = {s.clean for s in sentences(src.text)}
        copy = any(page(src.url) != url and said and other and len(said & other) >= COPY_SHARE
                   * max(len(said), len(other)) for url, other in kept)
        if not copy:
            kept.append((page(src.url), said))
            out.append(src)
    return out


def corroborated(claim: Candidate, ranked: Sequence[Candidate]) -> bool:
    """Another page says nearly the same thing."""
    return any(page(o.source.url) != page(claim.source.url)
               and _same(claim, o, CORROBORATE_COSINE, CORROBORATE_OVERLAP) for o in ranked)


def _same(a: Candidate, b: Candidate, cosine: float, words: float) -> bool:
    return (float(a.vector @ b.vector) >= cosine
            or overlap(a.sentence.text, b.sentence.text) > words)


def _pool(sources: Sequence[Source]) -> list[tuple[Sentence, Source]]:
    sources = distinct_pages(sources)
    pool = [(s, src) for src in sources for s in (_headless(s, src) for s in sentences(src.text)
                                                  if not _repeated(s, src))]
    spread: dict[str, set[str]] = {}
    for sent, src in pool:
        spread.setdefault(sent.clean, set()).add(page(src.url))
    seen: set[str] = set()
    out = []
    titles = {" ".join(src.title.split()) for src in sources}
    for sent, src in pool:
        if len(spread[sent.clean]) >= _BOILERPLATE_PAGES or sent.clean in seen:
            continue  # boilerplate, or the same sentence read twice (two passages of one page)
        if sent.clean in titles:
            continue  # a page's title as its heading ("小型 Web 应用：选择 SQLite 还是 PostgreSQL？")
        seen.add(sent.clean)
        out.append((sent, src))
    return out


def _repeated(sentence: Sentence, source: Source) -> bool:
    """The sentence is (mostly) text its corpus repeats on many pages."""
    inside = sum(max(0, min(b, sentence.end) - max(a, sentence.start))
                 for a, b in source.boilerplate)
    return inside * 2 > sentence.end - sentence.start


def _headless(sentence: Sentence, source: Source) -> Sentence:
    """The sentence without a heading of its page glued to its start ("Introduction¶
    urllib.request is ..."): still a verbatim span of the page."""
    first, newline, rest = sentence.text.partition("\n")
    if newline and rest.strip() and clean(first) in {h.text for h in source.headings}:
        lead = len(first) + 1 + len(rest) - len(rest.lstrip())
        return Sentence(sentence.text[lead:], sentence.start + lead, sentence.end)
    return sentence


def stray_pages(focus: Sequence[str], sources: Sequence[Source],
                embedder: Embedder | None = None) -> set[str]:
    """Pages that name the subject in another sense: "Kafka" on a page about the writer's
    letters, among pages about the message broker. With the subject's own words masked (a
    bag-of-words embedding is dominated by the shared name), a stray page is far from the
    centroid of the other pages naming the subject in two ways: relative to its peers
    (`_STRAY_DISTANCE` times the median naming page's distance), and absolutely (its cosine,
    rescaled so that the pool's unrelated sentences score 0, below `_STRAY_CLOSENESS`). The
    second keeps a page that is merely the odd one out of a close-knit pool; the rescaling,
    because cosines live on another scale per language (Chinese text has a far higher
    baseline)."""
    phrases = [terms(f) for f in focus if terms(f)]
    texts: dict[str, list[str]] = {}
    for src in sources:
        texts.setdefault(page(src.url), [src.title]).append(src.text)
    naming_pages = [p for p, parts in texts.items()
                    if naming(phrases, terms(" ".join(parts))) >= 1.0]
    if len(naming_pages) < _STRAY_MIN_PAGES:
        return set()
    mask = _subject_mask(focus)
    bodies = {p: " ".join(parts[1:]) for p, parts in texts.items()}
    # Split, then mask: a sentence opening on the masked name must still end the one before.
    said = [mask.sub(" ", s.text) for body in bodies.values() for s in sentences(body)]
    vectors = (embedder or shared_embedder()).embed(
        [*(mask.sub(" ", bodies[p]) for p in naming_pages), *said])
    pages_v, said_v = vectors[:len(naming_pages)], vectors[len(naming_pages):]
    sample = said_v[::max(1, len(said_v) // _BASELINE_SENTENCES)]  # bounded: n² cosines
    pairs = (sample @ sample.T)[np.triu_indices(len(sample), 1)]
    unrelated = min(float(np.percentile(pairs, 10)), 0.9) if len(pairs) else 0.0
    closeness = []
    for j in range(len(naming_pages)):  # each page against the others: leave one out
        others = np.delete(pages_v, j, axis=0).mean(axis=0)
        closeness.append(float(pages_v[j] @ others) / max(float(np.linalg.norm(others)), 1e-9))
    distance = 1.0 - np.array(closeness)
    typical = max(float(np.median(distance)), 1e-6)
    return {p for p, d, c in zip(naming_pages, distance, closeness)
            if d >= _STRAY_DISTANCE * typical
            and (c - unrelated) / (1.0 - unrelated) < _STRAY_CLOSENESS}


def _subject_mask(focus: Sequence[str]) -> re.Pattern[str]:
    """The focus phrases' words, as a pattern to blank out: Latin words at a word start in any
    case ("Kafka's"), Han runs anywhere."""
    words = {w for f in focus for w in re.findall(r"[A-Za-z0-9][\w+#.-]*|[\u4e00-\u9fff]+", f)
             if terms(w)}
    parts = [rf"(?<![A-Za-z0-9_]){re.escape(w)}" if not _HAN.match(w) else re.escape(w)
             for w in sorted(words, key=lambda w: (-len(w), w))]
    return re.compile("|".join(parts) or r"(?!)", re.I)


def _unit(x: np.ndarray) -> np.ndarray:
    top = float(x.max()) if len(x) else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def _minmax(x: np.ndarray) -> np.ndarray:
    low, high = float(x.min()), float(x.max())
    return (x - low) / (high - low) if high - low > 1e-9 else np.ones_like(x)
