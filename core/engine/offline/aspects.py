"""The aspect questions a kind of question gets (core.engine.offline.kinds), in English and Chinese.

A cause question is followed by its causes, mechanisms and factors; a history by origins,
change and impact; best practices by recommendations and mistakes; a yes/no question by the
evidence each way. A template whose slots the topic cannot fill (no clause to rebuild "How do
hurricanes form?") is skipped, and every kind ends with the open questions any noun phrase
takes ("What evidence or examples illustrate NP?"), so there are always six. Filled by
`aspect_drafts`; nothing here parses.
"""

from __future__ import annotations

import re

from core.engine.offline.kinds import Asked
from core.engine.offline.phrasing import agreement, third_person
from core.engine.sentences import query_words

Draft = tuple[str, tuple[str, ...]]
# Words of a question that no page about the answer uses.
_ASKING = frozenset("many much happens happen makes make".split())
Table = tuple[tuple[str, tuple[str, ...]], ...]

# Any noun phrase: the fallback after every kind's own questions.
OPEN: dict[str, Table] = {
    "en": (("What do the sources say are the key facts about {np}?", ("facts",)),
           ("What evidence or examples illustrate {np}?", ("example",)),
           ("What are the open questions or disagreements about {np}?", ("debate",)),
           ("How has the understanding of {np} changed over time?", ("history",)),
           ("Which related topics help explain {np}?", ("related",)),
           ("What are common misconceptions about {np}?", ("misconception",))),
    "zh": (("关于{np}，资料中有哪些关键事实？", ("",)),
           ("有哪些证据或例子可以说明{np}？", ("例子",)),
           ("关于{np}有哪些尚无定论的问题或争议？", ("争议",)),
           ("人们对{np}的认识是如何变化的？", ("发展",)),
           ("{np}与哪些相关主题有关？", ("相关",)),
           ("关于{np}有哪些常见误解？", ("误解",))),
}
# "What is inflation?": a concept, not a tool; no "what is it for".
CONCEPT: dict[str, Table] = {"en": (("What {is} {np}?", ("definition",)),),
                             "zh": (("{np}是什么？", ("",)),)}

EN: dict[str, Table] = {
    "cause": (("What are the main causes of {np}?", ("causes",)),
              ("How do these causes lead to {np}?", ("mechanism",)),
              ("Which factors make {np} better or worse?", ("factors",)),
              ("What evidence supports each explanation of {np}?", ("evidence",))),
    "reason": (("{cause_q}", ("cause",)),
               ("Which conditions {make} it more or less likely for {np} {inf}?", ("conditions",)),
               ("What evidence or examples illustrate why {stmt}?", ("evidence",)),
               ("What are common misconceptions about why {stmt}?", ("misconception",))),
    "time": (("{how}", ("how",)), ("{cause_q}", ("history",)), ("{after}", ("impact",))),
    "how": (("What steps or stages are involved when {stmt}?", ("steps",)),
            ("{cause_q}", ("cause",)),
            ("Which conditions {make} it more or less likely for {np} {inf}?", ("conditions",)),
            ("What evidence or examples illustrate how {stmt}?", ("example",))),
    "place": (("{cond}", ("conditions",)), ("{how}", ("how",)), ("{cause_q}", ("cause",)),
              ("What evidence or examples illustrate where {stmt}?", ("location",))),
    "person": (("What {was} {np} best known for?", ("known for",)),
               ("What were the key events in the life and career of {np}?", ("biography",)),
               ("What influence {has} {np} had?", ("influence",))),
    "maker": (("How did {np} come about?", ("history",)),
              ("Who else contributed to {np}, and how?", ("contributors",)),
              ("What was the background of the people behind {np}?", ("inventor",)),
              ("What impact did {np} have?", ("impact",))),
    "history": (("How did {np} originate?", ("origin",)),
                ("How did {np} change over time?", ("history",)),
                ("What were the key milestones in the history of {np}?", ("milestones",)),
                ("What impact did {np} have?", ("impact",)),
                ("Who were the key people in the history of {np}?", ("inventor",))),
    "practice": (("What are the recommended practices for {np}?", ("best practices",)),
                 ("Which common mistakes should be avoided {when_np}?", ("mistakes",)),
                 ("Why do these practices matter {when_np}?", ("risks",)),
                 ("Which tools or techniques help {with_np}?", ("tools",)),
                 ("How can the results of {np} be checked or measured?", ("checklist",))),
    "impact": (("What effects {does} {np} have{on_}?", ("effects",)),
               ("Through which mechanisms do the effects of {np}{on_} arise?", ("mechanism",)),
               ("What evidence measures the impact of {np}{on_}?", ("study evidence",)),
               ("In which situations is the impact of {np}{on_} strongest?", ("risk",)),
               ("What can reduce the negative effects of {np}{on_}?", ("reduce",))),
    "quality": (("What principles or qualities define {a}good {np}?", ("principles",)),
                ("Which common mistakes lead to {a}poor {np}?", ("mistakes",)),
                ("How can the quality of {np} be assessed?", ("quality",)),
                ("What examples illustrate {a}good {np}?", ("example",))),
    "factors": (("How does each factor affect {np}?", ("factors",)),
                ("Which of these factors matter most for {np}?", ("factors",)),
                ("How can {np} be improved?", ("improve",)),
                ("What evidence shows how much each factor matters for {np}?", ("evidence",))),
    "process": (("What are the main steps, in order, {np}?", ("steps",)),
                ("Which components or actors are involved {np}?", ("components",)),
                ("What can go wrong {np}?", ("error",)),
                ("Which examples show each step {np}?", ("example",))),
    "quantity": (("How is {np} measured or estimated?", ("statistics",)),
                 ("How has {np} changed over time?", ("trend",)),
                 ("Which factors drive {np}?", ("factors",)),
                 ("Why do sources give different figures for {np}?", ("estimate",))),
    "yesno": (("What evidence supports the view that {stmt}?", ("evidence",)),
              ("What evidence or arguments contradict the view that {stmt}?", ("risks",)),
              ("In which circumstances is it true that {stmt}, and when not?", ("conditions",)),
              ("What do the sources conclude overall about whether {stmt}?", ("review",))),
    "facet": (("What are the main {on} of {np}?", ("{on}",)),
              ("What evidence supports the {on} of {np}?", ("evidence",)),
              ("For whom or in which situations do the {on} of {np} matter most?", ("when",)),
              ("How do the {on} of {np} compare with those of alternatives?", ("alternative",))),
    "open": (),
}

ZH: dict[str, Table] = {
    "howto": (("{first}", ("{first_q}",)),
              ("有哪些方法可以{vp}？", ("方法",)),
              ("{vp}时有哪些常见陷阱？", ("问题",)),
              ("{measure}", ("工具",)),
              ("{vp}有哪些具体示例？", ("示例",))),
    "reason": (("{np}的主要原因是什么？", ("原因",)),
               ("导致{np}的机制是什么？", ("原理",)),
               ("有哪些证据可以支持关于{np}的解释？", ("证据",)),
               ("关于{np}的原因有哪些常见误解？", ("误解",))),
    "cause": (("{np}的主要原因有哪些？", ("原因",)),
              ("这些原因是如何导致{np}的？", ("机制",)),
              ("哪些因素会加剧或缓解{np}？", ("因素",)),
              ("有哪些证据支持关于{np}成因的各种解释？", ("证据",))),
    "history": (("{np}是如何起源的？", ("起源",)),
                ("{np}在不同时期经历了哪些变化？", ("发展",)),
                ("{np}的发展史上有哪些关键节点？", ("历史",)),
                ("{np}产生了哪些影响？", ("影响",)),
                ("哪些人物在{np}的发展中起了关键作用？", ("人物",))),
    "practice": (("{np}有哪些推荐的做法？", ("最佳实践",)),
                 ("{np}中有哪些需要避免的常见错误？", ("常见错误",)),
                 ("这些做法为什么对{np}很重要？", ("原因",)),
                 ("{np}常用哪些工具或技术？", ("工具",)),
                 ("如何评估{np}的效果？", ("评估",))),
    "which": (("{np}的{y}主要有哪些？", ("",)),
              ("{np}的{y}是如何产生的？", ("原因",)),
              ("{np}的{y}有哪些具体例子？", ("例子",)),
              ("{np}的{y}在什么情况下最为重要？", ("场景",)),
              ("关于{np}的{y}有哪些不同观点？", ("争议",))),
    "impact": (("{np}对{on}有哪些影响？", ("影响",)),
               ("{np}通过哪些机制影响{on}？", ("机制",)),
               ("有哪些证据衡量了{np}对{on}的影响？", ("研究",)),
               ("如何减少{np}对{on}的负面影响？", ("对策",))),
    "open": (),
}


# "如何优化 X": the result is X itself, measured ("如何衡量 X").
_ZH_IMPROVE = frozenset("优化 提高 提升 降低 减少 改善 加快 加速 节省 减小 缩短".split())


def _past(verb: str) -> str:
    irregular = {"fall": "fell", "rise": "rose", "begin": "began", "win": "won", "lose": "lost",
                 "grow": "grew", "go": "went", "come": "came", "make": "made", "build": "built",
                 "get": "got", "take": "took", "give": "gave", "run": "ran", "sink": "sank",
                 "fly": "flew", "spread": "spread", "become": "became", "lead": "led",
                 "break": "broke", "write": "wrote", "find": "found", "have": "had", "do": "did",
                 "be": "was", "think": "thought", "say": "said", "leave": "left", "stand": "stood"}
    if verb in irregular:
        return irregular[verb]
    if verb.endswith("e"):
        return verb + "d"
    return verb[:-1] + "ied" if re.search(r"[^aeiou]y$", verb) else verb + "ed"


def _clause_slots(a: Asked) -> dict[str, str]:
    """The slots a clause fills: the statement, infinitive and sibling questions."""
    c, np = a.clause, a.subject
    if c is None:
        return {}
    past = c.aux in ("did", "was", "were")
    be = c.aux in ("is", "are", "was", "were")
    if be:
        inf, stmt = f"to be {c.verb}{c.rest}", f"{np} {c.aux} {c.verb}{c.rest}"
    elif c.aux in ("do", "does", "did"):
        inf = f"to {c.verb}{c.rest}"
        conj = {"do": c.verb, "does": third_person(c.verb), "did": _past(c.verb)}[c.aux]
        stmt = f"{np} {conj}{c.rest}"
    else:  # a modal: "Rust can replace C++"
        inf, stmt = f"to {c.verb}{c.rest}", f"{np} {c.aux} {c.verb}{c.rest}"
    slots = {"inf": inf, "stmt": stmt, "make": "made" if past else "make"}
    if be and not c.passive:  # "Why is the sky blue" -> "What makes the sky blue?"
        slots["cause_q"] = f"What {'made' if past else 'makes'} {np} {c.verb}{c.rest}?"
    else:
        slots["cause_q"] = f"What {'led' if past else 'causes'} {np} {inf}?"
    if not be or c.passive:
        slots["how"] = f"How {c.aux} {np} {c.verb}{c.rest}?"
    if not be or a.kind == "yesno":
        slots["cond"] = f"Under what conditions {c.aux} {np} {c.verb}{c.rest}?"
    slots["after"] = (f"What were the consequences once {stmt}?" if past else
                      f"What follows once {stmt}?")
    return slots


def _slots_en(a: Asked) -> dict[str, str]:
    agree = agreement(a.plural)
    gerund = bool(re.match(r"^[a-z]+ing\b", a.subject))
    slots = {"np": a.subject, "on": a.on, **agree, "was": "was" if "was" in a.own.split()[:2] else agree["is"],
             "has": "have" if a.plural else "has", "a": "" if a.plural else "a ",
             "on_": f" on {a.on}" if a.on and a.kind == "impact" else "",
             "when_np": f"when {a.subject}" if gerund else f"in {a.subject}",
             "with_np": f"with {a.subject}" if gerund else f"with {a.subject}"}
    return {**slots, **_clause_slots(a)}


def _fill(table: Table, slots: dict[str, str], key: str) -> list[Draft]:
    out = []
    for question, suffixes in table:
        try:
            text = question.format(**slots)
        except KeyError:  # a slot this topic cannot fill: skip the question
            continue
        if text.strip():
            out.append((text, tuple(" ".join(f"{key} {s.format(**slots)}".split())
                                    for s in suffixes)))
    return out


def aspect_drafts(a: Asked, lang: str) -> list[Draft]:
    """The sub-questions for `a` in `lang` ("en" or "zh"): its own question (English), its
    kind's aspect questions, then the open ones; no question twice."""
    # The focus's words; as written when the ranker calls them stop words ("Python").
    key = " ".join(query_words(" ".join(a.focus))[:3]) or " ".join(
        re.findall(r"[\w+#.-]+", " ".join(a.focus).lower())[:3])
    if a.clause and lang == "en":  # "python" + "tail call optimization": what it is asked of
        said = query_words(f"{a.clause.verb}{a.clause.rest}")
        key = " ".join(list(dict.fromkeys([*key.split(), *said]))[:4])
    if lang == "zh":
        obj = a.clause.rest if a.clause else a.subject
        better = bool(a.clause and a.clause.verb in _ZH_IMPROVE)
        slots = {"np": a.subject, "on": a.on, "y": a.on, "vp": a.subject, "obj": obj,
                 "measure": f"如何衡量{obj}？" if better else f"如何检验{a.subject}的效果？",
                 # "如何优化 X": what X depends on; "怎么学习 Rust": the steps
                 "first": f"{obj}主要受哪些因素影响？" if better else f"{a.subject}的具体步骤是什么？",
                 "first_q": "影响因素" if better else "步骤"}
        if a.kind == "which":  # "Docker 容器 安全风险": what is asked about is searched too
            key = " ".join(dict.fromkeys(f"{key} {a.on}".split()))
        drafts = _fill(ZH.get(a.kind, ()), slots, key)
        if a.kind in ("open", "concept"):
            drafts = _fill(CONCEPT["zh"], slots, key) + drafts
        open_np = a.clause.rest if a.kind == "howto" and a.clause else a.subject
        drafts += _fill(OPEN["zh"], {**slots, "np": open_np}, key)
    else:
        slots = _slots_en(a)
        words = [w for w in query_words(a.own) if w not in _ASKING]
        if not set(key.split()) & set(words):  # "Why is Python slow": "python" is no term
            words = [*key.split()[:1], *words]
        words = words[:5]
        own = [(a.own, (" ".join(words) or key,))] if a.own else []
        lead = _fill(CONCEPT["en"], slots, key) if a.kind == "concept" else []
        drafts = own + lead + _fill(EN.get(a.kind, ()), slots, key) + \
            _fill(OPEN["en"], {**slots, "np": a.about or a.subject}, key)
    seen: set[str] = set()
    unique = []
    for q, qs in drafts:
        if q.lower() not in seen:
            seen.add(q.lower())
            unique.append((q, qs or (key,)))
    return unique


def aspect_brief(a: Asked, lang: str) -> str:
    """What the plan researches, in words: the topic's own question, or its subject."""
    if lang == "zh":
        what = {"howto": f"如何{a.subject}", "reason": f"{a.subject}的原因",
                "cause": f"{a.subject}的成因", "history": f"{a.subject}的历史",
                "practice": f"{a.subject}的最佳实践", "which": f"{a.subject}的{a.on}",
                "impact": f"{a.subject}对{a.on}的影响"}.get(a.kind, a.subject)
        return f"研究{what}。每个子问题都用引用的来源原文作答。"
    if a.own:  # the topic's own question, quoted as it asks
        return f"Research the question \"{a.own}\" Answer each sub-question from quoted sources."
    what = {"history": f"the history of {a.subject}", "practice": f"best practices for {a.subject}",
            "cause": f"the causes of {a.subject}", "impact": f"the impact of {a.subject}"}.get(
        a.kind, a.subject)
    if a.kind == "impact" and a.on:
        what += f" on {a.on}"
    return f"Research {what}. Answer each sub-question from quoted sources."
