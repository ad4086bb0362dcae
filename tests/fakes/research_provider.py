"""A loopback LLM provider that plays every research role, in any of the three wire formats.

`ResearchProvider("anthropic", fault_rate=0.2)` is a `ScriptedServer` handler: it recognises the
engine's role from the system prompt, answers it from what it was sent (plans shaped by the
topic's intent, a choice of the first results, one follow-up query, the ids of page sentences,
findings quoting them, follow-ups for sections without evidence, a markdown report citing them,
in Chinese when asked for Chinese), reports usage the
way the provider does, and answers a share of calls with that provider's real fault bodies (429
with retry-after, 500, 503, Anthropic's 529). It counts what a user would want to know on a bad
day: calls, faults, and *successful calls repeated* (a request byte-identical to one already
answered successfully), plus the token usage it reported, for checking the ledger.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply

ROLES = {"planner of a research team": "plan", "Choose which pages to read": "choose",
         "direct a web researcher": "queries", "pick the evidence on one web page": "condense",
         "compressing a researcher's working notes": "compress",
         "updating a researcher's findings": "compress",
         "keep a researcher's memory short": "checkpoint", "You lead a research team": "review",
         "write a research report": "report", "rescue a web researcher's searches": "rewrite"}
# The plan always has a dimension the pages say nothing about: its researcher condenses
# nothing, its section has no evidence, and the supervisor asks a follow-up (wave 2).
UNCOVERED = "licensing"
CHOSEN = 3  # results read per search round
# How each SDK is pointed at a loopback provider: (key variable, base-URL variable, URL suffix),
# and the models tests name for each.
SDK_ENV = {"openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"),
           "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", ""),
           "gemini": ("GEMINI_API_KEY", "RESEARCHFLOW_GEMINI_BASE_URL", "")}
TEST_MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5",
               "gemini": "gemini:gemini-2.5-flash"}
FAULTS: dict[str, tuple[str, ...]] = {"openai": ("429", "500", "503"),
                                      "anthropic": ("429", "500", "529"),
                                      "gemini": ("429", "500", "503")}


ZH_PAGE = ("# 线程和异步IO\n\n线程在等待网络数据时会阻塞当前线程，操作系统会切换到其他线程。\n\n"
           "异步IO在等待网络数据时把控制权交还给事件循环，可以同时处理很多连接。\n\n"
           "每个线程都需要自己的栈内存，所以同时运行的线程数量受内存限制。\n")


def write_pages(folder: Path, subjects: Sequence[str], *, sentences: int = 12,
                chinese: bool = False) -> Path:
    """A corpus this provider's answers work on: per subject a page of `sentences` sentences
    naming threading and asyncio with a figure each (and a Chinese page when asked)."""
    folder.mkdir(parents=True, exist_ok=True)
    for j, subject in enumerate(subjects):
        lines = [f"# {subject.title()} in threading and asyncio", ""] + [
            f"{subject.capitalize()} example {i} shows that a threading or asyncio program waits "
            f"on input or output for {i * 7 + j} milliseconds before it resumes."
            for i in range(sentences)]
        name = re.sub(r"\W+", "-", subject.lower())
        (folder / f"{name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if chinese:
        (folder / "zh.md").write_text(ZH_PAGE, encoding="utf-8")
    return folder



def write_batch(work: Path, subjects: Sequence[str], topics: Sequence[str], *,
                sentences: int) -> tuple[Path, Path, Path]:
    """A batch's folder: the corpus of `subjects`' pages, a CSV of `topics`, the store's path."""
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_pages(work / "corpus", subjects, sentences=sentences)
    csv = work / "topics.csv"
    csv.write_text("topic\n" + "".join(f'"{t}"\n' for t in topics), encoding="utf-8")
    return corpus, csv, work / "store.duckdb"

def system_text(provider: str, body: dict[str, Any]) -> str:
    if provider == "openai":
        return "\n".join(m["content"] for m in body.get("messages", [])
                         if m.get("role") == "system" and isinstance(m.get("content"), str))
    if provider == "anthropic":
        system = body.get("system") or ""
        return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    parts = (body.get("systemInstruction") or {}).get("parts") or []
    return " ".join(p.get("text", "") for p in parts)


def last_user_text(provider: str, body: dict[str, Any]) -> str:
    if provider == "gemini":
        turns = [" ".join(p.get("text", "") for p in c.get("parts", []))
                 for c in body.get("contents", []) if c.get("role") == "user"]
    else:
        turns = [m["content"] if isinstance(m["content"], str)
                 else " ".join(b.get("text", "") for b in m["content"])
                 for m in body.get("messages", []) if m.get("role") == "user"]
    return turns[-1] if turns else ""


def fault_reply(provider: str, kind: str, retry_after: int = 1) -> Reply:
    if kind == "429":
        return fake.rate_limit_error(provider, retry_after=retry_after)
    if kind == "500":
        return fake.server_error(provider)
    if kind == "529":
        return Reply(529, fake.error_body("anthropic", 529, "Overloaded", type="overloaded_error"))
    message = {"openai": "The server is overloaded or not ready yet.",
               "gemini": "The model is overloaded. Please try again later."}.get(provider,
                                                                                "Unavailable")
    return Reply(503, fake.error_body(provider, 503, message, type="server_error"
                                      if provider == "openai" else None))


@dataclass
class ResearchProvider:
    provider: str
    fault_rate: float = 0.0
    seed: int = 0
    retry_after: int = 1
    fail_roles: dict[str, Reply] = field(default_factory=dict)  # role -> reply, every time
    calls: int = 0
    faults: int = 0
    successes: int = 0
    repeated_successes: int = 0
    input_tokens: int = 0  # as reported in successful replies
    output_tokens: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    # False: usage too small to calibrate the client's token estimate, so a page is cut into
    # the same pieces in every process (a piece's size follows the calibration).
    calibrating: bool = True
    # True: the plan searches the topic's own words with each dimension, not only threading
    # and asyncio (a topic on another subject finds its page).
    topic_queries: bool = False
    # True: choose reads a result only when its title names the sub-question's subject (as a
    # model reading titles would), not the first results whatever they are about.
    choose_by_subject: bool = False
    _answered: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json() or {}
        role = next((r for k, r in ROLES.items() if k in system_text(self.provider, body)), "?")
        with self._lock:
            self.calls += 1
            self.by_role[role] = self.by_role.get(role, 0) + 1
            faulty = self._rng.random() < self.fault_rate
            kind = self._rng.choice(FAULTS[self.provider])
        if role in self.fail_roles:
            return self.fail_roles[role]
        if faulty:
            with self._lock:
                self.faults += 1
            return fault_reply(self.provider, kind, self.retry_after)
        return self._answered_with(rec, body, answer(
            role, self.provider, body, topic_queries=self.topic_queries,
            choose_by_subject=self.choose_by_subject))

    def prose(self, rec: Recorded, text: str) -> Reply:
        """A successful reply of `text` whatever was asked (a model that ignored the JSON
        schema), counted like any other answer."""
        with self._lock:
            self.calls += 1
        return self._answered_with(rec, rec.json() or {}, text)

    def _answered_with(self, rec: Recorded, body: dict[str, Any], text: str) -> Reply:
        digest = hashlib.sha256(rec.path.encode() + rec.body).hexdigest()
        input_tokens = fake.estimate_tokens(self.provider, body) if self.calibrating else 1
        output_tokens = max(1, fake.estimate_tokens("openai", {"messages": [text]}))
        with self._lock:
            self.successes += 1
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            if digest in self._answered:
                self.repeated_successes += 1
            self._answered.add(digest)
        forced = (body.get("tool_choice") or {}).get("type") == "tool"
        return fake.success_reply(self.provider, text, stream=bool(body.get("stream")),
                                  json_tool=self.provider == "anthropic" and forced,
                                  input_tokens=input_tokens, output_tokens=output_tokens)


def answer(role: str, provider: str, body: dict[str, Any], *,
           topic_queries: bool = False, choose_by_subject: bool = False) -> str:
    last = last_user_text(provider, body)
    chinese = "Chinese (zh)" in system_text(provider, body)
    if role == "plan":
        topic = re.search(r"Topic: (.*)", last)
        subject = topic.group(1).strip() if topic else "the topic"
        # Sub-questions name the topic, so two topics never share a cached step.
        label = re.sub(r"[^\w ]", "", subject)[-40:].strip()
        intent = ("recommend" if re.search(r"(?i)should i|which|建议|应该", subject) else
                  "compare" if re.search(r"(?i) vs |versus|differ|区别|比较", subject) else
                  "describe")
        return json.dumps({"brief": f"What to know about {subject}.", "intent": intent,
                           "targets": ["threading", "asyncio"] if intent == "compare" else [],
                           "subquestions": [
            {"question": f"How do threading and asyncio differ in {d} ({label})?",
             "queries": [f"{label} {d}" if topic_queries else f"threading asyncio {d}"]}
            for d in ("memory", "blocking", "waiting", UNCOVERED)]})
    if role == "choose":
        numbers = re.findall(r"^(\d+)\. ", last, re.M)
        limit = re.search(r"at most (\d+) result numbers", system_text(provider, body))
        keep = min(CHOSEN, int(limit.group(1)) if limit else CHOSEN)
        if choose_by_subject:
            numbers = on_subject(last)
        return json.dumps({"read": [int(n) for n in numbers[:keep]],
                           "why": "the first results name the sub-question's terms"})
    if role == "queries":  # one follow-up round, then enough
        ran = last.split("Queries already run:", 1)[-1].split("\n\n", 1)[0]
        if "details" in ran:
            return json.dumps({"reflection": "The notes answer it.", "enough": True,
                               "queries": []})
        question = re.search(r"Sub-question: (.*)", last)
        dimension = re.search(r"differ in (\w+)", question.group(1)) if question else None
        word = dimension.group(1) if dimension else "threads"
        return json.dumps({"reflection": "Timings are known; details are missing.",
                           "enough": False, "queries": [f"asyncio {word} details"]})
    if role == "rewrite":  # searches that found nothing readable, asked more specifically
        question = re.search(r"Sub-question: (.*)", last)
        dimension = re.search(r"differ in (\w+)", question.group(1)) if question else None
        word = dimension.group(1) if dimension else "waiting"
        return json.dumps({"queries": [f"threading asyncio {word} explained"]})
    if role == "condense":  # the ids of the page's sentences, never their text
        question = re.search(r"Sub-question: (.*)", last)
        if question and UNCOVERED in question.group(1):
            return json.dumps({"ids": [], "note": ""})
        page = last.split("Page sentences:", 1)[-1]
        ids = [int(n) for n, text in re.findall(r"^\[(\d+)\] (.*)$", page, re.M)
               if re.match(r"[A-Z\u4e00-\u9fff][^\n]{8,}[.。]$", text)]
        ids = ids if len(ids) <= 8 else ids[:4] + ids[-4:]  # from the top and the bottom
        # Asked again about a changed page (only its new and edited sentences shown): an edited
        # sentence keeps the verdict its earlier version had.
        passed = re.search(r"earlier version you did not choose: ([\d, ]+)", last)
        if passed:
            ids = [n for n in ids if str(n) not in re.findall(r"\d+", passed.group(1))]
        return json.dumps({"ids": ids, "note": "页面给出了时间。" if chinese else
                           "The page gives timings."})
    if role == "compress":
        texts = fake.request_texts(provider, body)
        claims = []
        for block in re.findall(r"Source: [^\n]*<([^>]+)>\n((?:[^\n]+\n?)+)", "\n".join(texts)):
            url, lines = block
            claims += [{"text": f"The source says: {line.strip()}", "confidence": "medium",
                        "evidence": [{"url": url, "quote": line.strip()}]}
                       for line in lines.splitlines()[:3] if line.strip().endswith((".", "。"))]
        return json.dumps({"claims": claims[:6]})
    if role == "review":
        empty = re.findall(r"Sub-question (\d+) \(([^\n]*?)\): no quoted evidence", last)
        if not empty:
            return json.dumps({"done": True, "followups": []})
        return json.dumps({"done": False, "followups": [
            {"question": f"Which pages explain how threading and asyncio handle waiting "
                         f"(section {n}, {topic_label(question)})?",
             "queries": ["threading asyncio waiting"],
             "why": f"sub-question {n} has no evidence", "fills": int(n)}
            for n, question in empty]})
    if role == "report":
        return report_markdown(last, chinese)
    return "Summary of earlier research."


def on_subject(choose_prompt: str) -> list[str]:
    """The numbers of the search results whose title names the sub-question's subject: the
    words a title adds to "... in threading and asyncio" (what every page is about) all appear
    in the topic label the sub-question ends with. "Waiting On Sockets in threading and
    asyncio" is on the subject of "(... for waiting on sockets)"; "Memory Use ..." is not."""
    question = re.search(r"Sub-question: (.*)", choose_prompt)
    label = topic_label(question.group(1)) if question else ""
    named = set(re.findall(r"\w+", label.lower()))
    listing = choose_prompt.split("Search results:", 1)[-1]
    chosen = []
    for number, title in re.findall(r"^(\d+)\. (.*?) <", listing, re.M):
        words = set(re.findall(r"\w+", title.lower())) - {"in", "threading", "and", "asyncio"}
        if words and words <= named:
            chosen.append(number)
    return chosen


def topic_label(question: str) -> str:
    """The topic label a planned question ends with, so follow-ups stay topic-specific."""
    found = re.search(r"\(([^()]*)\)\?*$", question)
    return found.group(1) if found else ""


_HEADINGS = {"summary": ("Executive summary", "执行摘要"), "comparison": ("Comparison", "对比"),
             "recommendation": ("Recommendation", "建议"), "conclusion": ("Conclusion", "结论")}


def report_markdown(prompt: str, chinese: bool) -> str:
    """A report following the outline the prompt gives, each part citing keys it was shown."""
    outline = prompt.rsplit("outline:", 1)[-1] if "outline:" in prompt else prompt
    tags = re.findall(r"^## \[(\w+)\]", outline, re.M)
    blocks = dict(re.findall(r"### Sub-question (\d+): [^\n]*\n((?:.+\n?)*)", prompt))
    keys = list(dict.fromkeys(re.findall(r"\[(E\d+)\]", prompt.split("outline:", 1)[0])))
    said = "来源如此说" if chinese else "What the sources say"
    parts = [] if outline.lstrip().startswith("## ") else [
        "# " + ("线程与协程" if chinese else "Threads and coroutines")]
    for tag in tags:
        if tag.startswith("S"):
            own = re.findall(r"\[(E\d+)\]", blocks.get(tag[1:], ""))
            heading = f"Part {tag[1:]}" if not chinese else f"第{tag[1:]}部分"
            body = f"{said} [{own[0]}]." if own else "[insufficient evidence]"
        else:
            heading = _HEADINGS[tag][1 if chinese else 0]
            cited = "".join(f"[{k}]" for k in keys[:2])
            body = (f"| dimension | threading | asyncio |\n|---|---|---|\n| waiting | "
                    f"blocks {cited} | yields {cited} |" if tag == "comparison"
                    else f"{said} {cited}.")
        parts.append(f"## [{tag}] {heading}\n\n{body}")
    return "\n\n".join(parts)


def role_of(provider: str, body: dict[str, Any]) -> str:
    return next((r for k, r in ROLES.items() if k in system_text(provider, body)), "?")


def responder(provider: str):
    """A `respond(body)` for `providers.WindowEnforcingHandler`: every role answered as above."""
    return lambda body: answer(role_of(provider, body), provider, body)
