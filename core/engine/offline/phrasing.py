"""The words of the offline planner's sub-questions and briefs, in English, Chinese, Japanese
and Korean: templates only, filled by core.engine.offline.planning from a topic's parts.

English templates take agreement slots ({does}, {is}, {it}) so a plural subject reads "How do
databases use indexes", never "How does databases ...". Chinese, Japanese and Korean need no
agreement; their templates avoid particles that depend on the word before them (Korean 은/는).
Query words per dimension are in the language of the topic (what the sources are written
in), questions in the language of the plan. Any other language falls back to English.
"""

from __future__ import annotations

import re
from typing import Sequence

PHRASED = ("en", "zh", "ja", "ko")


def lang_of(code: str) -> str:
    """The template language for a plan language: itself when phrased here, else English."""
    primary = re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]
    return primary if primary in PHRASED else "en"


def join(items: Sequence[str], language: str) -> str:
    """"A, B and C" in the language's own list style."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    last = {"en": " and ", "zh": "和", "ja": "と", "ko": " 및 "}[language]
    sep = {"en": ", ", "zh": "、", "ja": "、", "ko": ", "}[language]
    return sep.join(items[:-1]) + last + items[-1]


# -- comparisons: one axis per sub-question, every option on each (ARCHITECTURE.md, "Evidence") -------------

COMPARE = {"en": "How do {targets} differ in {dim}{ctx}?",
           "zh": "{scope}{targets}的{dim}有什么区别？",
           "ja": "{scope}{targets}の{dim}の違いは何ですか？",
           "ko": "{scope}{targets}의 {dim} 측면에서 어떤 차이가 있나요?"}
DIMENSIONS = {
    "en": ("purpose and design", "performance and scalability",
           "safety, correctness and limitations", "their APIs and typical usage",
           "error handling", "compatibility and interoperability"),
    "zh": ("设计目标和原理", "性能和可扩展性", "安全性、正确性和局限性", "API和典型用法", "错误处理",
           "兼容性和互操作性"),
    "ja": ("設計と目的", "性能とスケーラビリティ", "安全性と制限", "APIと典型的な使い方", "エラー処理",
           "互換性と相互運用性"),
    "ko": ("설계와 목적", "성능과 확장성", "안전성과 한계", "API와 일반적인 사용법", "오류 처리",
           "호환성과 상호 운용성"),
}
# Words a page about that axis uses, one per option in turn (in the topic's language).
DIMENSION_QUERIES = {
    "en": (("purpose design", "model"), ("performance", "blocking overhead"),
           ("limitation safe", "restriction"), ("usage example", "create"),
           ("exception error", "raise"), ("compatible", "support")),
    "zh": (("设计", "原理"), ("性能", "开销"), ("限制", "安全"), ("用法", "示例"), ("错误", "异常"),
           ("兼容", "支持")),
    "ja": (("設計",), ("性能",), ("制限",), ("使い方",), ("エラー",), ("互換性",)),
    "ko": (("설계",), ("성능",), ("한계",), ("사용법",), ("오류",), ("호환성",)),
}
# The topic's own action, asked of every option: "How do SQLite and PostgreSQL differ in how
# they handle concurrent writes?"
MECHANISM = {"en": "How do {targets} differ in how they {vp}{ctx}?",
             "zh": "{scope}{targets}分别是如何{vp}的？",
             "ja": "{scope}{targets}は「{vp}」においてどう違いますか？",
             "ko": "{scope}{targets}의 {vp} 방식은 어떻게 다른가요?"}
# The topic's own aspect when it names no action ("在并发写入上有什么区别").
ASPECT = {"en": "How do {targets} differ in their handling of {aspect}{ctx}?",
          "zh": "{targets}在{aspect}方面的主要区别是什么？",
          "ja": "{targets}の{aspect}に関する主な違いは何ですか？",
          "ko": "{targets}의 {aspect} 측면에서 주요 차이는 무엇인가요?"}
CHOOSE = {"en": "When should each of {targets} be chosen{ctx}?",
          "zh": "{scope}分别在什么情况下应该选择{targets}？",
          "ja": "{scope}{targets}はそれぞれどのような場合に選ぶべきですか？",
          "ko": "{scope}{targets} 각각은 어떤 경우에 선택해야 하나요?"}
CHOOSE_QUERIES = {"en": ("recommended use", "suitable"), "zh": ("适用场景", "选择"),
                  "ja": ("用途", "選択"), "ko": ("용도", "선택")}
# What comes before a CJK comparison question: its context, owner or aspect.
SCOPE = {"zh": {"context": "对于{}，", "owner": "在{}中，", "aspect": "在{}方面，"},
         "ja": {"context": "{}において、", "owner": "{}の", "aspect": "{}について、"},
         "ko": {"context": "{}에서 ", "owner": "{}의 ", "aspect": "{} 측면에서 "}}
COMPARE_BRIEF = {
    "en": "Compare {targets}{ctx} along dimensions of difference, quoting the sources for each "
          "claim.",
    "zh": "{scope}逐个维度比较{targets}的区别，每个结论都引用来源原文。",
    "ja": "{scope}{targets}の違いを観点ごとに比較し、各主張に出典の原文を引用してください。",
    "ko": "{scope}{targets}의 차이를 관점별로 비교하고, 각 주장마다 출처 원문을 인용하세요.",
}

# -- one subject: what it is, how it works, how it is used, where it fails --------------------

# (question, query suffixes); "{kp}" is the subject's key words. English slots agree in number.
DESCRIBE = {
    "en": (("What {is} {subject} and what {is} {it} for?", ("", "overview")),
           ("How {does} {subject} {work}?", ("how it works",)),
           ("How {is} {subject} used in practice?", ("usage example",)),
           ("What are the limitations and pitfalls of {subject}?", ("limitation", "error")),
           ("How {does} {subject} relate to alternatives?", ("alternative",)),
           ("What details or options of {subject} matter most?", ("option parameter",))),
    "zh": (("{subject}是什么，主要用途是什么？", ("", "简介")),
           ("{subject}是如何工作的？", ("原理",)),
           ("{subject}在实践中如何使用？", ("用法", "示例")),
           ("{subject}有哪些局限和常见陷阱？", ("局限", "问题")),
           ("{subject}与其他方案相比有何异同？", ("替代方案",)),
           ("{subject}有哪些最重要的细节或选项？", ("选项", "参数"))),
    "ja": (("{subject}とは何で、何に使われますか？", ("", "概要")),
           ("{subject}はどのように動作しますか？", ("仕組み",)),
           ("{subject}は実際にどのように使われますか？", ("使い方", "例")),
           ("{subject}の制限と注意点は何ですか？", ("制限",)),
           ("{subject}は他の選択肢と比べてどう違いますか？", ("代替",)),
           ("{subject}で最も重要な詳細や設定は何ですか？", ("設定",))),
    "ko": (("{subject}의 정의와 용도는 무엇인가요?", ("", "개요")),
           ("{subject}의 작동 방식은 어떻게 되나요?", ("작동 방식",)),
           ("{subject}의 실제 사용 방법은 무엇인가요?", ("사용법", "예제")),
           ("{subject}의 한계와 주의할 점은 무엇인가요?", ("한계",)),
           ("{subject}의 대안과 비교하면 어떤 차이가 있나요?", ("대안",)),
           ("{subject}에서 가장 중요한 세부 사항이나 옵션은 무엇인가요?", ("옵션",))),
}
# A subject doing something: "How does asyncio cancel a task?" ({vp} "cancel a task", {vp3}
# "cancels a task" or, plural, "use indexes"); "{kp}" is subject and action key words.
ACTION = {
    "en": (("What steps {does} {subject} go through to {vp}?", ("",)),
           ("Which functions, settings or options of {subject} are involved when {it} {vp3}?",
            ("option",)),
           ("What can go wrong when {subject} {vp3}, and how is it avoided?",
            ("error", "limitation")),
           ("What does a minimal example that uses {subject} to {vp} look like?", ("example",)),
           ("What {is} {subject} and what {is} {it} for?", ("overview",)),
           ("How do alternatives to {subject} {vp}?", ("alternative",))),
    "zh": (("{subject}{vp}的具体步骤是什么？", ("",)),
           ("{subject}提供了哪些函数或选项来{vp}？", ("参数",)),
           ("用{subject}{vp}时可能出现哪些问题，如何避免？", ("问题", "错误")),
           ("用{subject}{vp}的最小示例是什么样的？", ("示例",)),
           ("{subject}是什么，主要用途是什么？", ("简介",)),
           ("其他方案是如何{vp}的，与{subject}有何不同？", ("替代方案",))),
}
# No subject: "How do I cancel an asyncio task?" -> about the task itself.
HOWTO = {
    "en": (("What are the steps to {vp}?", ("",)),
           ("Which tools, functions or options are used to {vp}?", ("option",)),
           ("What can go wrong when trying to {vp}?", ("error", "limitation")),
           ("What does a minimal example that shows how to {vp} look like?", ("example",)),
           ("What are the alternative ways to {vp}?", ("alternative",)),
           ("Which details matter most when trying to {vp}?", ("parameter",))),
    "zh": (("{vp}的具体步骤是什么？", ("",)),
           ("{vp}需要用到哪些工具、函数或选项？", ("参数",)),
           ("{vp}时可能出现哪些问题？", ("问题", "错误")),
           ("{vp}的最小示例是什么样的？", ("示例",)),
           ("{vp}有哪些替代做法？", ("替代方案",)),
           ("{vp}时哪些细节最重要？", ("选项",))),
}
# "Why is Python slow?" and "How is the GIL implemented?": a state or a passive, then the rest
# of DESCRIBE.
STATE = {"en": (("What makes {subject} {aspect}?", ("",)),
                ("When does it matter in practice that {subject} {is} {aspect}?", ("impact",)))}
PASSIVE = {"en": (("How {is} {subject} {passive}, step by step?", ("",)),)}
DESCRIBE_BRIEF = {"en": "Research {what}. Answer each sub-question from quoted sources.",
                  "zh": "研究{what}。每个子问题都用引用的来源原文作答。",
                  "ja": "{what}について調べ、各小問に出典の原文を引用して答えてください。",
                  "ko": "{what}에 대해 조사하고, 각 하위 질문에 출처 원문을 인용해 답하세요."}

# -- a choice without named options: "What is the best way to parse arguments?" ---------------

RECOMMEND = {
    "en": (("What options exist {purpose}?", ("", "alternative")),
           ("What criteria matter when choosing a tool {purpose}?", ("performance",)),
           ("What are the trade-offs between the options {purpose}?", ("limitation",)),
           ("When is each option the right choice {purpose}?", ("usage",)),
           ("Which pitfalls should be avoided when choosing a tool {purpose}?", ("error",)),
           ("What does a minimal working example {purpose} look like?", ("example",))),
    "zh": (("{purpose}有哪些可选方案？", ("", "方案")),
           ("为{purpose}选择方案时，哪些标准最重要？", ("性能",)),
           ("{purpose}的各种方案之间有哪些权衡？", ("局限",)),
           ("在什么情况下，每种方案是{purpose}的最佳选择？", ("适用场景",)),
           ("为{purpose}选择方案时应避免哪些陷阱？", ("问题",)),
           ("{purpose}的最小可行示例是什么样的？", ("示例",))),
    "ja": (("{purpose}にはどのような選択肢がありますか？", ("",)),
           ("{purpose}の選択で重要な基準は何ですか？", ("性能",)),
           ("{purpose}の各選択肢のトレードオフは何ですか？", ("制限",)),
           ("{purpose}ではどのような場合にどの選択肢を選ぶべきですか？", ("用途",)),
           ("{purpose}で避けるべき落とし穴は何ですか？", ("エラー",)),
           ("{purpose}の最小限の例はどのようなものですか？", ("例",))),
    "ko": (("{purpose}에 사용할 수 있는 선택지는 무엇인가요?", ("",)),
           ("{purpose}에 대한 선택 기준은 무엇인가요?", ("성능",)),
           ("{purpose}에 대한 각 선택지의 장단점은 무엇인가요?", ("한계",)),
           ("{purpose}에서 어떤 경우에 어떤 선택지가 적합한가요?", ("용도",)),
           ("{purpose}에서 피해야 할 함정은 무엇인가요?", ("오류",)),
           ("{purpose}의 최소 예제는 어떤 모습인가요?", ("예제",))),
}
# One option named: "Should I use asyncio for web scraping?"
GOOD_CHOICE = {"en": "{Is} {subject} a good choice {purpose}, and why?",
               "zh": "{subject}是{purpose}的好选择吗？为什么？",
               "ja": "{subject}は{purpose}に適した選択ですか？その理由は何ですか？",
               "ko": "{subject}는 {purpose}에 적합한 선택인가요? 그 이유는 무엇인가요?"}
RECOMMEND_BRIEF = {"en": "Recommend an approach {purpose}. Answer each sub-question from quoted "
                         "sources.",
                   "zh": "为{purpose}推荐合适的方案。每个子问题都用引用的来源原文作答。",
                   "ja": "{purpose}に適した方法を推奨し、各小問に出典の原文を引用して答えてください。",
                   "ko": "{purpose}에 적합한 방법을 추천하고, 각 하위 질문에 출처 원문을 인용해 "
                         "답하세요."}


def agreement(plural: bool) -> dict[str, str]:
    """The English words that follow a subject's number."""
    return ({"does": "do", "is": "are", "Is": "Are", "it": "they"} if plural
            else {"does": "does", "is": "is", "Is": "Is", "it": "it"})


def third_person(verb: str) -> str:
    """"cancel" -> "cancels", "handle" -> "handles", "do" -> "does", "apply" -> "applies"."""
    irregular = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if verb in irregular:
        return irregular[verb]
    if re.search(r"(?:s|x|z|ch|sh)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def dimension_label(question: str) -> str:
    """The axis a comparison sub-question asks about, for a table row: "performance and
    scalability" from "How do A and B differ in performance and scalability?", "性能和可扩展性"
    from "A和B的性能和可扩展性有什么区别？"; the question itself when it names no axis."""
    for pattern in (r" differ in (.+?)\?$", r"的([^的，]+?)有什么区别？$",
                    r"の([^の、]+?)の違いは何ですか？$", r"의 (.+?) 측면에서 어떤 차이가 있나요\?$"):
        m = re.search(pattern, question)
        if m:
            return m.group(1)
    return question.rstrip("?？")
