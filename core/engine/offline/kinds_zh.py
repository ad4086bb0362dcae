"""What kind of question a Chinese topic asks, when it is not a comparison or "X 如何 VP".

    read_chinese("如何优化 Python 程序的内存使用")
      -> Asked(kind="howto", subject="优化 Python 程序的内存使用",
               clause=Clause(verb="优化", rest="Python 程序的内存使用"))
    read_chinese("为什么天空是蓝色的") -> Asked(kind="reason", subject="天空是蓝色")
    read_chinese("微服务架构的最佳实践") -> Asked(kind="practice", subject="微服务架构")

The question word (如何, 为什么, 什么是, 哪些) and the facet (的历史, 的最佳实践, 的影响) are cut
off, so no sub-question embeds the whole topic with its question word. Topics with a subject
before 如何 ("asyncio如何取消任务") and comparisons stay with core.engine.offline.intent_cjk: None.
"""

from __future__ import annotations

import re

from core.engine.offline.intent_cjk import phrases
from core.engine.offline.kinds import Asked, Clause
from core.engine.sentences import terms
from core.models import Intent

_LEAD = re.compile(r"^(?:请问|请|我想知道|想问一下)?\s*(?:简要|简单)?(?:说明|解释|介绍|讲讲|谈谈|描述)?"
                   r"(?:一下)?\s*")
_RECOMMEND = re.compile(r"应该|应当|该用|该选|选哪|用哪|选择哪|推荐|更适合|哪个好|哪个更好")
_CUT = " ，,。、：:；;的"


def _clean(phrase: str) -> str:
    return " ".join(phrase.strip(_CUT).split())


def _asked(kind: str, subject: str, *, on: str = "", clause: Clause | None = None,
           intent: Intent = "describe", focus_from: str = "") -> Asked | None:
    subject = _clean(subject)
    if not subject or not terms(subject):
        return None
    found = tuple(p for p in phrases(focus_from or subject) if terms(p)) or (subject,)
    return Asked(kind, subject, "", clause, _clean(on), found, intent)


def read_chinese(text: str) -> Asked | None:
    """The kind, subject and focus of a Chinese topic, or None (see the module docstring)."""
    t = " ".join(text.strip(" ？?。！!.").split())
    t = _LEAD.sub("", t, count=1) or t
    if _RECOMMEND.search(t):
        return None
    m = re.match(r"^(?:如何|怎么|怎样|怎麼|怎么样)(?:才能|去|来)?\s*(?P<vp>.+)$", t)
    if m:
        vp = _clean(m["vp"])
        verb = vp[:2] if re.match(r"[\u4e00-\u9fff]{2}", vp) else ""
        obj = _clean(vp[len(verb):]) or vp
        return _asked("howto", vp, clause=Clause("", verb, obj), focus_from=obj)
    m = re.match(r"^(?P<s>.*?)(?:为什么|为何|为啥)(?:会|要)?\s*(?P<c>.+?)(?:的|呢|吗)?$", t)
    if m:
        # "天空是蓝色": a sentence must name 天空, what the clause is about.
        head = m["s"] or re.split(r"(?<=..)(?:是|会|能|要|总|比|很|不|在|有|都)", m["c"],
                                  maxsplit=1)[0]
        return _asked("reason", f"{m['s']}{m['c']}", focus_from=head)
    m = re.match(r"^(?:是)?什么(?:导致|造成|引起)了?\s*(?P<np>.+)$", t) or \
        re.match(r"^(?:导致|造成)?(?P<np>.+?)的(?:主要)?(?:原因|成因)(?:是什么|有哪些)?$", t)
    if m:
        return _asked("cause", m["np"])
    m = re.match(r"^(?P<np>.+?)(?:的)?(?:历史|发展历程|发展史|起源|演变|由来)(?:是什么|是怎样的)?$", t)
    if m:
        return _asked("history", m["np"])
    m = None if re.search(r"有哪些|有什么", t) else re.match(r"^(?P<np>.+?)\s*的?\s*(?P<y>优缺点|优点|缺点|利弊|优势|劣势|风险|特点|局限性?)"
                 r"(?:是什么|有哪些|有什么)?$", t)
    if m:  # "Rust 的优缺点是什么": its facet, asked of it
        return _asked("which", m["np"], on=m["y"])
    m = re.match(r"^(?P<np>.+?)(?:的|有哪些|有什么)?(?:最佳实践|最佳做法|最佳方法)(?:有哪些|是什么)?$", t)
    if m:
        return _asked("practice", m["np"], intent="recommend")
    m = re.match(r"^(?P<np>.+?)(?:对|给)(?P<on>.+?)(?:的影响|有什么影响|有哪些影响|产生了?什么影响)"
                 r"(?:是什么|有哪些)?$", t) or \
        re.match(r"^(?P<np>.+?)(?:如何|怎样|怎么)影响(?P<on>.+)$", t)
    if m:
        return _asked("impact", m["np"], on=m["on"], focus_from=m["np"])
    m = re.match(r"^(?P<np>.+?)(?:有哪些|有什么|有哪几种|的主要|的)(?P<y>[^的]{2,8}?)(?:有哪些|是什么)?$",
                 t) if re.search(r"有哪些|有什么|有哪几种|的影响|的优点|的缺点|的风险|的特点", t) else None
    if m and not re.search(r"区别|不同|差异", t):
        y = _clean(m["y"])
        return _asked("which", m["np"], on=y) if y else _asked("open", m["np"])
    m = re.match(r"^(?:什么是|何为|何谓)\s*(?P<np>.+)$", t) or \
        re.match(r"^(?P<np>.+?)(?:是什么|是啥|是什么意思|指的是什么)$", t)
    if m and not re.search(r"如何|怎么|怎样", m["np"]):
        return _asked("open", m["np"])
    return None
