"""Calls to one chat model that fit its window: the layer under the LLM engine's roles.

`ModelCalls` owns what every role needs and none of them should repeat: the output cap a role
may ask for (its share of the request budget, never above the model's known cap), the input
room left beside it, text cut to that room, a plain call, and a JSON call validated into a
schema (re-asked once with the parse error). Every role's system prompt ends with today's date
and the language to write in. A `ContextOverflow` or any other signal propagates untouched:
shrinking is the caller's (core.overflow), retrying is Prefect's.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from pydantic import BaseModel

from core.engine.model_driven import prompts
from core.engine.model_driven.answers import InvalidOutput, parse_answer
from core.engine.model_driven.schemas import json_schema
from core.llm.base import ChatModel, Completion
from core.models import Message
from core.overflow.compaction import truncate_tool_result
from core.overflow.windows import ContextLimits
from core.overflow.shrink import SAFETY_MARGIN
from core.signals import Fatal
from core.overflow.tokens import TokenEstimator, content_bytes, default_estimator

Out = TypeVar("Out", bound=BaseModel)

# Pre-flight for the output side: a role never asks for more output than this share of the
# model's request budget, so its input keeps room and a known window costs no failed call.
OUTPUT_SHARE = {"plan": 0.5, "queries": 0.25, "condense": 0.3, "checkpoint": 0.4,
                "compress": 0.3, "review": 0.25, "report": 0.5}


class ModelCalls:
    def __init__(self, model: ChatModel, *, limits: ContextLimits | None = None,
                 estimator: TokenEstimator | None = None, max_output_tokens: int = 4096,
                 spill_dir: Path | str | None = None,
                 today: Callable[[], date] = date.today) -> None:
        self.model = model
        self.today = today  # read per call: a run that crosses midnight dates its prompts right
        self.name = f"llm:{model.provider}:{model.model}"
        self.limits = limits if limits is not None else ContextLimits()
        self.estimator = estimator if estimator is not None else default_estimator()
        self.max_output_tokens = max_output_tokens
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None

    def context_window(self) -> int | None:
        return self.limits.window(self.model.model)

    def request_budget(self) -> int:
        """Tokens one request (input + output) may use now: the window, or a learned TPM cap."""
        return self.limits.request_budget(self.model.model)

    def output_tokens(self, role: str, max_tokens: int | None = None) -> int:
        """The output cap a role's call would ask for (see OUTPUT_SHARE)."""
        return self._out_tokens(max_tokens, role)

    def chars_for(self, tokens: int, sample: str) -> int:
        """How many characters of text like `sample` make `tokens` tokens for this model."""
        return self._chars(tokens, sample)

    def system(self, text: str, language: str) -> Message:
        """A role's system prompt, ending with today's date and the language to write in."""
        return self._system(text, language)

    def _system(self, text: str, language: str) -> Message:
        return Message(role="system",
                       content=text + prompts.framing(self.today().isoformat(), language))

    # -- model calls --------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], *, max_tokens: int) -> Completion:
        """One plain-text call (the report writer's); signals propagate untouched."""
        return self._call(messages, max_tokens=max_tokens)

    def out_room(self, messages: Sequence[Message]) -> int:
        return self._out_room(messages)

    def _call(self, messages: Sequence[Message], *, max_tokens: int,
              schema: dict[str, Any] | None = None) -> Completion:
        """One call; ContextOverflow and every other signal propagate untouched."""
        completion = self.model.complete(messages, max_tokens=max_tokens, json_schema=schema)
        sent = content_bytes(messages) + (len(json.dumps(schema)) if schema else 0)
        self.estimator.calibrate(sent, completion.usage.input_tokens, model=self.model.model)
        return completion

    def _ask(self, messages: list[Message], shape: type[Out], *, what: str,
             max_tokens: int | None = None, reask: bool = True) -> tuple[Out, list[Message]]:
        """Ask for JSON of `shape`; on a bad answer re-ask once, then give up.

        An answer cut at its output cap is asked again with the largest cap that still fits the
        window, or, when there is no such room, with a request to answer more concisely; any
        other bad answer is re-asked with the parse error.

        Returns the parsed answer and the conversation including it (for a follow-up complaint).
        Without `reask`, a bad answer raises `InvalidOutput` at once.
        """
        schema = json_schema(shape)
        tokens = self._out_tokens(max_tokens)
        for attempt in range(2 if reask else 1):
            completion = self._call(messages, max_tokens=tokens, schema=schema)
            answered = [*messages, Message(role="assistant", content=completion.text)]
            try:
                return parse_answer(completion.text, shape), answered
            except InvalidOutput as exc:
                error = exc
            if attempt == 0 and reask:
                truncated = completion.truncated
                room = self._out_room(messages) if truncated else 0
                if room > tokens * 1.25:
                    tokens = room  # the same question with a larger cap that still fits
                    continue
                messages = [*answered, Message(role="user", content=prompts.complaint_invalid_json(
                    str(error), truncated))]
        if not reask:
            raise error
        raise Fatal(f"{self.name}: the model could not produce a valid {what} "
                    f"(twice an invalid answer; last error: {error})",
                    provider=self.model.provider, model=self.model.model,
                    hint="try a stronger model, or one that supports structured output")

    # -- budgets ------------------------------------------------------------------------------
    def _tokens(self, content: str | Message | Sequence[Message]) -> int:
        return self.estimator.estimate(content, model=self.model.model)

    def _input_budget(self, out_tokens: int) -> int:
        # The margin covers the gap between our estimate and the provider's tokenizer; the
        # output side counts what the backend really sends (thinking allowance included).
        budget = int(self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN))
        if not self._window_holds_output():
            return budget
        return max(0, budget - self._sent_cap(out_tokens))

    def _window_holds_output(self) -> bool:
        return bool(getattr(self.model, "window_includes_output", True))

    def _sent_cap(self, out_tokens: int) -> int:
        cap = getattr(self.model, "output_cap", None)
        return cap(out_tokens) if callable(cap) else out_tokens

    def _out_tokens(self, max_tokens: int | None, role: str = "report") -> int:
        """The caller's max_tokens, else the default; never above the model's known output cap,
        nor above the role's share of the request budget (the output-side pre-flight)."""
        tokens = max_tokens or self.max_output_tokens
        cap = self.limits.max_output(self.model.model)
        if cap:
            tokens = min(tokens, cap)
        budget = self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN)
        return max(1, min(tokens, int(budget * OUTPUT_SHARE.get(role, 0.5))))

    def _out_room(self, messages: Sequence[Message]) -> int:
        """The largest output that fits beside `messages` (for a truncated answer's re-ask)."""
        budget = int(self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN))
        cap = self.limits.max_output(self.model.model)
        if not self._window_holds_output():
            return cap or budget
        room = budget - self._tokens(messages) - (self._sent_cap(1) - 1)  # thinking stays
        return max(0, min(room, cap) if cap else room)

    def _chars(self, tokens: int, sample: str) -> int:
        ratio = self.estimator.chars_per_token(sample[:4000], model=self.model.model)
        return max(0, int(tokens * ratio))

    def _fit_text(self, text: str, frame: Sequence[Message], out_tokens: int, *,
                  reserve: int = 0, scale: float = 1.0) -> str:
        """`text` cut (head + tail, spilled to disk when asked) to fit beside `frame`, leaving
        `reserve` tokens (an output schema) and using `scale` of the room that is left."""
        room = int((self._input_budget(out_tokens) - self._tokens(frame) - reserve) * scale)
        if self._tokens(text) <= room:
            return text
        return truncate_tool_result(text, self._chars(room, text), self.spill_dir)

