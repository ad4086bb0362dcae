"""A loopback LLM provider that plays every research role, in any of the three wire formats.

`ResearchProvider("anthropic", fault_rate=0.2)` is a `ScriptedServer` handler: it recognises the
engine's role from the system prompt, answers it from what it was sent (plans, one follow-up
query, verbatim page sentences, findings quoting them, a report citing them), reports usage the
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
from typing import Any

from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply

ROLES = {"planner of a research team": "plan", "direct a web researcher": "queries",
         "extract evidence from one web page": "condense",
         "compressing a researcher's working notes": "compress",
         "keep a researcher's memory short": "checkpoint", "write a research report": "report"}
FAULTS: dict[str, tuple[str, ...]] = {"openai": ("429", "500", "503"),
                                      "anthropic": ("429", "500", "529"),
                                      "gemini": ("429", "500", "503")}


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
    _answered: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json() or {}
        role = next((r for k, r in ROLES.items() if k in system_text(self.provider, body)), "?")
        digest = hashlib.sha256(rec.path.encode() + rec.body).hexdigest()
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
        text = answer(role, self.provider, body)
        input_tokens = fake.estimate_tokens(self.provider, body)
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


def answer(role: str, provider: str, body: dict[str, Any]) -> str:
    last = last_user_text(provider, body)
    if role == "plan":
        topic = re.search(r"Topic: (.*)", last)
        subject = topic.group(1).strip() if topic else "the topic"
        # Sub-questions name the topic, so two topics never share a cached step.
        label = re.sub(r"[^\w ]", "", subject)[-40:].strip()
        return json.dumps({"brief": f"What to know about {subject}.", "intent": "compare",
                           "targets": ["threading", "asyncio"], "subquestions": [
            {"question": f"How do threading and asyncio differ in {d} ({label})?",
             "queries": [f"threading asyncio {d}"]}
            for d in ("memory", "blocking", "waiting", "scheduling")]})
    if role == "queries":  # one follow-up round, then enough
        if "details" in last:
            return json.dumps({"enough": True, "queries": []})
        question = re.search(r"Sub-question: (.*)", last)
        dimension = re.search(r"differ in (\w+)", question.group(1)) if question else None
        word = dimension.group(1) if dimension else "threads"
        return json.dumps({"enough": False, "queries": [f"asyncio {word} details"]})
    if role == "condense":  # the page's sentences, verbatim
        page = last.split("Page text:", 1)[-1]
        return "\n".join(re.findall(r"[A-Z][^.\n]{20,}\.", page)[:8]) or "NONE"
    if role == "compress":
        texts = fake.request_texts(provider, body)
        claims = []
        for block in re.findall(r"Source: [^\n]*<([^>]+)>\n((?:[^\n]+\n?)+)", "\n".join(texts)):
            url, lines = block
            claims += [{"text": f"The source says: {line.strip()}", "confidence": "medium",
                        "evidence": [{"url": url, "quote": line.strip()}]}
                       for line in lines.splitlines()[:3] if line.strip().endswith(".")]
        return json.dumps({"claims": claims[:6]})
    if role == "report":
        keys = re.findall(r"\[(E\d+)\]", last)
        return json.dumps({"title": "Threads and coroutines", "summary": "In short.",
                           "sections": [{"subquestion_index": i + 1, "heading": f"Part {i + 1}",
                                         "body": f"What the sources say [{k}]."}
                                        for i, k in enumerate(keys[:3])],
                           "comparison_table": None})
    return "Summary of earlier research."


def role_of(provider: str, body: dict[str, Any]) -> str:
    return next((r for k, r in ROLES.items() if k in system_text(provider, body)), "?")


def responder(provider: str):
    """A `respond(body)` for `providers.WindowEnforcingHandler`: every role answered as above."""
    return lambda body: answer(role_of(provider, body), provider, body)
