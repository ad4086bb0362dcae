"""The offline planner on any topic: kinds of question (cause, history, practice, yes/no ...),
noun phrases, odd shapes; every sub-question a grammatical question, never the topic pasted
into a template (issue 11)."""

from __future__ import annotations

import re

import pytest

from tests.core.test_planning import HAN, _plan

# -- any topic: kinds of questions, noun phrases, odd shapes (issue 11) ------------------------

ANY_TOPICS = [
    # wh-questions of every kind
    "What causes inflation?", "What caused the 2008 financial crisis?", "Why is the sky blue?",
    "Why do cats purr?", "Why did the Roman Empire fall?", "Why does ice float on water?",
    "When was the transistor invented?", "When did the Roman Empire fall?",
    "Who invented the World Wide Web?", "Who was Ada Lovelace?", "Where do hurricanes form?",
    "Where is the Eiffel Tower located?", "Which factors affect battery life in smartphones?",
    "What factors influence house prices?", "How many people live in Tokyo?",
    "How much memory does Chrome use?", "What happens when you type a URL into a browser?",
    "What makes a good API design?", "What are microservices?", "What is inflation?",
    "Why does inflation happen?", "What leads to burnout at work?",
    # yes/no questions
    "Is coffee bad for your health?", "Can Rust replace C++?", "Does exercise improve memory?",
    "Are electric cars better for the environment?", "Is the sky blue", "Should we fear AI?",
    # imperatives and noun phrases
    "The history of the printing press", "History of the internet",
    "Best practices for securing a Kubernetes cluster", "Kubernetes security best practices",
    "Tips for writing clean code", "Explain the CAP theorem", "Overview of quantum computing",
    "Impact of social media on teenagers", "Effects of caffeine", "Causes of the French Revolution",
    "climate change in the arctic", "Kubernetes", "inflation", "How does inflation work?",
    "How did the printing press originate?", "How does social media affect teenagers?",
    # odd ones: long, quoted, parenthesised, lowercase, no question mark
    "what causes inflation", "why is python slow", "How do volcanoes form magma chambers?",
    "What are the benefits of meditation?", "How old is the universe?",
    "Does Python have tail call optimization?", "Is it safe to eat raw eggs?",
    "What was the Great Depression?", "Explain why the sky is blue", "Rust 的优缺点是什么？",
    "The \"Great Stink\" of 1858 (London) and its effect on sewer design",
    "What is the role of mitochondria (the powerhouse of the cell) in aging",
    "A very long topic about how distributed consensus algorithms such as Raft and Paxos "
    "tolerate network partitions in practice",
    # Chinese
    "如何优化 Python 程序的内存使用？", "为什么天空是蓝色的？", "什么是区块链？", "量子计算的历史",
    "微服务架构的最佳实践", "Docker 容器有哪些安全风险？", "社交媒体对青少年的影响", "通货膨胀的原因是什么？",
    "怎样提高睡眠质量", "区块链是什么", "天空为什么是蓝色的", "介绍一下机器学习", "Kubernetes 有哪些优点？",
]
_QUESTION_WORD = re.compile(r"^(?:[A-Z]|What|How|Why|When|Where|Who|Which|Is|Are|Can|Does|Do|"
                            r"Did|Under|In|Through)")
_ASKS = re.compile(r"^(?:what|why|when|where|who|which|how|is|are|can|does|do|did|should)\b|"
                   r"如何|怎么|怎样|为什么|为何|什么是|是什么|哪些", re.I)


def test_there_are_about_sixty_varied_topics() -> None:
    assert len(ANY_TOPICS) >= 60 and len(set(ANY_TOPICS)) == len(ANY_TOPICS)


@pytest.mark.parametrize("topic", ANY_TOPICS)
def test_any_topic_gets_grammatical_subquestions_not_the_topic_pasted(topic: str) -> None:
    plan = _plan(topic)
    assert len(plan.subquestions) == 6
    body = " ".join(topic.split()).rstrip("?？.!").strip()
    han = bool(HAN.search(topic))
    for i, sq in enumerate(plan.subquestions):
        q = sq.question
        assert q.endswith("？" if han else "?") and q.count("?") + q.count("？") == 1, q
        if not han:
            assert _QUESTION_WORD.match(q), q
            assert not re.search(r"\b(\w+) \1\b", q, re.I), q  # "the the", "is is"
            assert not re.search(r"\b(?:What|How|Why|Which|Who|When|Where) (?:is |are |does |do )?"
                                 r"(?:What|How|Why|Which|Who|When|Where|The|A|An)\b", q), q
            assert "  " not in q and " ?" not in q
        else:  # the topic's question words are cut off, not kept inside a new question
            assert not re.search(r"(是什么|如何|为什么|有哪些).*\1", q), q
            assert not re.search(r"(?:如何|怎么|怎样|为什么|为何|什么是|有哪些|有什么).*(?:是什么|有哪些)",
                                 q.replace("主要有哪些", "")), q
        if _ASKS.search(body) and i > 0:  # only the first may be the topic's own question
            assert body.lower() not in q.lower(), q
        assert sq.focus and all(f.strip() for f in sq.focus), (q, sq.focus)
        assert sq.queries and all(w.strip() and len(w.split()) <= 6 for w in sq.queries), sq.queries
        assert not any(re.match(r"(?:what|how|why|when|where|who|which)\b", w) for w in sq.queries)
    assert len({sq.question for sq in plan.subquestions}) == 6
    assert plan == _plan(topic)  # deterministic


@pytest.mark.parametrize("topic, first, second, focus", [
    ("What causes inflation?", "What causes inflation?", "What are the main causes of inflation?",
     ("inflation",)),
    ("The history of the printing press", "How did the printing press originate?",
     "How did the printing press change over time?", ("printing press",)),
    ("Why is the sky blue?", "Why is the sky blue?", "What makes the sky blue?", ("sky",)),
    ("Best practices for securing a Kubernetes cluster",
     "What are the recommended practices for securing a Kubernetes cluster?",
     "Which common mistakes should be avoided when securing a Kubernetes cluster?",
     ("Kubernetes cluster",)),
    ("Where do hurricanes form?", "Where do hurricanes form?",
     "Under what conditions do hurricanes form?", ("hurricanes",)),
    ("Is coffee bad for your health?", "Is coffee bad for your health?",
     "What evidence supports the view that coffee is bad for your health?", ("coffee",)),
    ("Why did the Roman Empire fall?", "Why did the Roman Empire fall?",
     "What led the Roman Empire to fall?", ("Roman Empire",)),
    ("How do volcanoes form magma chambers?", "How do volcanoes form magma chambers?",
     "What steps or stages are involved when volcanoes form magma chambers?", ("volcanoes",)),
    ("Does Python have tail call optimization?", "Does Python have tail call optimization?",
     "What evidence supports the view that Python has tail call optimization?", ("Python",)),
    ("How old is the universe?", "How old is the universe?",
     "How is the age of the universe measured or estimated?", ("universe",)),
    ("Impact of social media on teenagers", "What effects does social media have on teenagers?",
     "Through which mechanisms do the effects of social media on teenagers arise?",
     ("social media",)),
])
def test_measured_topics_get_questions_of_their_kind(topic: str, first: str, second: str,
                                                      focus: tuple[str, ...]) -> None:
    """Measured before: "What is What causes inflation and what is it for?", "How does The
    history of the printing press work?", "What are the limitations and pitfalls of the sky?",
    and no focus at all for the Kubernetes best practices."""
    plan = _plan(topic, n=4)
    assert [sq.question for sq in plan.subquestions][:2] == [first, second]
    assert all(sq.focus == focus for sq in plan.subquestions)
    text = " ".join(sq.question for sq in plan.subquestions)
    assert "what is it for" not in text and "used in practice" not in text


def test_measured_cause_and_history_topics_ask_their_own_aspects() -> None:
    cause = [sq.question for sq in _plan("What causes inflation?", n=4).subquestions]
    assert cause[2:] == ["How do these causes lead to inflation?",
                         "Which factors make inflation better or worse?"]
    history = [sq.question for sq in _plan("The history of the printing press", n=4).subquestions]
    assert history[2:] == ["What were the key milestones in the history of the printing press?",
                           "What impact did the printing press have?"]
    assert _plan("What causes inflation?").subquestions[1].queries == ("inflation causes",)
    concept = [sq.question for sq in _plan("What is inflation?", n=2).subquestions]
    assert concept == ["What is inflation?",
                       "What do the sources say are the key facts about inflation?"]


def test_measured_chinese_howto_drops_its_question_word() -> None:
    plan = _plan("如何优化 Python 程序的内存使用？", n=4)
    assert [sq.question for sq in plan.subquestions] == [
        "Python 程序的内存使用主要受哪些因素影响？", "有哪些方法可以优化 Python 程序的内存使用？",
        "优化 Python 程序的内存使用时有哪些常见陷阱？", "如何衡量Python 程序的内存使用？"]
    assert plan.subquestions[0].focus == ("内存使用",)
    why = _plan("为什么天空是蓝色的？", n=2)
    assert why.subquestions[0].question == "天空是蓝色的主要原因是什么？"
    assert why.subquestions[0].focus == ("天空",)
    history = _plan("量子计算的历史", n=2)
    assert history.subquestions[0].question == "量子计算是如何起源的？"
    risks = _plan("Docker 容器有哪些安全风险？", n=2)
    assert [sq.question for sq in risks.subquestions] == ["Docker 容器的安全风险主要有哪些？",
                                                          "Docker 容器的安全风险是如何产生的？"]
    assert risks.subquestions[0].focus == ("Docker 容器",)
    practice = _plan("微服务架构的最佳实践", n=1)
    assert practice.subquestions[0].question == "微服务架构有哪些推荐的做法？"


def test_tools_keep_what_they_are_for_and_concepts_do_not() -> None:
    assert _plan("What is a B-tree?", n=1).subquestions[0].question == (
        "What is a B-tree and what is it for?")
    assert _plan("Explain the CAP theorem", n=1).subquestions[0].question == (
        "What is the CAP theorem and what is it for?")
    sky = " ".join(sq.question for sq in _plan("What is the sky?").subquestions)
    assert "what is it for" not in sky and "pitfalls" not in sky
    work = [sq.question for sq in _plan("How does inflation work?", n=2).subquestions]
    assert work == ["How does inflation work?", "What is inflation?"]
