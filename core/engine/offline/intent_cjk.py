"""What a Chinese, Japanese or Korean topic asks: intent, options, subject, aspect.

    parse_cjk("Python的asyncio和threading有什么区别？", "zh")
      -> TopicParts(intent="compare", targets=("asyncio", "threading"), owner="Python")
    parse_cjk("SQLite 和 PostgreSQL 在并发写入上有什么区别？", "zh")
      -> TopicParts(intent="compare", targets=("SQLite", "PostgreSQL"), aspect="并发写入")
    parse_cjk("asyncio如何取消任务？", "zh")
      -> TopicParts(intent="describe", subject="asyncio", verb="取消任务")

These languages write no spaces between words, so the options are found around the words
that join them (和, 与, 跟, 还是, 或; と, や; 와, 과, 및) next to the words that ask for a
comparison (区别, 相比, 对比; 違い, 比較; 차이, 비교). For Chinese `verb` holds a whole verb
phrase ("处理并发写入") and `aspect` a noun phrase a comparison is judged on ("并发写入").
Japanese and Korean are read more coarsely: options and a subject, no verb.
"""

from __future__ import annotations

import re
from dataclasses import replace

from core.engine.offline.parts import TopicParts
from core.models import Intent

_ZH_JOIN = r"\s*(?:以及|和|与|跟|及|还是|或者|或是|或|对比|、|,|，|\bvs\.?\b|\bVS\b|\bversus\b)\s*"
_ZH_COMPARE = re.compile(r"有什么区别|有何区别|有哪些区别|的区别|区别是什么|区别在哪|区别|"
                         r"有什么不同|有何不同|有哪些不同|的不同|不同之处|不同|的差异|差异|"
                         r"异同|优缺点|优劣|孰优孰劣|哪个更|哪一个更|谁更")
_ZH_RECOMMEND = re.compile(r"应该|应当|该用|该选|选哪|用哪|选择哪|推荐|建议用|更适合|更合适|"
                           r"哪个好|哪个更好|值得")
_ZH_LEAD = re.compile(r"^(?:请问|请|我想知道|想问一下|能否|可以)?\s*(?:简要)?(?:说明|解释|介绍|讲讲|"
                      r"谈谈|描述)?(?:一下)?\s*")
_ZH_HOW = re.compile(r"(?:是)?(?:如何|怎么|怎样|怎麼|如何去)")
# Verbs of working together: "X和Y如何协作" asks how they combine, not which is better.
_ZH_TOGETHER = re.compile(r"工作|运作|运行的|协作|配合|交互|结合|一起|共同|协同|关系")
_ZH_WORKS = re.compile(r"^(?:工作|运作|运行|实现|起作用)的?$|^(?:工作|运作)原理")
_ZH_CRITERIA = {"快": "速度", "慢": "速度", "安全": "安全性", "稳定": "稳定性", "简单": "易用性",
                "容易": "易用性", "便宜": "成本", "省内存": "内存占用", "可靠": "可靠性"}
# "Python的asyncio", "Python 中的 asyncio", "Pythonのasyncio": what the options belong to.
_OWNER = re.compile(r"^(?P<owner>[^的の中里]+?)\s*(?:中的|里的|里|中|的|の)\s*(?P<rest>.+)$")


def _clean(phrase: str) -> str:
    return " ".join(phrase.strip(" ，,。、：:；;的の").split())


def _options(text: str, join: str) -> tuple[tuple[str, ...], str]:
    """The options joined in `text`, and what they belong to ("Python的asyncio和threading" ->
    (("asyncio", "threading"), "Python"))."""
    items = [_clean(i) for i in re.split(join, text) if _clean(i)]
    owner = ""
    if len(items) > 1:
        first = _OWNER.match(items[0])
        if first and first["rest"].strip() and not any(_OWNER.match(i) for i in items[1:]):
            owner, items[0] = _clean(first["owner"]), _clean(first["rest"])
    items = [i for i in items if any(ch.isalnum() for ch in i)]
    return tuple(dict.fromkeys(items)), owner


def phrases(subject: str) -> tuple[str, ...]:
    """The phrases a CJK subject joins, without what they belong to: "Python的垃圾回收和引用计数"
    -> ("垃圾回收", "引用计数"); "SQLite 的 WAL 模式" -> ("WAL 模式",)."""
    items, _ = _options(subject, _ZH_JOIN + "|" + _JA_JOIN)
    if len(items) == 1:
        single = _OWNER.match(items[0])
        return (_clean(single["rest"]),) if single and single["rest"].strip() else items
    return items


def _compare(targets: tuple[str, ...], owner: str, language: str, *, intent: Intent = "compare",
             aspect: str = "", verb: str = "", context: str = "", criterion: str = ""
             ) -> TopicParts:
    return TopicParts(intent=intent, targets=targets, subject="、".join(targets), plural=True,
                      verb=verb, aspect=aspect, context=context, criterion=criterion,
                      owner=owner, language=language)


def parse_cjk(text: str, language: str) -> TopicParts:
    """The parts of a Chinese (`language` "zh"), Japanese ("ja") or Korean ("ko") topic."""
    text = text.strip(" ？?。！!.")
    if language == "ja":
        return _parse_ja(text)
    if language == "ko":
        return _parse_ko(text)
    return _parse_zh(_ZH_LEAD.sub("", text, count=1) or text)


def _zh_aspect(head: str) -> tuple[str, str]:
    """"SQLite 和 PostgreSQL 在并发写入上" -> ("SQLite 和 PostgreSQL", "并发写入")."""
    m = re.search(r"\s*(?:在|对于|就|关于)\s*(?P<asp>[^在]+?)\s*(?:方面|上面|上|中|时|下|场景下|"
                  r"的表现)?$", head)
    if m and m.start() > 0:
        return head[:m.start()], _clean(m["asp"])
    return head, ""


def _parse_zh(t: str) -> TopicParts:
    lang = "zh"
    # "对于小型 Web 应用，" / "做数据分析时，": a context ahead of the question.
    context = ""
    m = re.match(r"^(?:对于|针对|在)?(?P<ctx>[^，,]+?)(?:时|场景下|的场景|来说)?[，,]\s*(?P<rest>.+)$", t)
    if m and re.search(_ZH_JOIN, m["rest"]) and not re.search(_ZH_JOIN, m["ctx"]):
        context, t = _clean(m["ctx"]), m["rest"]
    # "比较 X 和 Y（在 Z 方面）"
    m = re.match(r"^(?:比较|对比)(?:一下)?\s*(?P<rest>.+)$", t)
    if m:
        head = re.split(r"的(?:区别|差异|不同|异同|优缺点|优劣)|哪个|，|,", m["rest"])[0]
        head, aspect = _zh_aspect(head)
        targets, owner = _options(head, _ZH_JOIN)
        if len(targets) > 1:
            return _compare(targets, owner, lang, aspect=aspect, context=context)
    # "（应该）用/选择 X 还是 Y"; "小型 Web 应用应该选择 SQLite 还是 PostgreSQL"
    choice = _zh_choice(t)
    if choice:
        targets, owner, pre = choice
        return _compare(targets, owner, lang, intent="recommend", context=pre or context)
    # "X 与 Y 相比，哪个更适合 Z"; "X 还是 Y 更快"
    m = re.match(r"^(?P<head>.+?)(?:相比|相比较|比起来|对比)(?:之下|而言)?[，,]?\s*(?P<tail>.*)$", t) \
        or re.match(r"^(?P<head>[^，,]+?还是[^，,]+?)(?P<tail>更.*|哪个.*|好)$", t)
    if m:
        targets, owner = _options(re.sub(r"^(?:把|将)", "", m["head"]), _ZH_JOIN)
        if len(targets) > 1:
            return _zh_tail(targets, owner, m["tail"], context)
    # "X 和 Y（在 Z 上）有什么区别"
    m = _ZH_COMPARE.search(t)
    if m:
        head, aspect = _zh_aspect(t[:m.start()])
        targets, owner = _options(head, _ZH_JOIN)
        if len(targets) > 1:
            parts = _zh_tail(targets, owner, t[m.start():], context)
            return replace(parts, aspect=aspect) if aspect else parts
    # "X 如何 VP": describe X, or compare when X names several options ("SQLite 和
    # PostgreSQL 如何处理并发写入"), unless they work together ("垃圾回收和引用计数是如何工作的").
    m = re.match(rf"^(?P<subj>.+?)\s*{_ZH_HOW.pattern}\s*(?P<vp>.+?)的?$", t)
    if m:
        subject, vp = _clean(m["subj"]), _clean(m["vp"])
        targets, owner = _options(subject, _ZH_JOIN)
        works = bool(_ZH_WORKS.match(vp))
        if len(targets) > 1 and not _ZH_TOGETHER.search(vp):
            return _compare(targets, owner, lang, verb=vp, context=context)
        return TopicParts(subject=subject, plural=len(targets) > 1,
                          verb="" if works else vp, context=context, language=lang)
    # "什么是 X", "X 是什么", "X 的工作原理", "为什么 X"
    subject = re.sub(r"^(?:什么是|何为|为什么|为何)|(?:是什么|是啥|的工作原理|的原理|的用法|"
                     r"的作用|有什么用|是干什么的|简介|介绍)$", "", t)
    if _ZH_RECOMMEND.search(t):
        purpose = _clean(re.split(r"应该|应当|该用|该选|推荐|选哪|用哪|选择哪|哪个", t)[0])
        return TopicParts(intent="recommend", subject=purpose or _clean(subject),
                          purpose=purpose or _clean(subject), language=lang)
    return TopicParts(subject=_clean(subject) or t, context=context, language=lang)


_ZH_CHOOSE = re.compile(r"(?:(?:应该|应当|该|要|可以|我|我们|是)\s*(?:选择|选用|使用|采用|选|用)|"
                        r"^(?:选择|选用|使用|采用|选|用))\s*")


def _zh_choice(t: str) -> tuple[tuple[str, ...], str, str] | None:
    """"小型 Web 应用应该选择 SQLite 还是 PostgreSQL" -> the options, their owner and what
    they are chosen for; None when the topic does not choose with a verb ("X 还是 Y 更快")."""
    clause = re.split(r"[，,]", t)
    at = next((i for i, c in enumerate(clause) if "还是" in c), None)
    if at is None:
        return None
    left, _, right = clause[at].partition("还是")
    verbs = list(_ZH_CHOOSE.finditer(left))
    if not verbs:
        return None
    pre = _clean(left[:verbs[-1].start()]) or _clean("，".join(clause[:at]))
    right = re.sub(r"(?:好|呢|吗|比较好|更好|更合适)+$", "", right)
    targets, owner = _options(left[verbs[-1].end():] + "还是" + right, _ZH_JOIN)
    return (targets, owner, re.sub(r"^(?:对于|做|在)|(?:时|来说)$", "", pre)) \
        if len(targets) > 1 else None


def _zh_tail(targets: tuple[str, ...], owner: str, tail: str, context: str) -> TopicParts:
    """What follows the options: "哪个更适合 Web 应用" (recommend, for a purpose), "哪个更快"
    (compare, on speed) or "有什么区别" (compare)."""
    fit = re.search(r"(?:更|比较)?(?:适合|合适)(?:于|用于|用来|做)?\s*(?P<p>.*)$", tail)
    if fit or _ZH_RECOMMEND.search(tail):
        return _compare(targets, owner, "zh", intent="recommend",
                        context=_clean(fit["p"]) if fit and _clean(fit["p"]) else context)
    better = re.search(r"更(?P<c>[^，,的]+)", tail)
    criterion = ""
    if better:
        word = better["c"].rstrip("呢吗")
        criterion = next((v for k, v in _ZH_CRITERIA.items() if word.startswith(k)), word)
    return _compare(targets, owner, "zh", criterion=criterion, context=context)


# -- Japanese and Korean: options and a subject ------------------------------------------------

_JA_JOIN = r"\s*(?:と|や|および|または|か|対|\bvs\.?\b|、)\s*"
_JA_COMPARE = re.compile(r"の?違い|を?比較|と比べ|どちら|どっち|の差")
_JA_RECOMMEND = re.compile(r"べき|おすすめ|お勧め|選ぶ|選び")
_JA_TAIL = re.compile(r"(?:とは)?(?:何|なん)ですか$|とは$|について(?:教えて(?:ください)?)?$|"
                      r"(?:は|が)?どのように(?:動作|機能|動)[^は]*$|の仕組み(?:は)?$|の使い方$|"
                      r"を?説明(?:して)?(?:ください)?$")


_KO_JOIN = r"(?:와|과|하고|랑|이랑)\s+|\s*(?:및|또는|혹은|대|\bvs\.?\b|,)\s*"
_KO_COMPARE = re.compile(r"의?\s*차이|비교|다른가|다릅니까|어느\s*것|어떤\s*것이\s*더")
_KO_RECOMMEND = re.compile(r"선택|추천|써야|사용해야|골라야")
_KO_TAIL = re.compile(r"(?:이란|란)?\s*무엇인가요$|(?:은|는|이|가)?\s*어떻게\s*(?:작동|동작|동)[^?]*$|"
                      r"에\s*대해\s*(?:설명해\s*주세요|알려\s*주세요)?$|(?:이란|란)?\s*뭔가요$")


def _parse_options_or_subject(t: str, language: str, compare: re.Pattern[str], join: str,
                              recommend: re.Pattern[str], tail: re.Pattern[str],
                              particles: str) -> TopicParts:
    """Japanese and Korean alike: options around the comparison word, else the subject with
    the question's tail and its particle cut off."""
    m = compare.search(t)
    if m:
        head = re.sub(f"(?:{particles})$", "", t[:m.start()].strip())
        targets, owner = _options(head, join)
        if len(targets) > 1:
            intent: Intent = "recommend" if recommend.search(t) else "compare"
            return _compare(targets, owner, language, intent=intent)
    subject = _clean(re.sub(f"(?:{particles})$", "", tail.sub("", t).strip()))
    intent = "recommend" if recommend.search(t) else "describe"
    return TopicParts(intent=intent, subject=subject or t, purpose=subject or t,
                      language=language)


def _parse_ja(t: str) -> TopicParts:
    return _parse_options_or_subject(t, "ja", _JA_COMPARE, _JA_JOIN, _JA_RECOMMEND, _JA_TAIL,
                                     "の|は|を|で|が")


def _parse_ko(t: str) -> TopicParts:
    return _parse_options_or_subject(t, "ko", _KO_COMPARE, _KO_JOIN, _KO_RECOMMEND, _KO_TAIL,
                                     "의|은|는|를|을|이|가")

