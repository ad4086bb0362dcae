"""The English grammar of core.engine.offline.intent: question word, auxiliary, subject, verb, object.

    parse_english("How do SQLite and PostgreSQL handle concurrent writes")
      -> TopicParts(intent="compare", targets=("SQLite", "PostgreSQL"), verb="handle", ...)

Patterns are tried in order, most specific first (a colon with options after it, "should I
use X or Y", "differences between", "compare", "X vs Y", "is X faster than Y", "the best way
to", "how do X <verb> <object>", "what is X"); the subject ends at the first verb of a small
lexicon (`VERBS`). A topic no pattern reads is a describe topic about its whole text.
"""

from __future__ import annotations

import re

from core.engine.offline.parts import ARTICLE, TopicParts, split_options
from core.models import Intent

_I = re.I
# Verbs topics ask about. A word found here ends the subject noun phrase ("How does asyncio
# cancel ..."); inflected forms ("cancels", "handled") are matched through `base_verb`.
VERBS = frozenset("""
access acquire affect allocate allow apply authenticate authorize avoid await balance be become
behave block break build cache call cancel catch change check choose clean close collect combine
commit communicate compare compile compress compute connect contain control convert coordinate
cope copy count create deal debug decide decode define delete deliver deploy detect determine
differ discover dispatch distribute do encode encrypt enforce ensure evict execute expire export
fail fetch fill filter find fit fix flush fork format free generate get guarantee handle
hash help hold implement import improve index influence inherit initialize insert install
interact interpret isolate iterate join keep kill launch learn limit link listen load lock log
maintain make manage map match measure merge migrate model monitor move need notify open operate
optimize order organize pack parse partition pass perform persist pick plan prefer prepare
prevent process produce profile propagate protect provide publish queue raise reach read
rebuild receive recover reduce refer relate release reload remove render replace replicate
report represent request require reset resize resolve respond restart restore retry return
reuse rollback rotate route run save scale schedule scan search secure select send serialize
serve set share shard shrink sign sort spawn split start stop store stream structure submit
support suspend switch sync synchronize take terminate test throttle throw trace track
train transfer transform translate trigger truncate tune unlock update upgrade use validate
verify wait wake work wrap write yield
""".split())
# Verbs that end a question with no object: "How does X work?", "How do X and Y compare?".
_INTRANSITIVE = frozenset("work works operate function behave happen matter scale differ compare "
                          "interact fail exist evolve perform interoperate".split())
# Verbs about options working together: "How do X and Y interact?" is not a comparison.
_TOGETHER_VERBS = frozenset("interact relate cooperate communicate combine coexist fit "
                            "integrate".split())
_TOGETHER = re.compile(r"\b(?:together|each other|one another|combined|jointly|interplay)\b", _I)
DETERMINERS = frozenset("a an the its their his her my your our this these those each every "
                        "multiple many several some all any".split())
_PEOPLE = frozenset("i we you one people".split())
_CONTEXT = re.compile(r"\s+(?=(?:for|in|when|on|under|with respect to|regarding|at)\s)", _I)
_COMPARATIVE = r"(?:much |far |significantly |a lot )?(?:better|worse|more \w+|less \w+|\w{2,}er)"
_CRITERIA = {
    "faster": "speed", "slower": "speed", "quicker": "speed", "cheaper": "cost",
    "more expensive": "cost", "safer": "safety", "more secure": "security",
    "less secure": "security", "smaller": "size", "larger": "size", "bigger": "size",
    "easier": "ease of use", "harder": "ease of use", "simpler": "simplicity",
    "lighter": "resource use", "heavier": "resource use", "more scalable": "scalability",
    "more reliable": "reliability", "more efficient": "efficiency", "stronger": "strength",
    "more popular": "adoption", "newer": "maturity", "older": "maturity",
    "more mature": "maturity", "better": "overall quality", "worse": "overall quality",
}
_RECOMMEND_WORDS = re.compile(r"\b(?:should (?:i|we)|which (?:one )?(?:to use|is best|is better)|"
                              r"recommend\w*|best way|choose|choosing|when to use|prefer)\b", _I)
_FACETS = re.compile(r"^(?:the\s+)?(?:main\s+|key\s+)?(?:advantages?|benefits?|pros and cons|"
                     r"drawbacks?|disadvantages?|limitations?|features?|uses?|purpose|role|"
                     r"internals?|architecture|basics?)\s+of\s+", _I)


def base_verb(word: str) -> str:
    """The lexicon form of an inflected verb ("cancels" -> "cancel", "handled" -> "handle"),
    or "" when the word is not a verb the lexicon knows."""
    w = word.lower()
    irregular = {"does": "do", "did": "do", "has": "have", "is": "be", "are": "be", "was": "be",
                 "were": "be", "been": "be", "being": "be"}
    if w in irregular:
        return irregular[w]
    for cut, add in (("", ""), ("s", ""), ("es", ""), ("ies", "y"), ("ed", ""), ("ed", "e"),
                     ("d", ""), ("ing", ""), ("ing", "e")):
        if w.endswith(cut) and (w[: len(w) - len(cut)] + add) in VERBS:
            return w[: len(w) - len(cut)] + add
    return ""


def _split_context(text: str) -> tuple[str, str]:
    """"SQLite or PostgreSQL for a small web app" -> ("SQLite or PostgreSQL", "for a small
    web app"): the head, and the context with its preposition."""
    parts = _CONTEXT.split(text, maxsplit=1)
    return parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")


def _criterion(comparative: str) -> str:
    phrase = re.sub(r"^(?:much|far|significantly|a lot)\s+", "", comparative.lower())
    return _CRITERIA.get(phrase, phrase)


def _looks_plural(phrase: str) -> bool:
    """A bare noun phrase's number, for "do"/"does": options joined by "and", or a head noun
    in -s that is not a name ("Kubernetes") nor "-ss"/"-us"/"-is"."""
    if re.search(r"\s(?:and)\s|,", phrase):
        return True
    head = phrase.split()[-1] if phrase.split() else ""
    return (head.islower() and head.endswith("s") and not head.endswith(("ss", "us", "is"))
            and len(head) > 3)


def _compare(targets: tuple[str, ...], *, context: str = "", verb: str = "", aspect: str = "",
             criterion: str = "", intent: Intent = "compare") -> TopicParts:
    return TopicParts(intent=intent, targets=targets, subject=", ".join(targets), plural=True,
                      verb=verb, aspect=aspect, context=context, criterion=criterion)


def _clause(rest: str, aux: str) -> TopicParts:
    """The part of "How <aux> <rest>" after the auxiliary: subject, verb, object.

    The verb is the last word when it is intransitive ("... work"), else the first lexicon
    verb after the subject's first word that does not follow an article or possessive, else
    the word before a determiner ("... free the memory")."""
    words = rest.split()
    at = None
    end = len(words) - (1 if len(words) > 2 and _TOGETHER.fullmatch(words[-1]) else 0)
    if end > 1 and words[end - 1].lower() in _INTRANSITIVE:  # "... work (together)"
        at = end - 1
    for i in range(1, len(words)) if at is None else ():
        prev = words[i - 1].lower()
        # After "do"/"does"/"can" the verb is bare: "counting", "processes" are nouns here.
        if words[i].lower() in VERBS and prev not in DETERMINERS and not prev.endswith("'s"):
            at = i
            break
    for i in range(1, len(words) - 1) if at is None else ():
        if words[i + 1].lower() in DETERMINERS:
            at = i
            break
    if at is None:
        return TopicParts(subject=rest, plural=_looks_plural(rest))
    subject, verb = " ".join(words[:at]), words[at]
    aspect = " ".join(words[at + 1:])
    verb = base_verb(verb) or verb.lower()
    if subject.lower() in _PEOPLE:  # "How do I cancel a task?": a how-to, no subject
        return TopicParts(verb=verb, aspect=aspect, plural=True)
    options = split_options(subject)
    # The topic's own auxiliary says its number; a modal ("can") does not, and two options
    # are plural whatever the topic wrote ("How does X and Y work" -> "How do X and Y work").
    plural = (aux in ("do", "are", "were") if aux in ("do", "does", "is", "are", "was", "were")
              else _looks_plural(subject)) or len(options) > 1
    parts = TopicParts(subject=subject, plural=plural, verb=verb, aspect=aspect)
    together = verb in _TOGETHER_VERBS or _TOGETHER.search(aspect)
    if verb in ("differ", "compare") and len(options) > 1:
        # "How do X and Y differ in memory use?" -> judged on "memory use".
        criterion, context = _split_context(re.sub(r"^(?:in|on)\s+", "", aspect, flags=_I))
        return _compare(options, context=context, criterion=criterion if aspect else "")
    # "How do X and Y handle ..." compares them; "How does X and Y work" (one mechanism of two
    # parts, the demo's garbage collection and reference counting) and "How do X and Y work
    # together" do not.
    if len(options) > 1 and aux != "does" and not together and verb not in _INTRANSITIVE - {
            "perform", "scale", "fail", "behave"}:
        return _compare(options, verb=verb, aspect=aspect)
    return parts


def parse_english(text: str) -> TopicParts:
    """The parts of an English (or other Latin-script) topic, its final punctuation removed."""
    t = text
    # "Which should I use for serializing data: json or pickle"
    m = re.match(r"^which (?:\w+ )?(?:should (?:i|we) (?:use|choose|pick)|to use|is (?:the )?"
                 r"(?:best|better))(?:\s+(?P<ctx>(?:for|to|in|when)\s+[^:]+?))?\s*[:,]\s*"
                 r"(?P<opts>.+)$", t, _I)
    if m and len(split_options(m["opts"])) > 1:
        ctx = re.sub(r"^to\s+", "for ", m["ctx"] or "", flags=_I) if (m["ctx"] or "").lower(
            ).startswith("to ") else (m["ctx"] or "")
        return _compare(split_options(m["opts"]), context=ctx, intent="recommend")
    # "Which is faster, X or Y (for Z)"
    m = re.match(rf"^which (?:one )?(?:is|are|runs?) (?P<comp>{_COMPARATIVE}|best)"
                 r"(?:\s+(?P<ctx>(?:for|in|when|at)\s+[^:,]+?))?\s*[:,]\s*(?P<opts>.+)$", t, _I)
    if m and len(split_options(m["opts"])) > 1:
        opts, ctx2 = _split_context(m["opts"])
        intent: Intent = "recommend" if m["comp"].lower() in ("better", "best") else "compare"
        return _compare(split_options(opts), context=m["ctx"] or ctx2, intent=intent,
                        criterion="" if intent == "recommend" else _criterion(m["comp"]))
    # "Should I use SQLite or PostgreSQL for a small web app"
    m = re.match(r"^(?:should|would|could|can|do) (?:i|we|you) (?:use|choose|pick|go with|"
                 r"prefer|adopt|learn|select)\s+(?P<rest>.+)$", t, _I)
    if m:
        opts, ctx = _split_context(m["rest"])
        targets = split_options(opts)
        if len(targets) > 1:
            return _compare(targets, context=ctx, intent="recommend")
        return TopicParts(intent="recommend", subject=opts, purpose=ctx or f"for {opts}")
    # "Choosing between X and Y for Z", "differences between X and Y in Python"
    m = re.match(r"^(?:(?:what|where) (?:is|are|'s) )?(?:the )?(?:main |key |biggest )?"
                 r"(?P<kind>differences?|choosing|choose|deciding|picking)\s+(?:between|of)\s+"
                 r"(?P<rest>.+)$", t, _I)
    if m:
        opts, ctx = _split_context(m["rest"])
        if len(split_options(opts)) > 1:
            intent = "compare" if m["kind"].lower().startswith("difference") else "recommend"
            return _compare(split_options(opts), context=ctx, intent=intent)
    # "Compare MySQL and PostgreSQL upserts: ON DUPLICATE KEY UPDATE versus ON CONFLICT": the
    # options are after the colon, what they are for before it.
    pre, colon, after = t.rpartition(":")
    if colon and re.search(r"\s(?:vs\.?|versus|or)\s", after, _I) and not re.search(
            r"\s(?:vs\.?|versus)\s", pre, _I) and len(split_options(after)) > 1:
        pre = re.sub(r"^(?:compare|comparing|choosing|choose|for)\s+", "", pre.strip(), flags=_I)
        if pre[:1].isupper() and pre.split()[0][1:].islower():  # "Databases", not "MySQL"
            pre = pre[0].lower() + pre[1:]
        intent = "recommend" if _RECOMMEND_WORDS.search(t) else "compare"
        return _compare(split_options(after), context=f"for {pre}" if pre else "", intent=intent)
    # "Compare the performance of X and Y for Z", "Compare X with Y"
    m = re.match(r"^(?:compare|comparing|contrast)\s+(?:the\s+(?P<facet>[\w\s-]+?)\s+of\s+)?"
                 r"(?P<rest>.+)$", t, _I)
    if m:
        opts, ctx = _split_context(m["rest"])
        targets = split_options(re.sub(r"\s+(?:with|to|against)\s+", " and ", opts, flags=_I))
        if len(targets) > 1:
            return _compare(targets, context=ctx, criterion=(m["facet"] or "").strip())
        return TopicParts(subject=targets[0] if targets else opts,
                          plural=_looks_plural(opts), context=ctx)
    # "X vs Y", "X versus Y: which is faster for Z", "How does X work compared with Y"
    m = re.match(r"^(?P<a>.+?)\s+(?:vs\.?|versus|compared (?:with|to)|as opposed to|"
                 r"in comparison (?:with|to)|relative to)\s+(?P<b>.+)$", t, _I)
    if m:
        return _versus(m["a"], m["b"])
    # "Is X faster than Y for Z"
    m = re.match(rf"^(?:is|are|was|were|does|do)\s+(?P<a>.+?)\s+(?P<comp>{_COMPARATIVE})\s+"
                 r"than\s+(?P<b>.+)$", t, _I)
    if m:
        b, ctx = _split_context(m["b"])
        a = _clause(m["a"], "does") if t.lower().startswith(("does", "do ")) else None
        first = a.subject if a and a.verb else m["a"]
        more = re.match(r"^(?:more|less|fewer)\s+(\w+)$", m["comp"], _I)
        crit = (f"{more.group(1)} {a.verb}" if more else f"{a.verb} {m['comp']}") \
            if a and a.verb else _criterion(m["comp"])
        return _compare(split_options(f"{ARTICLE.sub('', first)}, {b}"), context=ctx,
                        criterion=crit)
    # "What is the best way to parse command line arguments"
    m = re.match(r"^(?:what(?:'s| is| are) )?(?:the )?best (?:way|ways|approach|practices?|"
                 r"tools?|library|libraries|options?) (?P<purpose>(?:to|for)\s+.+)$", t, _I)
    if m:
        return TopicParts(intent="recommend", purpose=m["purpose"])
    m = re.match(r"^how (?:should|can|do) (?:i|we) (?:best )?(?P<rest>.+)$", t, _I) if \
        _RECOMMEND_WORDS.search(t) else None
    if m:
        return TopicParts(intent="recommend", purpose=f"to {m['rest']}")
    # "How do X and Y handle Z", "How does asyncio cancel a task", "How to cancel a task"
    m = re.match(r"^(?:explain |describe )?(?:how|why|when|where)\s+(?P<aux>do|does|did|can|could|"
                 r"should|would|will)\s+(?P<rest>.+)$", t, _I)
    if m:
        return _clause(m["rest"], m["aux"].lower())
    m = re.match(r"^(?:explain |describe )?how to\s+(?P<rest>.+)$", t, _I)
    if m:
        words = m["rest"].split()
        return TopicParts(verb=base_verb(words[0]) or words[0].lower(),
                          aspect=" ".join(words[1:]), plural=True)
    # "How is X implemented", "Why is Python slow", "What is X", "Explain X"
    m = re.match(r"^(?:how|why)\s+(?P<aux>is|are|was|were)\s+(?P<rest>.+)$", t, _I)
    if m:
        return _state(m["rest"], m["aux"].lower())
    m = re.match(r"^(?:what|who)\s+(?:is|are|'s)\s+(?P<np>.+?)(?:\s+and\s+(?:how|why|what)\b.*)?$",
                 t, _I) or re.match(r"^what (?:does|do) (?P<np>.+?) do$", t, _I) or re.match(
        r"^(?:explain|describe|tell me about|give an overview of|an? (?:overview|introduction) "
        r"(?:of|to)|overview of|introduction to)\s+(?P<np>.+)$", t, _I)
    if m:
        np = _FACETS.sub("", m["np"])
        if re.match(r"^(?:how|why)\s", np, _I):  # "Explain how asyncio cancels a task"
            return _explained(np)
        return TopicParts(subject=np, plural=_looks_plural(np))
    # "Which database should I use for analytics": a kind of thing, chosen for a purpose.
    m = re.match(r"^(?:which|what)\s+(?P<kind>[\w\s-]+?)\s+(?:should|would|do|to)\s+(?:i\s+|we\s+)?"
                 r"(?:use|choose|pick)(?:\s+(?P<purpose>.+))?$", t, _I)
    if m:
        return TopicParts(intent="recommend", purpose=m["purpose"] or f"for {m['kind']} needs")
    if _RECOMMEND_WORDS.search(t):
        head, ctx = _split_context(re.sub(r"^(?:when to use|recommend(?:ed)?|choosing|choose)\s+",
                                          "", t, flags=_I))
        return TopicParts(intent="recommend", subject=head, purpose=ctx or f"for {head}")
    # Bare "X or Y for Z": a choice between options.
    head, ctx = _split_context(t)
    # "JSON in SQLite or PostgreSQL for storing documents": the options handle the head.
    inner = re.match(r"^(?:in|on|with|for)\s+(?P<opts>.+?)"
                     r"(?:\s+(?P<rest>(?:for|when|in|to)\s.+))?$", ctx, _I)
    if inner and re.search(r"\s(?:or|vs\.?|versus)\s", inner["opts"], _I) and \
            len(split_options(inner["opts"])) > 1 and len(head.split()) <= 4:
        return _compare(split_options(inner["opts"]), aspect=head, context=inner["rest"] or "")
    if re.search(r"\s+or\s+", head, _I) and all(len(o.split()) <= 4
                                               for o in split_options(head)):
        if len(split_options(head)) > 1:
            return _compare(split_options(head), context=ctx)
    return TopicParts(subject=t, plural=_looks_plural(t))


def _explained(clause: str) -> TopicParts:
    """"how asyncio cancels a task" (an embedded question, verbs inflected) as its parts."""
    words = clause.split()[1:]
    for i, word in enumerate(words[1:], start=1):
        if base_verb(word) and words[i - 1].lower() not in DETERMINERS:
            plural = not word.lower().endswith("s") or word.lower().endswith("ss")
            return _clause(" ".join([*words[:i], base_verb(word), *words[i + 1:]]),
                           "do" if plural else "does")
    return TopicParts(subject=" ".join(words), plural=_looks_plural(" ".join(words)))


def _state(rest: str, aux: str) -> TopicParts:
    """"How is X implemented" (a passive) or "Why is X slow" (a state) as its parts."""
    words = rest.split()
    plural = aux in ("are", "were")
    for i in range(1, len(words)):
        if words[i].lower().endswith(("ed", "en", "wn")) and base_verb(words[i]):
            return TopicParts(subject=" ".join(words[:i]), plural=plural,
                              passive=" ".join(words[i:]))
    if len(words) > 1:  # "Why is Python slow": the last word says how it is
        return TopicParts(subject=" ".join(words[:-1]), plural=plural, verb="be",
                          aspect=words[-1])
    return TopicParts(subject=rest, plural=plural)


def _versus(a: str, b: str) -> TopicParts:
    """Both sides of "A vs B", "How do A handle Z compared with B", with any tail after a
    colon ("Rust vs Go: which is faster for web servers")."""
    b, _, tail = (re.split(r"(\s*[:?]\s*|,\s*(?=which\b|what\b|should\b))", b, maxsplit=1)
                  + ["", ""])[:3]
    b, ctx = _split_context(b)
    intent: Intent = "recommend" if _RECOMMEND_WORDS.search(tail) else "compare"
    crit = re.search(rf"\b(?:is|are|runs?)\s+({_COMPARATIVE})\b", tail, _I)
    tail_ctx = _split_context(tail)[1]
    left = re.match(r"^(?:how|why)\s+(?P<aux>do|does|can|could|would)\s+(?P<rest>.+)$", a, _I)
    if left:  # "How do embedded databases handle writes compared with server databases"
        clause = _clause(left["rest"], "do")
        if clause.subject and clause.verb:
            targets = split_options(f"{clause.subject}, {b}")
            return _compare(targets, context=ctx or tail_ctx, verb=clause.verb,
                            aspect=clause.aspect, intent=intent)
    a = re.sub(r"^(?:what is|what are|compare|is|are)\s+", "", a, flags=_I)
    targets = split_options(re.sub(r"\s+(?:vs\.?|versus)\s+", ", ", f"{a}, {b}", flags=_I))
    criterion = "" if intent == "recommend" or not crit else _criterion(crit.group(1))
    return _compare(targets, context=ctx or tail_ctx, criterion=criterion, intent=intent)
