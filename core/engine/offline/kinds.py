"""What kind of question an English topic asks, when it is not a comparison or a how-to.

    read_english("What causes inflation")
      -> Asked(kind="cause", subject="inflation", own="What causes inflation?")
    read_english("The history of the printing press")
      -> Asked(kind="history", subject="the printing press", own="")
    read_english("Where do hurricanes form")
      -> Asked(kind="place", subject="hurricanes", own="Where do hurricanes form?",
               clause=Clause(aux="do", verb="form", ...))

A kind (cause, reason, history, practice, impact, time, place, person, quantity, yes/no,
factors, quality, process, open) says which aspect questions make sense for the topic
(core.engine.offline.aspects phrases them): a cause question gets causes and mechanisms, a history gets
origins and change, never "what is it for". The subject is the noun phrase the topic is about,
as written; `focus` the content phrase a relevant sentence must name. Shapes the older grammar
reads well ("How does asyncio cancel a task", "What is a B-tree", "X vs Y") are left to it:
`read_english` returns None for them. Chinese is read in core.engine.offline.kinds_zh.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.engine.offline.parts import split_options
from core.engine.offline.intent_en import DETERMINERS, base_verb
from core.engine.offline.phrasing import third_person
from core.engine.sentences import terms
from core.models import Intent

_I = re.I
Kind = str  # one of the kinds above; a str so the template tables can key on it


@dataclass(frozen=True)
class Clause:
    """The pieces of "<wh> <aux> <subject> <verb> <rest>": enough to ask a sibling question
    ("How do hurricanes form?") or an infinitive one ("What causes hurricanes to form?")."""

    aux: str  # as a lower-case word: "do", "is", "can", "did"
    verb: str  # bare verb, participle ("invented") or, after "be", the complement ("blue")
    rest: str = ""  # what follows the verb: " on water" (with its leading space) or ""
    passive: bool = False  # "was invented": verb is a participle


@dataclass(frozen=True)
class Asked:
    kind: Kind
    subject: str  # the noun phrase, as written ("the printing press", "securing a cluster")
    own: str = ""  # the topic's own question, normalised; "" for a noun-phrase topic
    clause: Clause | None = None
    on: str = ""  # what an impact falls on ("teenagers"), what a count is of ("people")
    focus: tuple[str, ...] = ()
    intent: Intent = "describe"
    plural: bool = False
    about: str = ""  # what the open questions name, when not the subject ("raw eggs" for "it")


# -- noun phrases -----------------------------------------------------------------------------

_LEAD = re.compile(r"^(?:please\s+)?(?:explain|describe|summari[sz]e|tell me about|give (?:me )?"
                   r"an overview of|an? (?:brief |short )?(?:overview|introduction|guide) (?:of|to)|"
                   r"overview of|introduction to|a brief)\s+", _I)
_PREP = frozenset("in on at for of to from with by about into onto over under between during "
                  "across through within without after before against among".split())
_EVALUATIVE = frozenset("good great best better effective successful strong bad poor".split())
_MORE_VERBS = frozenset("""
form fall live happen occur exist arise grow rise die float sink evolve originate begin start end
emerge spread develop affect cause replace improve invent win lose fly glow shine rain have eat
drink sleep talk walk learn
""".split())


def focus_of(phrase: str) -> tuple[str, ...]:
    """The content phrases of a noun phrase: "securing a Kubernetes cluster" -> ("Kubernetes
    cluster",), "climate change in the arctic" -> ("climate change",), "your health" ->
    ("health",)."""
    out = []
    for item in split_options(phrase) or (phrase,):
        words = item.split()
        # "securing a cluster" -> "cluster"; "printing press" keeps its "printing".
        while len(words) > 1 and (words[0].lower() in DETERMINERS or words[0] in
                                  _EVALUATIVE or (words[0].lower().endswith("ing") and
                                                  words[0].islower() and
                                                  words[1].lower() in DETERMINERS)):
            words = words[1:]
        if words and words[0].lower() in DETERMINERS | {"your"} and len(words) == 1:
            continue
        # The head, before its context: "battery life in smartphones" -> "battery life".
        cut = next((i for i, w in enumerate(words) if i and w.lower() in _PREP), len(words))
        head = " ".join(words[:cut]).strip(" ,.;:'\"()")
        if any(w.lower() not in DETERMINERS | _PRONOUNS | _PREP for w in re.findall(r"\w+", head)):
            out.append(head)
    return tuple(dict.fromkeys(out))


def tool_like(subject: str) -> bool:
    """Whether a subject is a made thing one uses (a library, protocol, algorithm): only those
    are asked "what is it for" and "how is it used". Read from its spelling (acronyms,
    CamelCase, code characters, a possessive name: "CAP", "SQLite", "B-tree", "Python's") and
    a short list of technical head nouns; "inflation", "the sky" and "Kubernetes" are not."""
    for word in subject.split():
        core = word.strip("()\"',.;:")
        # Digits are no sign: "the Great Stink of 1858" is an event, "HTTP/2" has its "/".
        if re.search(r"\w[._+#/]\w|\w[+#]|\w-\w", core) or re.search(r".[A-Z]", core):
            return True
        if re.match(r"[A-Z]\w*'s$", core):
            return True
        if core.lower().rstrip("s") in _TECH:
            return True
    return False


_TECH = frozenset("""
algorithm api app application cache class collector collection compiler container counting
database datastructure driver engine framework function interpreter kernel language library
loop module mode object orm pattern pipeline protocol queue runtime scheduler server service
socket structure syntax table theorem thread tree type variable framework format index
""".split())


# -- clauses ----------------------------------------------------------------------------------

_AUX = ("do", "does", "did", "is", "are", "was", "were", "can", "could", "should", "will",
        "would", "has", "have", "might", "may", "must")
_BE = ("is", "are", "was", "were")


def _split_clause(rest: str, aux: str) -> tuple[str, Clause] | None:
    """"the transistor invented" after "was" -> ("the transistor", Clause("was", "invented",
    passive=True)); "ice float on water" after "does" -> ("ice", Clause("does", "float",
    " on water")). None when no verb can be told apart from the subject."""
    words = rest.split()
    if len(words) < 2:
        return None
    if aux in _BE:
        for i in range(1, len(words)):
            w = words[i].lower()
            if w.endswith(("ed", "en", "wn")) and w not in ("often", "open", "even", "green") \
                    and (base_verb(w) or w.endswith("ed")):
                return " ".join(words[:i]), Clause(aux, words[i], _tail(words[i + 1:]), True)
        # "Is coffee bad for your health": the complement starts at the first evaluative word,
        # comparative or preposition; else it is the last word ("Why is the sky blue").
        at = next((i for i in range(1, len(words)) if _complement_start(words, i)), len(words) - 1)
        return " ".join(words[:at]), Clause(aux, words[at], _tail(words[at + 1:]))
    at = None
    for i in range(1, len(words)):
        w, prev = words[i].lower(), words[i - 1].lower()
        if (base_verb(w) == w or w in _MORE_VERBS) and prev not in DETERMINERS and \
                not prev.endswith("'s") and words[i].islower():
            at = i
            break
    if at is None:  # the word before the first preposition, else the last word
        at = next((i - 1 for i in range(2, len(words)) if words[i].lower() in _PREP),
                  len(words) - 1)
    if not words[at].islower() or words[at - 1].lower() in DETERMINERS:
        return None
    return " ".join(words[:at]), Clause(aux, words[at].lower(), _tail(words[at + 1:]))


def _complement_start(words: list[str], i: int) -> bool:
    w = words[i].lower()
    return (w in _EVALUATIVE or w in _PREP or w in ("more", "less", "worth", "safe", "harmful",
                                                      "healthy", "dangerous", "possible", "true",
                                                      "necessary", "useful", "real", "alive")
            or (w.endswith("er") and len(w) > 4 and words[i].islower() and i == len(words) - 1))


def _named(subject: str) -> bool:
    # Not `terms`: "Python" is a stop word of the ranker, and still a subject.
    return bool(re.search(r"\w", subject)) and subject.lower() not in DETERMINERS


def _tail(words: list[str]) -> str:
    return (" " + " ".join(words)) if words else ""


def _question(text: str) -> str:
    """The topic as a question: first letter capitalised, one question mark."""
    t = text.strip(" ?.!")
    return t[:1].upper() + t[1:] + "?"


def _np(phrase: str) -> str:
    """A noun phrase as it reads mid-sentence: "The printing press" -> "the printing press"."""
    phrase = phrase.strip(" ,.;:")
    return re.sub(r"^(The|A|An|Your|Our|My)\b", lambda m: m.group(1).lower(), phrase)


def _asked(kind: Kind, subject: str, own: str = "", *, clause: Clause | None = None, on: str = "",
           intent: Intent = "describe", focus_from: str = "", about: str = "") -> Asked:
    subject = _np(subject)
    focus = focus_of(focus_from or subject) or (subject,)
    plural = bool(re.search(r"\s(?:and)\s", subject)) or (
        bool(subject.split()) and subject.split()[-1].islower() and subject.endswith("s")
        and not subject.endswith(("ss", "us", "is", "ics")))
    return Asked(kind, subject, own, clause, _np(on), focus, intent, plural, _np(about))


# -- the reader -------------------------------------------------------------------------------

# A noun phrase with a facet in front: "The history of X", "Best practices for X".
_FACETS: tuple[tuple[str, Kind], ...] = (
    (r"(?:a |the )?(?:brief |short )?(?:history|origins?|evolution) of (?P<np>.+)", "history"),
    (r"(?:the )?(?:best|recommended|good) practices? (?:for|in|when|of|on) (?P<np>.+)", "practice"),
    (r"(?P<np>.+?) best practices?", "practice"),
    (r"(?:tips|guidelines|recommendations) (?:for|on) (?P<np>.+)", "practice"),
    (r"(?:the )?(?:main |key |root |underlying )?(?:causes?|reasons?|drivers?) (?:of|for|behind) "
     r"(?P<np>.+)", "cause"),
    (r"(?:the )?(?:main |key )?(?P<on>advantages|benefits|pros and cons|drawbacks|disadvantages|"
     r"risks|dangers|limitations|health benefits|side effects) of (?P<np>.+)", "facet"),
    (r"(?:the )?(?:\w+ )?(?:impacts?|effects?|consequences?|influence) of (?P<np>.+?)"
     r"(?: (?:on|for|in) (?P<on>.+))?", "impact"),
)
_WHAT_BE = r"^(?:what (?:is|are|was|were) |what's )?"


def read_english(text: str) -> Asked | None:
    """The kind, subject and focus of `text` (final punctuation removed), or None when the
    topic is a shape the grammar of core.engine.offline.intent_en already phrases well."""
    t = " ".join(text.split()).strip(" ?.!")
    body = _LEAD.sub("", t)
    for pattern, kind in _FACETS:
        m = re.match(_WHAT_BE + pattern + "$", body, _I)
        if m:
            own = _question(t) if re.match(r"^(?:what|which|how|why)\b", t, _I) else ""
            intent: Intent = "recommend" if kind == "practice" else "describe"
            on = m.groupdict().get("on") or ""
            on = on.lower() if kind == "facet" else on  # "Advantages of X" -> "advantages"
            return _asked(kind, m["np"], own, on=on, intent=intent)
    if body != t:  # "Explain the CAP theorem": a plain subject, for the older grammar
        return None
    own = _question(t)
    m = re.match(r"^what (?:causes|caused|leads to|led to|drives|drove|triggers|triggered) "
                 r"(?P<np>.+)$", t, _I)
    if m:
        subject = re.split(r"\s+to\s+", m["np"], maxsplit=1)[0]
        return _asked("cause", subject, own)
    m = re.match(r"^what (?:makes|made) (?:a |an |the )?(?:good|great|effective|successful|strong) "
                 r"(?P<np>.+)$", t, _I)
    if m:
        return _asked("quality", m["np"], own)
    m = re.match(r"^(?:which|what) (?:\w+ )?(?:factors|things|variables|conditions|aspects) "
                 r"(?:affect|influence|determine|drive|impact|shape|limit)s? (?P<np>.+)$", t, _I)
    if m:
        return _asked("factors", m["np"], own)
    m = re.match(r"^what happens (?P<when>when|if|after|during|before|once) (?P<np>.+)$", t, _I)
    if m:
        return _asked("process", f"{m['when'].lower()} {m['np']}", own, focus_from=_nouns(m["np"]))
    m = re.match(r"^what (?:was|were) (?P<np>.+)$", t, _I)
    if m:  # "What was the Great Depression": an event or a thing of the past
        return _asked("open", m["np"], own)
    m = re.match(r"^how (?P<adj>\w+) (?:is|are|was|were) (?P<np>.+)$", t, _I)
    if m and m["adj"].lower() in _MEASURES:  # "How old is the universe": its age
        measure = f"the {_MEASURES[m['adj'].lower()]} of {_np(m['np'])}"
        return _asked("quantity", measure, own, focus_from=m["np"])
    m = re.match(r"^(?P<aux>is|are|was|were) it (?P<adj>\w+) to (?P<vp>.+)$", t, _I)
    if m:  # "Is it safe to eat raw eggs": the statement keeps its "it"
        clause = Clause(m["aux"].lower(), m["adj"], f" to {m['vp']}")
        about = " and ".join(_nouns(m["vp"]).split(", ")[:2]) or m["vp"]
        return _asked("yesno", "it", own, clause=clause, focus_from=about, about=about)
    m = re.match(r"^how (?P<many>many|much) (?P<np>.+)$", t, _I)
    if m:
        return _quantity(m["np"], m["many"].lower(), own)
    m = re.match(r"^who (?:is|was|are|were) (?P<np>.+)$", t, _I)
    if m:
        return _asked("person", m["np"], own)
    m = re.match(r"^who (?P<verb>\w+) (?P<np>.+)$", t, _I)
    if m and (m["verb"].lower().endswith("ed") or m["verb"].lower() in _MADE):
        return _asked("maker", m["np"], own)
    m = re.match(rf"^(?P<wh>why|when|where|how) (?P<aux>{'|'.join(_AUX)}) (?P<rest>.+)$", t, _I)
    if m:
        return _wh_clause(m["wh"].lower(), m["aux"].lower(), m["rest"], own)
    m = re.match(rf"^(?P<aux>{'|'.join(_AUX)}) (?P<rest>.+)$", t, _I)
    if m and not re.search(r"\s(?:or|vs\.?|versus|than)\s", t, _I):
        split = _split_clause(m["rest"], m["aux"].lower())
        if split and _named(split[0]) and split[0].lower() not in ("i", "we", "you"):
            return _asked("yesno", split[0], own, clause=split[1])
        return _asked("open", " and ".join(_nouns(m["rest"]).split(", ")[:2]) or m["rest"], own)
    m = re.match(r"^(?:which|what|who|whom|whose|when|where|why) (?P<rest>.+)$", t, _I)
    if m and not re.match(r"^what (?:is|are|'s|does|do)\b", t, _I):
        nouns = _nouns(m["rest"])
        if nouns:
            return _asked("open", " and ".join(nouns.split(", ")[:2]), own)
    return None


_MEASURES = {"old": "age", "big": "size", "large": "size", "far": "distance", "tall": "height",
             "high": "height", "long": "length", "fast": "speed", "hot": "temperature",
             "heavy": "weight", "deep": "depth", "common": "prevalence", "safe": "safety",
             "accurate": "accuracy", "expensive": "cost", "effective": "effectiveness"}
_JOINERS = frozenset("and or that which who when if not most least more less".split())
_PRONOUNS = frozenset("you i we they it he she one people".split())
_MADE = frozenset("wrote built made found discovered won led ran drew sang began invented "
                  "designed created founded developed composed painted".split())


def _wh_clause(wh: str, aux: str, rest: str, own: str) -> Asked | None:
    split = _split_clause(rest, aux)
    if split is None or not _named(split[0]) or split[0].lower() in ("i", "we", "you", "one"):
        return None if wh == "how" else _asked("open", _nouns(rest) or rest, own)
    subject, clause = split
    if wh == "how":
        if clause.verb in ("affect", "influence", "impact", "shape", "change") and clause.rest:
            return _asked("impact", subject, own, on=clause.rest.strip())
        if clause.verb in ("originate", "evolve", "begin", "start", "emerge", "develop") \
                and not clause.rest and aux == "did":
            return _asked("history", subject, own)
        # "How does asyncio cancel a task" is the older grammar's; planning keeps this only
        # when that grammar found no verb ("How do volcanoes form magma chambers").
        return _asked("how", subject, own, clause=clause)
    if wh == "why" and clause.verb in ("happen", "occur", "exist", "arise") and not clause.rest:
        return _asked("cause", subject, own)
    kind = {"why": "reason", "when": "time", "where": "place"}[wh]
    return _asked(kind, subject, own, clause=clause)


def _quantity(np: str, many: str, own: str) -> Asked:
    """"How many people live in Tokyo" -> counted "people", measured as "the number of people
    that live in Tokyo"."""
    words = np.split()
    counted = words[0] if words else np
    rest = words[1:]
    measure = ""
    if rest and rest[0].lower() not in _AUX and rest[0].islower():
        measure = f"the {'number' if many == 'many' else 'amount'} of {counted} that " + \
            " ".join(rest)
    elif rest and rest[0].lower() in ("do", "does") and len(rest) > 2:
        split = _split_clause(" ".join(rest[1:]), rest[0].lower())
        if split:
            subject, c = split
            verb = c.verb if rest[0].lower() == "do" else third_person(c.verb)
            measure = (f"the {'number' if many == 'many' else 'amount'} of {counted} "
                       f"{_np(subject)} {verb}{c.rest}")
    focus_from = _nouns(" ".join(rest)) or counted
    subject = measure or f"the {'number' if many == 'many' else 'amount'} of {counted}"
    return _asked("quantity", subject, own, on=counted, focus_from=focus_from)


def _nouns(clause: str) -> str:
    """The noun chunks of a clause, comma-joined: "you type a URL into a browser" -> "URL,
    browser" (pronouns, verbs and function words dropped)."""
    chunks, current = [], []
    prev = ""
    for word in clause.split():
        w = word.lower().strip(",.;:()\"'")
        stop = (prev in _PRONOUNS or w in _PREP or w in DETERMINERS or w in _PRONOUNS
                or w in _JOINERS or w in _AUX or (base_verb(w) and word.islower())
                or w in _MORE_VERBS)
        if stop:
            if current:
                chunks.append(" ".join(current))
            current = []
        else:
            current.append(word.strip(",.;:()\"'"))
        prev = w  # after a pronoun comes its verb: "you type a URL"
    if current:
        chunks.append(" ".join(current))
    return ", ".join(c for c in dict.fromkeys(chunks) if terms(c))
