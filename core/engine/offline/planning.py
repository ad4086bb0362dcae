"""The offline planner: a topic's intent, its comparison targets and its sub-questions.

`draft_plan` reads the topic's parts (core.engine.offline.intent: options, subject, verb, aspect) and
phrases each sub-question from them with the templates of core.engine.offline.phrasing, in the plan's
language (English, Chinese, Japanese or Korean; English for any other). A compare or
recommend plan asks one dimension of difference per sub-question about every option; a
describe plan asks what its subject is, how it does what the topic asks, how it is used and
where it fails. Queries are the topic's own content words, as written, plus a word or two of
the dimension (in the topic's language: what the sources are written in); focus phrases are
what a relevant sentence must name (the options, or the subject's phrases). Deterministic.
"""

from __future__ import annotations

import re
from typing import Sequence

from core.engine.offline import phrasing as ph
from core.engine.offline.aspects import aspect_brief, aspect_drafts
from core.engine.offline.intent import parse_topic
from core.engine.offline.parts import TopicParts, split_options
from core.engine.offline.intent_cjk import phrases
from core.engine.offline.intent_en import base_verb
from core.engine.offline.kinds import Asked, focus_of, read_english, tool_like
from core.engine.offline.kinds_zh import read_chinese
from core.engine.sentences import query_words, terms
from core.language import is_cjk, resolve_language
from core.models import ResearchPlan, SubQuestion, Topic

# Verbs that say only that something is dealt with: "... differ in safety for concurrent
# writes" reads better than "... when they handle concurrent writes".
_GENERIC_VERBS = frozenset("handle manage process support treat deal".split())
# A Chinese verb phrase's leading generic verb is no search word: "处理并发写入" -> "并发写入".
_ZH_GENERIC = re.compile(r"^(?:处理|实现|进行|支持|管理|完成|执行|应对)")

Draft = tuple[str, tuple[str, ...]]  # a sub-question's text and its queries


def draft_plan(topic: Topic) -> ResearchPlan:
    """The research plan for `topic`, written in its language (or the one it asks for)."""
    text = " ".join(topic.text.split())
    parts = parse_topic(text)
    language = resolve_language(topic.language, text)
    lang, qlang = ph.lang_of(language), ph.lang_of(parts.language)
    n = topic.max_subquestions
    asked = _asked(text, parts, lang)
    if asked is not None:  # "What causes inflation?", "The history of X", "为什么天空是蓝色的"
        intent, targets, focus = asked.intent, (), asked.focus
        drafts, brief = aspect_drafts(asked, lang), aspect_brief(asked, lang)
    elif len(parts.targets) >= 2:
        intent, targets, focus = parts.intent, parts.targets, parts.targets
        if parts.aspect and not parts.verb and not is_cjk(parts.language):
            # "JSON in SQLite or PostgreSQL": a sentence names an option and what it handles.
            focus = tuple(f"{t} {_object(parts.aspect)}" for t in parts.targets)
        drafts = _comparison(parts, lang, qlang, n)
        brief = _compare_brief(parts, lang)
    elif parts.intent == "recommend":
        intent, targets, focus = "recommend", (), _focus(parts.subject, parts.language)
        drafts, brief = _recommendation(parts, lang, qlang)
    else:  # one option is not a comparison: no targets, no comparison table
        intent, targets = "describe", ()
        focus = _focus(parts.subject or _object(parts.aspect), parts.language)
        if parts.subject and parts.aspect and parts.verb not in ("", "work", "be"):
            # "How does asyncio cancel a task?": a sentence names the subject and its action.
            action = " ".join(w for w in (parts.verb, _object(parts.aspect))
                              if w not in _GENERIC_VERBS)
            focus = tuple(f"{p} {action}" for p in focus)
        drafts, brief = _description(parts, lang, qlang)
    if not focus:  # "the best way to parse arguments": what it is done to
        focus = _fallback_focus(parts, text)
    subqs = tuple(SubQuestion(index=i, question=q, queries=tuple(dict.fromkeys(qs))[:3] or (q,),
                              focus=focus, language=language)
                  for i, (q, qs) in enumerate(drafts[:n]))
    return ResearchPlan(topic=text, brief=brief, intent=intent, targets=targets,
                        subquestions=subqs, language=language, report_words=topic.report_words)


def _asked(text: str, parts: TopicParts, lang: str) -> Asked | None:
    """The topic's kind of question (core.engine.offline.kinds), when it is not a comparison and the
    plan is written in the topic's own language (the kinds' subjects are its words)."""
    if len(parts.targets) >= 2:
        return None
    if is_cjk(parts.language):
        asked = read_chinese(text) if parts.language == "zh" and lang == "zh" else None
    else:
        asked = read_english(text) if lang == "en" else None
    if asked and asked.kind == "how" and (parts.verb or parts.passive or parts.intent != "describe"):
        return None  # the older grammar read its verb: "How does asyncio cancel a task?"
    understood = parts.subject.strip(" ?") != text.strip(" ?")  # not "Should we fear AI?"
    if asked and parts.intent == "recommend" and asked.kind != "practice" and understood:
        return None  # "Should I use asyncio for scraping?": the recommend templates
    return asked


def _fallback_focus(parts: TopicParts, text: str) -> tuple[str, ...]:
    """A focus for a topic with no subject: the object of its purpose or action, without
    the verb ("to parse command line arguments" -> "command line arguments")."""
    for phrase in (parts.purpose, parts.aspect, parts.subject, text):
        words = re.sub(r"^(?:to|for|in|when|on|with)\s+", "", phrase or "").split()
        if len(words) > 1 and base_verb(words[0]):
            words = words[1:]
        found = focus_of(" ".join(words)) if words else ()
        if found:
            return found
    return (text,)


# -- comparisons ------------------------------------------------------------------------------

def _vp(parts: TopicParts) -> str:
    """The topic's action as a phrase: "handle concurrent writes", "处理并发写入"; "" when it
    names none (an aspect alone, "在并发写入上", is not an action)."""
    return " ".join(f"{parts.verb} {parts.aspect}".split()) if parts.verb else ""


def _key(phrase: str, limit: int = 2) -> str:
    """A phrase's search words: content words as written ("concurrent I/O in Python" ->
    "concurrent"), a CJK phrase without its generic verb ("处理并发写入" -> "并发写入")."""
    return " ".join(query_words(_ZH_GENERIC.sub("", phrase) or phrase)[:limit])


def _short(target: str, extra: str, tail: str, limit: int = 6) -> str:
    """A query of at most `limit` words: the option whole, then the dimension's first word, the
    context's words, the dimension's other words ("ON DUPLICATE KEY UPDATE" is four already)."""
    words = [*extra.split()[:1], *tail.split(), *extra.split()[1:]]
    kept = words[:max(limit - len(target.split()), 0)]
    if len(target.split()) + len(words) <= limit:
        kept = [*extra.split(), *tail.split()]  # short enough: in reading order
    return " ".join([target, *kept])


def _ctx(parts: TopicParts, lang: str) -> dict[str, str]:
    """What follows (English) or precedes (CJK) every comparison question: its context."""
    vp = _vp(parts)
    if lang == "en":
        if parts.aspect and not parts.verb:  # "JSON in SQLite or PostgreSQL for documents"
            ctx = " ".join(f" when working with {parts.aspect} {parts.context}".split())
            return {"ctx": " " + ctx, "scope": ""}
        if parts.context:
            ctx = f" {parts.context}" if re.match(r"(?:for|in|when|on|under|at|with|regarding)\s",
                                                  parts.context) else f" for {parts.context}"
        elif parts.verb and parts.aspect and parts.verb in _GENERIC_VERBS:
            ctx = f" for {parts.aspect}"
        elif vp:
            ctx = f" when they {vp}"
        elif parts.aspect:
            ctx = f" for {parts.aspect}"
        else:
            ctx = ""
        return {"ctx": ctx, "scope": ""}
    scope = ph.SCOPE[lang]
    pieces = [scope["owner"].format(parts.owner) if parts.owner else "",
              scope["context"].format(parts.context) if parts.context else "",
              scope["aspect"].format(parts.aspect) if parts.aspect and not parts.verb else ""]
    return {"ctx": "", "scope": "".join(pieces)}


def _comparison(parts: TopicParts, lang: str, qlang: str, n: int) -> list[Draft]:
    targets = ph.join(parts.targets, lang)
    slots = {"targets": targets, **_ctx(parts, lang)}
    around = _key(parts.context or parts.aspect or parts.verb)
    if parts.aspect and parts.context and not parts.verb:  # what is handled, and what for
        around = f"{_key(parts.aspect, 1)} {_key(parts.context, 1)}"

    def ask(extra: Sequence[str], tail: str = around) -> tuple[str, ...]:
        return tuple(_short(t, extra[j % len(extra)], tail) for j, t in enumerate(parts.targets))

    drafts: list[Draft] = []
    vp = _vp(parts)
    if vp:  # the topic's own action first: "... differ in how they handle concurrent writes?"
        slots_vp = {**slots, "ctx": f" {parts.context}" if lang == "en" and parts.context else ""}
        drafts.append((ph.MECHANISM[lang].format(vp=vp, **slots_vp),
                       ask(("",), _key(parts.aspect or vp, 3))))
    elif parts.aspect:
        slots_aspect = {**slots, "ctx": f" {parts.context}" if lang == "en" and parts.context
                        else ""}
        drafts.append((ph.ASPECT[lang].format(aspect=parts.aspect, **slots_aspect),
                       ask(("",), _key(parts.aspect, 3))))
    if parts.criterion:  # "Is Go faster than Python?" -> "... differ in speed?"
        drafts.append((ph.COMPARE[lang].format(dim=parts.criterion, **slots),
                       ask((_key(parts.criterion),))))
    for dim, extra in zip(ph.DIMENSIONS[lang], ph.DIMENSION_QUERIES[qlang]):
        drafts.append((ph.COMPARE[lang].format(dim=dim, **slots), ask(extra)))
    if parts.intent == "recommend":  # the last question asks when to choose each
        drafts = drafts[: max(n - 1, 0)] + [(ph.CHOOSE[lang].format(**slots),
                                             ask(ph.CHOOSE_QUERIES[qlang]))]
    return drafts


def _compare_brief(parts: TopicParts, lang: str) -> str:
    slots = _ctx(parts, lang)
    if lang == "en" and not parts.context:
        vp = _vp(parts)
        slots["ctx"] = (f" in how they {vp}" if vp else
                        f" in {parts.criterion}" if parts.criterion else slots["ctx"])
    return ph.COMPARE_BRIEF[lang].format(targets=ph.join(parts.targets, lang), **slots)


# -- one subject ------------------------------------------------------------------------------

def _object(aspect: str) -> str:
    """A how-to's object without its context: "JSON in Python" -> "JSON"."""
    return re.split(r"\s+(?:for|in|when|on|with|using|from|into)\s+", aspect, maxsplit=1)[0]


def _focus(subject: str, language: str) -> tuple[str, ...]:
    """What a relevant sentence must name: one of the subject's phrases, all of its words
    ("Python's garbage collection and reference counting" -> either phrase)."""
    if not subject:
        return ()
    found = phrases(subject) if is_cjk(language) else split_options(subject)
    return tuple(p for p in found if terms(p))


def _subject_key(subject: str, limit: int = 3) -> str:
    # "SQLite 的 WAL 模式" is searched as "sqlite wal 模式": 的/の/和 join, they say nothing.
    plain = re.sub(r"\s*[的の和与、]\s*", " ", subject)
    return " ".join(query_words(plain)[:limit]) or subject


def _fill(table: dict[str, tuple[tuple[str, tuple[str, ...]], ...]], lang: str, qlang: str,
          kp: str, slots: dict[str, str], pick: Sequence[int] | None = None) -> list[Draft]:
    """A template table filled in: questions in `lang`, query words in `qlang` (the tables
    are aligned by position across languages)."""
    questions = table.get(lang, table["en"])
    words = table.get(qlang, table["en"])
    order = range(len(questions)) if pick is None else pick
    return [(questions[i][0].format(**slots),
             tuple(" ".join(f"{kp} {w}".split()) for w in words[i][1])) for i in order]


def _concept(parts: TopicParts, lang: str, subject: str) -> bool:
    """A subject that is not a made thing one uses, asked what it is or how it works (never
    for a Chinese "如何工作", the older templates' own question)."""
    if lang not in ("en", "zh") or lang != ph.lang_of(parts.language) or tool_like(subject):
        return False
    if lang == "zh":
        return not parts.verb and not parts.context
    return parts.verb in ("", "work") and not parts.passive and not parts.context


def _description(parts: TopicParts, lang: str, qlang: str) -> tuple[list[Draft], str]:
    subject, vp = _lower_article(parts.subject), _vp(parts)
    agree = ph.agreement(parts.plural)
    together = "together" in parts.aspect.lower()
    action = bool(vp) and parts.verb not in ("work", "be") and not together
    verb3 = (ph.third_person(parts.verb) if not parts.plural and lang == "en" and
             parts.language == "en" else parts.verb)
    slots = {"subject": subject, "vp": vp, "vp3": " ".join(f"{verb3} {parts.aspect}".split()),
             "aspect": parts.aspect, "passive": parts.passive,
             "work": "work together" if together else "work", **agree}
    kp = " ".join(dict.fromkeys((_subject_key(subject) + " " + _key(vp, 3)).split()))
    if action and not subject:  # "How do I cancel an asyncio task?"
        drafts = _fill(ph.HOWTO, lang, qlang, _key(vp, 4), slots)
        what = {"en": f"how to {vp}"}.get(lang, vp)
    elif action and lang in ph.ACTION:
        drafts = _fill(ph.ACTION, lang, qlang, kp, slots)
        what = {"en": f"how {subject} {slots['vp3']}"}.get(lang, f"{subject}{vp}")
    else:
        if not subject:  # a how-to in a language without how-to templates: the action itself
            subject = slots["subject"] = vp
        kp = _subject_key(subject)
        drafts = _fill(ph.DESCRIBE, lang, qlang, kp, slots)
        what = subject
        if _concept(parts, lang, subject):  # "What is inflation?": not asked what it is for
            found = _focus(subject, parts.language) if lang == "zh" else focus_of(subject)
            concept = Asked("concept", subject, focus=found or (subject,), plural=parts.plural)
            drafts = aspect_drafts(concept, lang)
            if parts.verb == "work":  # the topic's own "How does X work?" first
                drafts.insert(0, (ph.DESCRIBE["en"][1][0].format(**slots), (f"{kp} mechanism",)))
        if lang == "en" and parts.verb == "be" and parts.aspect:  # "Why is Python slow?"
            rest = _fill(ph.DESCRIBE, lang, qlang, kp, slots, pick=(0, 3, 1, 2))
            if not tool_like(subject):  # "Explain why the sky is blue": the sky is no tool
                rest = aspect_drafts(Asked("open", subject, focus=(subject,)), lang)
            drafts = _fill(ph.STATE, lang, "en", kp + " " + _key(parts.aspect), slots) + rest
            what = f"why {subject} {agree['is']} {parts.aspect}"
        elif lang == "en" and parts.passive:  # "How is the GIL implemented?"
            drafts = _fill(ph.PASSIVE, lang, "en", kp, slots) + \
                _fill(ph.DESCRIBE, lang, qlang, kp, slots, pick=(0, 2, 3, 4, 5))
            what = f"how {subject} {agree['is']} {parts.passive}"
    return drafts, ph.DESCRIBE_BRIEF[lang].format(what=what)


def _lower_article(subject: str) -> str:
    """"The Roman Empire" mid-sentence reads "the Roman Empire"; names stay as written."""
    return re.sub(r"^(The|A|An)\b(?=\s)", lambda m: m.group(1).lower(), subject)


def _recommendation(parts: TopicParts, lang: str, qlang: str) -> tuple[list[Draft], str]:
    purpose = parts.purpose or parts.subject
    if lang == "en" and not re.match(r"(?:to|for|in|when|on|with)\s", purpose):
        purpose = f"for {purpose}"  # a Chinese purpose ("小型网站") in an English plan
    elif lang != "en":
        purpose = re.sub(r"^(?:for|to)\s+", "", purpose)
    kp = _key(re.sub(r"^(?:to|for|in|when|on|with)\s+", "", purpose), 4)
    slots = {"purpose": purpose, "subject": parts.subject, **ph.agreement(parts.plural)}
    drafts = _fill(ph.RECOMMEND, lang, qlang, kp, slots)
    if parts.subject:  # "Should I use asyncio for web scraping?": that option first
        drafts.insert(0, (ph.GOOD_CHOICE[lang].format(**slots),
                          (" ".join(f"{_subject_key(parts.subject)} {kp}".split()),)))
    return drafts, ph.RECOMMEND_BRIEF[lang].format(purpose=purpose)
