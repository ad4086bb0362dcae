"""What a topic is about, read in code before anyone researches it: its subject, its parts, and
which of its words the corpus never uses.

    read_topic(text, vocabulary, language) -> Reading

The subject first. A topic's content words (its question wording, FRAME, and stop words left
out) are weighed by the corpus's own counts (core.search.corpus_vocab):
- a word the corpus never uses is *absent*: the corpus has no page about it. A part asking
  about an absent name ("Kubernetes", "Postgres") cannot be answered; an absent word weighs the
  most in what a part asks, so no page answers "sourdough bread at home" by naming "home";
- a named thing (written with capitals, digits or code punctuation: SQLite, sqlite3, os.path,
  CREATE INDEX) or a word some page's title or heading names (the corpus's own name for a
  subject: "reflog", 主机名解析) is a *key*, unless most of the corpus's pages use it (its own
  subject: "python" in Python's manual, "git" in git's), which narrows nothing;
- with no key, the rarest words the corpus uses are the subject.
Evidence is about the subject when it names a key, or sits in a page or section whose title
names one (core.relevance.about). Words most pages share never decide it.

The parts: each question the topic asks (core.relevance.question), named in the topic's own
words ("its" becomes the subject's name, so two reports never share a heading); a comparison
asks one part per option, for the purpose it names, and one on how they differ. Without a
vocabulary (a web search) nothing is absent and named things are the keys.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from core.text.cjk import has_cjk
from core.engine.sentences import STOPWORDS, terms
from core.models import Part, Vocabulary
from core.relevance.about import BOOK_PARTS, CJK_BOOK_LABEL
from core.relevance.question import Question, read_question

VocabularyOf = Callable[[Sequence[str]], Vocabulary]

# Words about the asking itself ("what does the documentation say about", "how does X work"):
# no search or subject is made of them.
ASKING = frozenset("""
documentation docs doc say says said tell know knowing learn understand explain explained describe
described work works working worked thing things main important
""".split())
# Words that ask about an aspect of any subject, never name one: what a question is made of.
FRAME = ASKING | frozenset("""
pitfall pitfalls gotcha gotchas caveat caveats drawback drawbacks downside downsides disadvantage
disadvantages advantage advantages benefit benefits limitation limitations risk risks problem
problems issue issues mistake mistakes tip tips trick tricks tradeoff tradeoffs trade-off trade-
offs pro pros con cons alternative alternatives example examples purpose purposes overview basics
introduction practice practices step steps feature features aspect aspects detail details watch out
careful make makes made making happen happens module modules library libraries package packages
long often far soon quick quickly big large small little mean means meaning matter matters need
needs want wants help helps good bad better worst simple easy easiest hard common typical right
proper correct recommended usual usually generally general kind kinds type types sort lot lots much
many really actually exactly also even still within without across around idea ideas
""".split())
# The same for Chinese: cut out of a run of Han characters like function characters are.
FRAME_CJK = ("什么", "哪些", "哪个", "如何", "怎么", "怎样", "为什么", "为何", "是否", "可以", "应该",
             "作用", "用途", "注意", "需要", "使用", "工作", "文档", "说明", "方法", "步骤", "优点",
             "缺点", "问题", "区别", "不同", "主要", "常见", "关于", "介绍", "原理", "方式", "特点",
             "功能", "场景", "情况", "时候", "一下", "我们", "你们", "他们", "有关", "相关", "进行",
             "以及", "还是", "或者", "选择", "比较", "对比", "推荐", "建议", "哪里", "开始", "学习",
             "知道", "了解", "应用")
# Not 时/上/中/要/会/能/给/从/到: each begins or ends common words (时间戳, 系统时间, 会话, 性能,
# 给定), and cutting at it left "间戳" and "间" as the subject.
_CJK_GLUE = "的了和与及或是在有也都而就被把对之其这那些吗呢吧啊着过"
_CJK_CUT = re.compile("|".join(sorted(FRAME_CJK, key=len, reverse=True)) + f"|[{_CJK_GLUE}]+")
# ASCII only inside a Latin word: \w would glue "GnuPG有什么作用" into one word.
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+#'-]*[A-Za-z0-9_+#]|[A-Za-z]|[\u4e00-\u9fff]+")
# A share of the corpus's documents above which a word is the corpus's own subject.
COMMON = 0.25
COMMON_MIN_DOCUMENTS = 20  # below this, "most pages" says nothing
_ASKING = re.compile(r"^(?:how|what|why|when|where|which|who|whom|whose|is|are|was|were|does|do|"
                     r"did|can|could|should|will|would|shall|may)\b", re.I)
_ASKING_CJK = re.compile(r"什么|如何|怎么|怎样|为什么|哪|吗|是否|多久|多少|几")


@dataclass(frozen=True)
class Word:
    text: str  # as the topic writes it
    at: int  # position among the topic's words
    named: bool
    documents: int | None = None  # None: not measured (no corpus, or only stop words)
    titled: int = 0

    @property
    def absent(self) -> bool:
        return self.documents == 0


@dataclass(frozen=True)
class Reading:
    question: Question
    language: str
    keys: tuple[str, ...]  # the subject: what evidence must name, rarest first
    absent: tuple[str, ...]  # the topic's words the corpus never uses, in topic order
    parts: tuple[Part, ...]
    options: tuple[str, ...] = ()
    aspects: tuple[str, ...] = ()  # what a comparison asks of every option
    words: tuple[Word, ...] = field(default=(), repr=False)
    phrases: tuple[str, ...] = ()  # the subject as the topic says it, key by key

    @property
    def subject(self) -> str:
        """The subject as a heading or a search names it: its named keys if it has any
        ("Corvid"), else its rarest phrase the corpus uses ("garbage collection")."""
        return _subject_phrase(self.phrases or self.keys, self.words)


def content_words(text: str) -> list[tuple[str, bool, int]]:
    """The topic's content words as written, each with whether it is a named thing and its
    position among all the topic's words: Latin words and code names ("Python's" is Python),
    Han runs cut at function characters and question wording; stop words and question-frame
    words left out."""
    out: list[tuple[str, bool, int]] = []
    framed: list[tuple[str, bool, int]] = []  # frame words written as names ("TYPE", "Types")
    at = 0
    labels = [m.span() for m in _BOOK_LABEL.finditer(text)]
    for match in _WORD.finditer(text):
        if any(a <= match.start() < b for a, b in labels):
            at += 2  # where a page sits in its book ("Appendix D."), not what it is about
            continue
        token = re.sub(r"'s$|'$", "", match.group())
        if re.match(r"[\u4e00-\u9fff]", token):
            for seg in _CJK_CUT.split(token):
                if len(seg) >= 2:
                    out.append((seg, False, at))
                at += 2  # the cut between two runs is never "side by side"
            continue
        low = token.lower()
        if low not in STOPWORDS and terms(token):
            word = (token, _named(token, at == 0), at)
            (framed if low in FRAME else out).append(word)
        at += 1
    # A frame word is part of a name it is written into: "ALTER TYPE", "UUID Type" and
    # "Example Program" name one thing each, where "a type of lock" or "json module" do not.
    names = {at for _, named, at in out if named}
    out += [w for w in framed if w[1] and names & {w[2] - 1, w[2] + 1}]
    return sorted(out, key=lambda w: w[2])


# A book's label written into a topic ("How does Appendix D. SQL Conformance work?"): its
# number and full stop tell it from prose ("part of", "this section").
_BOOK_LABEL = re.compile(rf"\b{BOOK_PARTS}\s+(?:[IVXLC]+|\d+(?:\.\d+)*|[A-Z])\.(?=\s|$)"
                         rf"|{CJK_BOOK_LABEL}", re.I)


def _named(token: str, first: bool) -> bool:
    """Written as a name: capitals past the first letter (SQLite, CREATE), a capital not at the
    topic's start (Postgres), digits or code punctuation (sqlite3, os.path, pg_dump)."""
    if re.search(r"\d|[_.#+]", token.strip(".")):
        return True
    if re.search(r"[A-Z]", token[1:]):
        return True
    return token[:1].isupper() and not first


_MARKUP = re.compile(r"!?\[[^\]]*\]\([^)]*\)|<[^>]*>|"
                     r"\b(?:https?|ftp|file|javascript|vbscript|data|mailto):\S+", re.I)


def read_topic(text: str, vocabulary: VocabularyOf | None = None, language: str = "en",
               max_parts: int = 6) -> Reading:
    """The topic's subject and parts (see the module docstring). Markup a topic may carry (HTML
    tags, markdown links and images, URLs) is no part of the question: it is read without."""
    q = read_question(_MARKUP.sub(" ", text).strip() or text)
    found = content_words(q.text)
    counted = vocabulary([w for w, _, _ in found]) if vocabulary and found else None
    words = []
    for word, named, at in found:
        stats = counted.words.get(word) if counted else None
        words.append(Word(word, at, named, stats.documents if stats else None,
                          stats.titled if stats else 0))
    total = counted.documents if counted else 0
    absent = tuple(dict.fromkeys(w.text for w in words if w.absent))
    pairs = _keys(words, total)
    keys = tuple(dict.fromkeys(k for k, _ in pairs))
    phrases = tuple(dict.fromkeys(p for _, p in pairs))
    if len(q.options) >= 2:
        options = q.options
        aspects = tuple(a for a in (q.respect, q.context) if a)
        parts = _option_parts(q, options, words, language)
    else:
        options, aspects = (), ()
        parts = _parts(q, keys, phrases, words, total, language)
    return Reading(q, language, keys, absent, parts[:max_parts], options, aspects, tuple(words),
                   phrases)


def _common(word: Word, total: int) -> bool:
    """Most pages use it: over a quarter of a corpus's documents, or every one of a corpus of
    three to nineteen (two documents say nothing of what "most" share)."""
    if word.documents is None or total < 3:
        return False
    if total < COMMON_MIN_DOCUMENTS:
        return word.documents >= total
    return word.documents > COMMON * total


def _keys(words: Sequence[Word], total: int) -> tuple[tuple[str, str], ...]:
    """The subject as (key, phrase) pairs, rarest first: absent words, then named things and
    titled words the corpus does not share across most pages; else the rarest words it uses.
    Words side by side and alike are one phrase: names (CREATE INDEX, Horizontal Pod
    Autoscaler), whose key is the whole name, or words ("garbage collection", "sourdough
    fermentation"), whose key is the rarest of them (what the others share with many pages,
    "collection", "fermentation", says nothing of the subject alone)."""
    chosen = [w for w in words if w.absent
              or ((w.named or w.titled) and not _common(w, total))]
    if not chosen:
        used = [w for w in words if w.documents and not _common(w, total)]
        if used:
            rarest = min(w.documents for w in used)
            chosen = [w for w in used if w.documents <= 2 * rarest][:2]
    if not chosen:  # only words every page uses, or nothing measured: what the topic names
        chosen = [w for w in words if w.named] or list(words)
    chosen = _whole_names(chosen, words)
    phrases: list[list[Word]] = []
    for w in chosen:  # side by side and alike: both names or both words, both known or not
        last = phrases[-1][-1] if phrases else None
        if (last is not None and last.at == w.at - 1 and last.named == w.named
                and last.absent == w.absent):
            phrases[-1].append(w)
        else:
            phrases.append([w])
    phrases = _named_with_modifiers(phrases)

    def rarity(w: Word) -> int:
        return w.documents if w.documents is not None else 10**9

    out = []
    for p in sorted(phrases, key=lambda p: (min(map(rarity, p)), p[0].at)):
        unmeasured = all(w.documents is None for w in p)  # no corpus to say which is rare
        named = [w for w in p if w.named]
        # On a tie the last word, the head of an English compound ("... logging checkpoint").
        key = named or (p if unmeasured else [min(p, key=lambda w: (rarity(w), -w.at))])
        out.append((" ".join(w.text for w in key), " ".join(w.text for w in p)))
    return tuple(dict.fromkeys(out))


def _named_with_modifiers(phrases: list[list[Word]]) -> list[list[Word]]:
    """A name and the plain words beside it that more pages use ("SSH 基础", "MC 命令行技巧",
    "asyncio event loop") are one phrase keyed by the name: "基础" (basics) alone is not the
    subject, and a quote naming only it is not about SSH."""
    def modifies(name: list[Word], plain: list[Word]) -> bool:
        if not any(w.named for w in name) or any(w.named or w.absent for w in plain):
            return False
        rarest = min((w.documents for w in name if w.documents is not None), default=None)
        return rarest is not None and all(w.documents is not None and w.documents >= rarest
                                          for w in plain)

    out: list[list[Word]] = []
    for p in phrases:
        if out and out[-1][-1].at == p[0].at - 1 and (modifies(out[-1], p)
                                                      or modifies(p, out[-1])):
            out[-1] = out[-1] + p
        else:
            out.append(p)
    return out


def _whole_names(chosen: Sequence[Word], words: Sequence[Word]) -> list[Word]:
    """A name is taken whole: the words written as names side by side with a chosen one ("Data
    Types", "Extending SQL", "Getting Started") join it, however many pages use them alone."""
    runs: list[list[Word]] = []
    for w in words:
        if w.named and runs and runs[-1][-1].named and runs[-1][-1].at == w.at - 1:
            runs[-1].append(w)
        else:
            runs.append([w])
    keep = {id(w) for w in chosen}
    for run in runs:
        if any(w.named and id(w) in keep for w in run):
            keep.update(id(w) for w in run)
    return [w for w in words if id(w) in keep]


# -- parts ------------------------------------------------------------------------------------

def _parts(q: Question, keys: Sequence[str], phrases: Sequence[str], words: Sequence[Word],
           total: int, language: str) -> tuple[Part, ...]:
    """One part per question the topic asks, each with its own subject (read from its own words
    as the topic's is) and the words it asks about, weighed by their rarity. A later part that
    leans on the first ("what are *its* pitfalls", "how are *they* treated", or one naming none
    of the topic's keys) asks about what the first part does too. A word the corpus never
    uses makes only the parts that ask about it unanswerable: a name at once, other words by
    their weight in what the part asks (core.relevance.gate)."""
    subject = _subject_phrase(phrases or keys, words)
    by_text = {w.text: w for w in words}
    named = {part for k in keys for part in k.split()}
    out: list[Part] = []
    first: list[Word] = []
    for i, text in enumerate(q.parts):
        own = list({w: by_text[w] for w, _, _ in content_words(text) if w in by_text}.values())
        leans = bool(_LEANS.search(text)) or not own
        mine = list({w.text: w for w in [*first, *own]}.values()) if i and leans else own
        about = tuple(dict.fromkeys(k for k, _ in _keys(mine, total))) if mine else ()
        if i and out and not {w.text for w in own} & named:
            # It names nothing of the subject ("what happens when a call blocks"): it is
            # about what the first part is about, as well as its own words.
            about = tuple(dict.fromkeys([*out[0].about, *about]))
        if not i:
            first = own
        asked = [w for w in mine if not _common(w, total)]
        # The gate weighs what a part asks (`words`): a word the corpus never uses weighs the
        # most, and a name it never uses (`unknown`) cannot be answered around at all.
        out.append(Part(text=text, heading=heading(text, subject, language, i > 0),
                        about=about or tuple(keys),
                        absent=tuple(dict.fromkeys(w.text for w in asked if w.absent)),
                        unknown=tuple(dict.fromkeys(w.text for w in asked
                                                    if w.absent and w.named)),
                        kind="part", words=tuple((w.text, _weight(w, total)) for w in asked)))
    return tuple(out)


_LEANS = re.compile(r"\b(?:it|its|they|them|their|this|these|those)\b|它|它们|其", re.I)


def _weight(word: Word, total: int) -> float:
    """How much naming a word tells (inverse document frequency); 1.0 when not measured."""
    if word.documents is None or total <= 0:
        return 1.0
    return math.log((total + 1) / (word.documents + 0.5))


def _option_parts(q: Question, options: Sequence[str], words: Sequence[Word],
                  language: str) -> tuple[Part, ...]:
    """A comparison's parts: each option for the purpose the question names, then how they
    differ. An option the corpus never names cannot be answered; nor can their difference."""
    absent_words = {w.text for w in words if w.absent}
    context = q.context.strip()
    cjk = has_cjk(q.text)
    # The preposition the topic puts before its purpose ("differ *in* keeping history"), else
    # "for": "SQLite for a small web app".
    said = re.search(rf"\b(for|in|on|with|when|while|at|to|regarding)\s+{re.escape(context)}",
                     q.text, re.I) if context else None
    prep = said.group(1).lower() if said else "for"
    out = []
    gone = []
    for option in options:
        missing = tuple(w for w, _, _ in content_words(option) if w in absent_words)
        gone += missing
        if cjk:
            title = f"{option}：{context}" if context else option
        else:
            title = f"{option} {prep} {context}" if context else option
        out.append(Part(text=" ".join(filter(None, [option, context])), heading=title,
                        about=(option,), absent=missing, kind="option"))
    listed = _listing(options, cjk)
    if cjk:
        differ = f"{listed}{'在' + context + '上' if context else ''}的区别"
    else:
        differ = f"How do {listed} differ" + (f" {prep} {context}" if context else "")
    out.append(Part(text=differ, heading=differ + ("" if cjk else "?"),
                    about=tuple(options), absent=tuple(dict.fromkeys(gone)), kind="differ"))
    return tuple(out)


def _listing(options: Sequence[str], cjk: bool) -> str:
    if cjk:
        return "与".join(options)
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " and " + options[-1]


def _subject_phrase(keys: Sequence[str], words: Sequence[Word]) -> str:
    """The subject's name for a heading: its named keys if it has any ("Corvid"), else its
    rarest present key ("reflog")."""
    named = {w.text for w in words if w.named}
    present = [k for k in keys if not any(w.absent and w.text in k.split() for w in words)]
    pool = present or list(keys)
    names_ = [k for k in pool if all(part in named for part in k.split())]
    return names_[0] if names_ else (pool[0] if pool else "")


_ITS = re.compile(r"\bits\b", re.I)
_IT = re.compile(r"\bit\b", re.I)


def heading(part: str, subject: str, language: str, later: bool) -> str:
    """A part as a heading in the topic's words. A later part leans on the first for its
    subject: there "its" and "it" become the subject's name, and a part naming nothing of the
    subject is prefixed with it ("Corvid: serve quorum reads"), so the reports of a batch never
    share a heading. A question keeps its question mark."""
    text = " ".join(part.split()).strip(" ,，。.;；")
    if has_cjk(text):
        if later and subject and "它" in text:
            text = text.replace("它的", f"{subject}的").replace("它", subject)
        elif later and subject and subject not in text:
            text = f"{subject}：{text}"
        return text + ("？" if _ASKING_CJK.search(text) and not text.endswith("？") else "")
    asked = bool(_ASKING.match(text))
    if later and subject:
        text = _ITS.sub(f"{subject}'s", text)
        text = _IT.sub(subject, text)
    mine = set(terms(" ".join(w for w, _, _ in content_words(text))))
    if later and subject and not mine & set(terms(subject)):
        text = f"{subject}: {text}"
    else:
        text = _sentence(text)
    return text + "?" if asked and not text.endswith("?") else text


def _sentence(text: str) -> str:
    """First letter up, unless it starts a name written in lower case (sqlite3, asyncio)."""
    first = text.split(" ", 1)[0]
    if not first or not first[:1].islower() or re.search(r"\d|[_.]", first):
        return text
    return text[:1].upper() + text[1:]
