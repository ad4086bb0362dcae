"""The shape of a question, read from its text alone, at robust points only.

- its parts: a question asking two things is split at the conjunction that joins them ("what
  is X for, *and what* are its pitfalls", "what does X record *and how* long are its entries
  kept", 以及, 并且, a second question mark);
- the options of a comparison, in the common shapes (X vs Y, X or Y, between X and Y, X and Y
  differ, compare X, Y and Z, X 和/与/还是 Y), and what the question asks of every option (its
  context: "for a small web app");
- whether it asks for a recommendation.

What the topic is about, and which of its words the corpus knows, is core.relevance.subject's.
There is no grammar of question kinds here on purpose: questions people write do not fit one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.text.cjk import has_cjk

_ASKING = (r"how|what|when|where|why|which|who|whether|is|are|was|were|does|do|did|can|"
           r"could|should|will|would")
# A new clause after "and": "... in git and how long are its entries kept?"
_CLAUSE = re.compile(rf"\s*[;?]\s+|,?\s+and\s+(?=(?:{_ASKING})\b)", re.I)
_CLAUSE_CJK = re.compile(r"以及|并且|而且|同时|[？?；;]|，(?=如何|怎么|怎样|为什么|什么|哪|是否|多久|多长)")

_WH = r"(?:(?:how|what|why|when|which|where)(?:\s+ways?)?\s+)?(?:(?:do|does|did|is|are|can|"\
      r"should|would|will)\s+)?"
# Option lists, most specific first; `list` holds the options and `rest` what follows them.
_SHAPES = (
    re.compile(r"\bbetween\s+(?P<list>.+?\s(?:and|or)\s.+?)(?P<rest>[?.]?)$", re.I),
    re.compile(rf"^{_WH}(?P<list>.+?\s(?:and|or)\s.+?)\s+(?:differ|compare|contrast)\b"
               r"(?P<rest>.*)$", re.I),
    re.compile(r"^(?:compare|comparing|contrast)\s+(?P<list>[^:]+?)(?P<rest>:.*|[?.]?)$", re.I),
    re.compile(r":\s*(?P<list>[^:]+?\s(?:or|vs\.?|versus)\s[^:]+?)(?P<rest>[?.]?)$", re.I),
    re.compile(r"\b(?:use|choose|pick|prefer)\s+(?P<list>.+?\s+or\s+.+?)(?P<rest>[?.]?)$", re.I),
    re.compile(r"(?P<list>\S.*?\s(?:vs\.?|versus)\s.+?)(?P<rest>[?.]?)$", re.I),
    # "How do SQLite and PostgreSQL handle ...": a plural verb before a list of names.
    re.compile(r"^(?:how|what|why|when|where|which)\s+(?:do|are|can|did|would|will)\s+"
               r"(?P<list>.+?\s(?:and|or)\s.+?)(?P<rest>\s.*)?$", re.I),
    re.compile(r"(?P<list>\S+\s+or\s+\S.*?)(?P<rest>[?.]?)$", re.I),
    re.compile(r"^(?:is|are)\s+(?P<list>.+?\s+(?:\w+er|more\s+\w+|less\s+\w+)\s+than\s+.+?)"
               r"(?P<rest>[?.]?)$", re.I),
)
_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or|vs\.?|versus|than)\s+|"
                    r"\s+(?:\w+er|more\s+\w+|less\s+\w+)\s+than\s+", re.I)
# Where an option ends and the question's context begins (lower case: "ON CONFLICT" is a name).
_CONTEXT = re.compile(r"\s+(?=(?:for|when|in|on|with|to|at|under|regarding|while|during|"
                      r"if)\s)")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
_PRONOUN = re.compile(r"(?:i|we|you|they|one)\s", re.I)
_FILLER = frozenset("which what one ones it them both either neither other others the other "
                    "something anything i we you".split())

# Chinese joins options with 和/与/跟/及/还是/或/、; an option is the Latin name or the Han run
# next to the joint (cut at a function character).
_JOINT_CJK = re.compile(r"\s*(?:和|与|跟|还是|或者|或|、|vs\.?|对比)\s*")
_LEFT = re.compile(r"([A-Za-z0-9][\w.+#-]*(?:\s+[A-Z0-9][\w.+#-]*)*|[\u4e00-\u9fff]{1,8})\s*$")
_RIGHT = re.compile(r"^\s*([A-Za-z0-9][\w.+#-]*(?:\s+[A-Z0-9][\w.+#-]*)*|[\u4e00-\u9fff]{1,8})")
# 和/与/跟/、 also join the words of one subject ("复制和同步工具": copy-and-sync tools; "PAM 和
# NSS 访问的配置文件"): options only when the question compares or chooses.
_COMPARING_CJK = re.compile(r"还是|或者|或|vs|对比|比较|区别|不同|差异|相比|哪个|哪一个|哪种|优劣|优缺点|"
                            r"选择|选哪|更好|更适合|更快", re.I)
_CUT_CJK = re.compile(r"[的在是用上中有选择应该对比比较区别不同如何怎么什么哪个吗呢了]")

_RECOMMEND = re.compile(r"\b(?:should|recommend\w*|which\s+\w+\s+(?:use|choose|pick)|best|"
                        r"better\s+choice)\b|应该|推荐|选择|选哪|哪个好|べき|おすすめ|추천", re.I)


@dataclass(frozen=True)
class Question:
    text: str
    parts: tuple[str, ...]  # the questions it asks, as written
    options: tuple[str, ...] = ()  # candidate options of a comparison, as written
    context: str = ""  # what a comparison is about besides its options: "integrating a feature branch"
    recommend: bool = False
    # The part of the context named before the options, what is compared in each of them:
    # "JSON" in "JSON in SQLite or PostgreSQL for storing documents?"
    respect: str = ""


def read_question(text: str) -> Question:
    text = " ".join(text.split())
    cjk = has_cjk(text)
    options, context, respect = (_options_cjk(text) if cjk else _options(text))
    return Question(text=text, parts=_parts(text, cjk, options), options=options, context=context,
                    recommend=bool(_RECOMMEND.search(text)), respect=respect)


def _parts(text: str, cjk: bool, options: tuple[str, ...] = ()) -> tuple[str, ...]:
    pieces = (_CLAUSE_CJK if cjk else _CLAUSE).split(text)
    parts = [p.strip(" ,，。.?？") for p in pieces]
    parts = [p for p in parts if len(p) >= (2 if cjk else 4)]
    if not cjk and not options:
        parts = [q for p in parts for q in _verb_phrases(p)]
    return tuple(parts) or (text,)


# "A and B work": a list of names sharing the question's verb, not two questions.
_SHARED_VERB = frozenset("work works happen differ compare interact function behave relate "
                         "matter fit cooperate combine operate".split())
_SMALL = frozenset("a an the of to in on at by for from with and or its their my our your "
                   "i we you it they this that these those".split())


def _verb_phrases(part: str) -> list[str]:
    """A question whose verb phrases are joined by "and": "How does Corvid replicate writes
    and serve quorum reads" asks two things; "How does garbage collection and reference
    counting work" (a list before a shared verb) and "read and write" (nothing on one side)
    ask one."""
    left, sep, right = part.partition(" and ")
    if not sep or not _ASKING_START.match(left):
        return [part]
    words = right.split()
    content = lambda ws: [w for w in ws if w.lower() not in _SMALL]  # noqa: E731
    if (len(content(left.split()[2:])) < 2 or len(content(words)) < 2
            or not words[0][:1].islower() or words[-1].lower().strip("?") in _SHARED_VERB):
        return [part]
    return [left, right]


_ASKING_START = re.compile(r"^(?:how|why|when|where|what)\s+(?:does|do|did|can|could|should|"
                           r"will|would|is|are)\s+\S", re.I)


def _options(text: str) -> tuple[tuple[str, ...], str, str]:
    for shape in _SHAPES:
        m = shape.search(text.strip())
        if not m or _PRONOUN.match(m.group("list")):
            continue  # "How do I read and write ...": what someone does, not options
        listed, after = _list_and_clause(m.group("list"))
        items = [_ARTICLE.sub("", i.strip(" ,.;:?")) for i in _SPLIT.split(listed)]
        rest = " ".join(filter(None, [after, m.group("rest") or ""]))
        if len(items) >= 2:  # the last option ends where its context begins
            last, *more = _CONTEXT.split(items[-1], maxsplit=1)  # "asyncio for concurrent I/O"
            items[-1], tail = _name(last, len(items[-2].split()))
            rest = " ".join([tail, *more, rest])
            items[0] = _name(items[0], len(items[-1].split()), leading=True)[0]
        if len(items) >= 2 and items[0]:  # the first may open with the question's verb
            items[0] = re.sub(rf"^{_WH}", "", items[0], flags=re.I).strip()
        options = [" ".join(i.split()) for i in items
                   if any(c.isalnum() for c in i) and i.lower() not in _FILLER]
        options = list(dict.fromkeys(options))
        if len(options) >= 2:  # "JSON in SQLite or PostgreSQL": JSON is context too
            before = re.sub(rf"^{_WH}|\b(?:compare|comparing|contrast|between|use|choose|pick|"
                            r"prefer|in|for|of|the|differences?|I|we|you)\b|[:,]", " ",
                            text[:m.start("list")], flags=re.I)
            # "JSON in SQLite or ...": what is compared *in* each option (not "for ...:").
            inside = re.search(r"\b(?:in|of)\s*$", text[:m.start("list")], re.I)
            return (tuple(options), _context(" ".join([before, rest])),
                    _context(before) if inside else "")
    return (), "", ""


_LAST_JOINT = re.compile(r"\s(?:and|or|vs\.?|versus)\s", re.I)


def _list_and_clause(listed: str) -> tuple[str, str]:
    """A list of options ends at its last item: a comma after the joint before that item starts
    a clause of its own ("Postgres or SQLite, for a small app": the app is no option)."""
    joint = None
    for joint in _LAST_JOINT.finditer(listed):
        pass
    if joint is None:
        return listed, ""
    cut = listed.find(",", joint.end())
    return (listed, "") if cut < 0 else (listed[:cut], listed[cut + 1:].strip())


def _name(item: str, pair: int, leading: bool = False) -> tuple[str, str]:
    """An option as a name and what follows it: a run of capitalised words ("PostgreSQL
    upserts" -> "PostgreSQL"; "ON DUPLICATE KEY UPDATE" stays whole), else as many words as
    the option it is paired with ("git rebase and git merge differ")."""
    words = item.split()
    if len(words) <= 1:
        return item, ""
    if leading:
        words = words[::-1]
    caps = 0
    while caps < len(words) and re.search(r"[A-Z]", words[caps]):
        caps += 1
    keep = caps if caps else min(pair, len(words))
    kept, tail = words[:keep], words[keep:]
    if leading:
        return " ".join(kept[::-1]), " ".join(tail[::-1])
    return " ".join(kept), " ".join(tail)


def _context(rest: str) -> str:
    """"when integrating a feature branch?" -> "integrating a feature branch"; the asking
    around it left out ("know about Extending Python with" -> "Extending Python"), so a heading
    made of it never ends in a function word."""
    rest = re.sub(r"^[\s:,]*(?:in\s+how\s+they\s+|when\s+|for\s+|in\s+|on\s+|with\s+|to\s+|"
                  r"at\s+|while\s+)?", "", rest.strip(" ?.:"), flags=re.I)
    rest = _ASKED_ABOUT.sub("", rest)
    while (cut := _TRAILING.sub("", rest)) != rest:
        rest = cut
    return " ".join(rest.replace(" :", ":").split()).strip(" :")


# "What should I know about ...", "what does the documentation say about ...": asking, not context.
_ASKED_ABOUT = re.compile(r"^\s*(?:(?:the\s+)?(?:documentation|docs|manual)\s+)?"
                          r"(?:know|learn|say|says|think|read)\s+about\s+", re.I)
_TRAILING = re.compile(r"[\s,:]+(?:with|in|for|of|on|to|at|by|using|from|about|and|or|the|a|an)$",
                       re.I)


def _options_cjk(text: str) -> tuple[tuple[str, ...], str, str]:
    if not _COMPARING_CJK.search(text):
        return (), "", ""
    joints = list(_JOINT_CJK.finditer(text))
    options: list[str] = []
    spans: list[tuple[int, int]] = []
    for j in joints:
        left, right = _LEFT.search(text[:j.start()]), _RIGHT.search(text[j.end():])
        if not left or not right:
            continue
        for m, offset in ((left, 0), (right, j.end())):
            word = _cjk_word(m.group(1), leading=offset == 0)
            if word:
                options.append(word)
                spans.append((offset + m.start(1), offset + m.end(1)))
    options = list(dict.fromkeys(options))
    if len(options) < 2:
        return (), "", ""
    rest = text
    for option in options:
        rest = rest.replace(option, " ")
    rest = _JOINT_CJK.sub(" ", rest)
    context = " ".join(w for w in _CUT_CJK.split(re.sub(r"[？?，,。.！!：:]", " ", rest))
                       if len(w.strip()) >= 2)
    return tuple(options), " ".join(context.split()), ""


def _cjk_word(word: str, *, leading: bool) -> str:
    """A Han run next to a joint, cut at its function characters: "选择多线程" -> "多线程"."""
    if not re.match(r"[\u4e00-\u9fff]", word):
        return word.strip()
    pieces = [p for p in _CUT_CJK.split(word) if p]
    if not pieces:
        return ""
    return pieces[-1] if leading else pieces[0]
