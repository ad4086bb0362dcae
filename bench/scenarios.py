"""The overflow scenarios `bench/overflow.py` replays: deterministic findings and transcripts.

Text comes from seeded word lists (English words, Chinese two-character words), so every run
sends byte-identical prompts. Sizes are set in the fake server's tokens: English at 4 bytes per
token (about what real tokenizers give, and the anchor's own "4 characters ≈ 1 token"), Chinese
at 3 bytes per token (one token per character), so the anchor's rule is right for English and
four times too generous for Chinese, as it is with real providers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from core.models import Claim, Evidence, Finding, Message, ResearchPlan, SubQuestion, ToolCall
from core.overflow.shrink import render_findings

Lang = Literal["en", "zh"]
Kind = Literal["findings", "transcript"]

WINDOW = 16_000  # tokens: small, so the 10x scenarios stay fast
MAX_OUTPUT_TOKENS = 1_024
BYTES_PER_TOKEN: dict[Lang, float] = {"en": 4.0, "zh": 3.0}

_EN = ("the model context window limits how much text a provider accepts in one request "
       "research findings carry quoted evidence from pages that were read and condensed "
       "compression keeps claims with their sources while long tool results are cut "
       "a report cites every claim with a numbered reference and a verbatim quote "
       "batch runs store sources findings citations and reports for later queries "
       "retries with backoff help transient faults but never make a prompt shorter "
       "token counts differ between tokenizers so estimates keep a safety margin").split()
_ZH = ("研究 模型 上下文 窗口 限制 请求 文本 证据 引用 来源 页面 摘要 压缩 报告 结论 "
       "问题 子问题 检索 结果 工具 调用 令牌 估算 截断 重试 错误 供应商 数据 存储 批量 "
       "调度 任务 流程 质量 可靠 输出 输入 长度 比例 预算 安全 余量 分析 比较 维度 推荐 "
       "证明 原文 数字 段落 章节 标题 链接 网页 内容 信息 方法 系统 设计").split()
_SUBJECTS = ("context windows", "token estimates", "provider errors", "report citations",
             "tool results", "batch scheduling")


def sentence(rng: random.Random, lang: Lang) -> str:
    if lang == "zh":
        return "".join(rng.choice(_ZH) for _ in range(rng.randint(8, 16))) + "。"
    words = [rng.choice(_EN) for _ in range(rng.randint(10, 20))]
    return " ".join(words).capitalize() + "."


def prose(rng: random.Random, lang: Lang, sentences: int) -> str:
    joiner = "" if lang == "zh" else " "
    return joiner.join(sentence(rng, lang) for _ in range(sentences))


def tokens_of(text: str, lang: Lang) -> int:
    """Tokens as the fake server counts them for this language (bytes / bytes-per-token)."""
    return int(-(-len(text.encode("utf-8")) // BYTES_PER_TOKEN[lang]))


def make_plan(lang: Lang, subquestions: int = 5) -> ResearchPlan:
    sqs = tuple(SubQuestion(index=i, question=f"What is known about {_SUBJECTS[i]}?")
                for i in range(subquestions))
    brief = "研究上下文溢出的恢复策略。" if lang == "zh" else "How to recover from context overflow."
    return ResearchPlan(topic="context overflow recovery", brief=brief, subquestions=sqs)


def make_findings(lang: Lang, target_tokens: int, *, subquestions: int = 5,
                  seed: int = 7) -> list[Finding]:
    """Findings whose rendering is about `target_tokens`, claims dealt round-robin.

    Each claim carries one or two quotes of a few sentences, so a finding is many claims and the
    findings are of similar size, as a real run's are.
    """
    rng = random.Random(f"{seed}-{lang}-{target_tokens}")
    plan = make_plan(lang, subquestions)
    claims: list[list[Claim]] = [[] for _ in plan.subquestions]
    n = 0
    while True:
        findings = [Finding(subquestion_index=sq.index, subquestion=sq.question,
                            claims=tuple(cs)) for sq, cs in zip(plan.subquestions, claims)]
        if n and tokens_of(render_findings(findings), lang) >= target_tokens:
            return findings
        for _ in range(subquestions):  # a batch per check keeps generation linear enough
            evidence = tuple(Evidence(url=f"https://example.org/{lang}/{n}-{k}",
                                      title=f"Source {n}-{k}",
                                      quote=prose(rng, lang, rng.randint(2, 4)))
                             for k in range(rng.randint(1, 2)))
            confidence = rng.choice(("high", "medium", "medium", "conflict"))
            claims[n % subquestions].append(Claim(text=sentence(rng, lang), evidence=evidence,
                                                  confidence=confidence))
            n += 1


COMPRESS_INSTRUCTION = ("Compress the research above into claims, each with verbatim quotes "
                        "and their URLs. Keep every source that supports a claim.")


def make_transcript(lang: Lang, *, rounds: int, oversized_round: int, oversized_tokens: int,
                    normal_tokens: int, seed: int = 11) -> list[Message]:
    """A researcher transcript: system prompt, brief, `rounds` tool rounds, then the instruction.

    Every tool result is about `normal_tokens` long except the one in `oversized_round`
    (0-based), which is `oversized_tokens`: a page that extracted into far too much text.
    """
    rng = random.Random(f"{seed}-{lang}-{rounds}-{oversized_round}-{oversized_tokens}")
    out = [Message(role="system", content="You are a researcher. Search, read, take notes."),
           Message(role="user", content=make_plan(lang).brief)]
    for r in range(rounds):
        call = ToolCall(id=f"call_{r}", name="search", arguments={"query": f"query {r}"})
        out.append(Message(role="assistant", content=f"Round {r + 1}: searching.",
                           tool_calls=(call,)))
        want = oversized_tokens if r == oversized_round else normal_tokens
        text = ""
        while tokens_of(text, lang) < want:
            text += prose(rng, lang, 20) + "\n\n"
        out.append(Message(role="tool", content=text, tool_call_id=call.id, name="search"))
    out.append(Message(role="user", content=COMPRESS_INSTRUCTION))
    return out


@dataclass(frozen=True)
class Scenario:
    """One overflow to recover from. `numbers`: does the provider's error state its counts."""

    name: str
    provider: str  # a tests.fakes.providers Provider
    kind: Kind
    lang: Lang
    size_x: float  # request size as a multiple of the window
    numbers: bool = True
    oversized_round: int = 0  # transcripts only

    @property
    def bytes_per_token(self) -> float:
        return BYTES_PER_TOKEN[self.lang]


def all_scenarios() -> list[Scenario]:
    """Findings at 1.1x, 2x, 10x in both languages for each provider, two errors without
    numbers (an OpenAI-compatible server), and transcripts with one oversized tool result."""
    out: list[Scenario] = []
    for provider in ("openai", "anthropic", "gemini"):
        for lang in ("en", "zh"):
            for size in (1.1, 2.0, 10.0):
                out.append(Scenario(f"findings-{lang}-{size:g}x", provider, "findings", lang,
                                    size))
    for lang in ("en", "zh"):
        out.append(Scenario(f"findings-{lang}-2x-no-numbers", "openai", "findings", lang, 2.0,
                            numbers=False))
    for provider in ("openai", "anthropic", "gemini"):
        for lang in ("en", "zh"):
            for where, idx in (("first", 0), ("last", 3)):
                out.append(Scenario(f"transcript-{lang}-big-{where}", provider, "transcript",
                                    lang, 3.0, oversized_round=idx))
    return out


def smoke_scenarios() -> list[Scenario]:
    """A handful that still cover both languages, numbers and none, findings and transcripts."""
    return [Scenario("findings-zh-2x", "openai", "findings", "zh", 2.0),
            Scenario("findings-en-1.1x", "anthropic", "findings", "en", 1.1),
            Scenario("findings-en-2x-no-numbers", "openai", "findings", "en", 2.0,
                     numbers=False),
            Scenario("transcript-en-big-first", "gemini", "transcript", "en", 3.0)]
