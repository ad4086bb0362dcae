"""A loopback LLM judge for bench/quality.py, in the OpenAI Chat Completions wire format.

`JudgeProvider()` is a `ScriptedServer` handler. It recognises the bench's judge prompts by their
first line (`bench.quality.JUDGE_MARK`) and answers them deterministically:

- a RACE prompt with the fixed `scores` (comprehensiveness, depth, instruction-following,
  readability, 0-10);
- a citation prompt with one verdict per item: supported unless the quote shares no word with the
  sentence (words: 3+ latin letters or digits, or one CJK character; a few stop words ignored).

`invalid_race` / `invalid_citations` answer that many of those calls with text that is not JSON
first (to exercise the re-ask). Any other request goes to `fallback` (e.g. a
`tests.fakes.research_provider.ResearchProvider("openai")` playing the research roles).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from bench.quality import JUDGE_MARK
from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply

STOP = {"the", "and", "for", "that", "with", "this", "are", "was", "were", "from", "its", "has",
        "have", "not", "but", "can", "which", "than", "into"}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{3,}|[\u4e00-\u9fff]", text.lower())) - STOP


def supported(sentence: str, quote: str) -> bool:
    return bool(words(sentence) & words(quote))


def _texts(body: dict[str, Any], role: str) -> list[str]:
    return [m["content"] for m in body.get("messages", [])
            if m.get("role") == role and isinstance(m.get("content"), str)]


@dataclass
class JudgeProvider:
    scores: tuple[float, float, float, float] = (7.0, 6.0, 8.0, 5.0)
    invalid_race: int = 0
    invalid_citations: int = 0
    fallback: Callable[[Recorded], Reply] | None = None
    race_calls: int = 0
    citation_calls: int = 0
    items_judged: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json() or {}
        system = "\n".join(_texts(body, "system"))
        if not system.startswith(JUDGE_MARK):
            if self.fallback is None:
                return Reply(500, {"error": {"message": "JudgeProvider: not a judge prompt"}})
            return self.fallback(rec)
        asked = _texts(body, "user")[0]  # a re-ask appends turns after it
        with self._lock:
            if "check citations" in system.splitlines()[0]:
                self.citation_calls += 1
                invalid = self.citation_calls <= self.invalid_citations
            else:
                self.race_calls += 1
                invalid = self.race_calls <= self.invalid_race
        if invalid:
            text = "I think the report is quite good overall."
        elif "check citations" in system.splitlines()[0]:
            items = json.loads(asked.split("Items:", 1)[1])
            with self._lock:
                self.items_judged += len(items)
            text = json.dumps({"verdicts": [
                {"id": it["id"], "supported": supported(it["sentence"], it["quote"])}
                for it in items]})
        else:
            text = json.dumps({"rationale": "Fixed scores from the fake judge.", **dict(zip(
                ("comprehensiveness", "depth", "instruction_following", "readability"),
                self.scores))})
        return fake.success_reply("openai", text, input_tokens=fake.estimate_tokens("openai", body),
                                  output_tokens=max(1, len(text) // 4))
