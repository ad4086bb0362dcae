"""Calls to one chat model that fit its window: the layer under the LLM engine's roles.

`ModelCalls` owns what every role needs and none of them should repeat: the output cap a role
may ask for (what its bounded answer needs, `ROLE_OUTPUT_TOKENS`, never above the model's known
cap nor its share of the request budget), the input room left beside it, text cut to that room,
a plain call, and a JSON call validated into a schema (re-asked once: with the parse error, or,
for an answer cut off at its cap, with a stricter instruction at the same cap; then the role's
answers count as invalid, `Fatal(reason="invalid_output")`, which `core.engine.fallback` may
answer with the extractive engine). Every role's system prompt ends with today's date
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
from core.text.language import is_cjk
from core.llm.base import ChatModel, Completion
from core.models import Message
from core.overflow.compaction import truncate_tool_result
from core.overflow.windows import ContextLimits
from core.overflow.shrink import SAFETY_MARGIN
from core.signals import Fatal
from core.overflow.tokens import TokenEstimator, content_bytes

Out = TypeVar("Out", bound=BaseModel)

# Pre-flight for the output side: a role never asks for more output than this share of the
# model's request budget, so its input keeps room and a known window costs no failed call.
OUTPUT_SHARE = {"plan": 0.5, "queries": 0.25, "choose": 0.25, "rewrite": 0.25, "condense": 0.3,
                "checkpoint": 0.4, "compress": 0.3, "review": 0.25, "report": 0.5}
# What each role's answer needs, in tokens: its bounded JSON (core.engine.model_driven.schemas)
# with room for the syntax, so no call generates thousands of tokens where the role needs
# hundreds (a weak model looping inside a string stops here). The report is sized by its word
# target (core.engine.model_driven.writer.report_tokens); the checkpoint is a summary.
# Chinese, Japanese and Korean text takes about twice the tokens (CJK_FACTOR).
ROLE_OUTPUT_TOKENS = {"plan": 1_200, "choose": 300, "queries": 400, "rewrite": 300,
                      "review": 1_000, "condense": 400, "compress": 2_500, "checkpoint": 1_500}
CJK_FACTOR = 2
INVALID_OUTPUT = "invalid_output"  # Fatal.reason: a role's answers stayed invalid


class ModelCalls:
    def __init__(self, model: ChatModel, *, limits: ContextLimits | None = None,
                 estimator: TokenEstimator | None = None, max_output_tokens: int = 4096,
                 spill_dir: Path | str | None = None,
                 today: Callable[[], date] = date.today) -> None:
        self.model = model
        self.today = today  # read per call: a run that crosses midnight dates its prompts right
        self.name = f"llm:{model.provider}:{model.model}"
        self.limits = limits if limits is not None else ContextLimits()
        self.estimator = estimator if estimator is not None else TokenEstimator()
        self.max_output_tokens = max_output_tokens
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None

    def context_window(self) -> int | None:
        return self.limits.window(self.model.model)

    def request_budget(self) -> int:
        """Tokens one request (input + output) may use now: the window, or a learned TPM cap."""
        return self.limits.request_budget(self.model.model)

    def output_tokens(self, role: str, max_tokens: int | None = None) -> int:
        """The output cap a role's call would ask for (see ROLE_OUTPUT_TOKENS, OUTPUT_SHARE)."""
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

    def _call(self, messages: Sequence[Message], *, max_tokens: int,
              schema: dict[str, Any] | None = None) -> Completion:
        """One call; ContextOverflow and every other signal propagate untouched."""
        completion = self.model.complete(messages, max_tokens=max_tokens, json_schema=schema)
        sent = content_bytes(messages) + (len(json.dumps(schema)) if schema else 0)
        self.estimator.calibrate(sent, completion.usage.input_tokens, model=self.model.model)
        return completion

    def _ask(self, messages: list[Message], shape: type[Out], *, what: str,
             max_tokens: int | None = None, reask: bool = True,
             schema: dict[str, Any] | None = None) -> tuple[Out, list[Message]]:
        """Ask for JSON of `shape` (sent as `schema`, default the shape's bounded schema); on
        a bad answer re-ask once at the same cap, then give up.

        An answer cut off at its output cap is asked again with a stricter instruction (a
        larger cap would only let a looping model loop longer); any other bad answer is
        re-asked with the parse error.

        Returns the parsed answer and the conversation including it (for a follow-up complaint).
        Without `reask`, a bad answer raises `InvalidOutput` at once; with it, a second bad
        answer raises `Fatal(reason="invalid_output")`.
        """
        schema = schema if schema is not None else json_schema(shape)
        tokens = self._out_tokens(max_tokens)
        for attempt in range(2 if reask else 1):
            completion = self._call(messages, max_tokens=tokens, schema=schema)
            answered = [*messages, Message(role="assistant", content=completion.text)]
            try:
                return parse_answer(completion.text, shape), answered
            except InvalidOutput as exc:
                error = exc
            if attempt == 0 and reask:
                if completion.truncated:  # the cut answer is not worth sending back
                    messages = [*messages, Message(role="user",
                                                   content=prompts.complaint_cut_off(tokens))]
                else:
                    messages = [*answered, Message(role="user",
                                                   content=prompts.complaint_invalid_json(
                                                       str(error), False))]
        if not reask:
            raise error
        raise invalid_output(self, what, f"twice an invalid answer; last error: {error}")

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

    def _out_tokens(self, max_tokens: int | None, role: str = "report",
                    language: str | None = None) -> int:
        """The caller's max_tokens, else what the role needs (else the configured default);
        never above the configured `max_output_tokens` nor the model's known output cap, nor
        above the role's share of the request budget (the output-side pre-flight)."""
        need = ROLE_OUTPUT_TOKENS.get(role)
        if need is not None and language and is_cjk(language):
            need *= CJK_FACTOR
        tokens = min(max_tokens or need or self.max_output_tokens, self.max_output_tokens)
        cap = self.limits.max_output(self.model.model)
        if cap:
            tokens = min(tokens, cap)
        budget = self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN)
        return max(1, min(tokens, int(budget * OUTPUT_SHARE.get(role, 0.5))))

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



def invalid_output(calls: ModelCalls, what: str, why: str) -> Fatal:
    """The signal of a role whose answers stayed invalid after its bounded re-asks: fatal (a
    retry would ask the same model the same thing), and answerable by the extractive engine
    (`core.engine.fallback`)."""
    return Fatal(f"{calls.name}: the model could not produce a valid {what} ({why})",
                 provider=calls.model.provider, model=calls.model.model, reason=INVALID_OUTPUT,
                 hint="try a stronger model, or let the extractive engine answer for it "
                      "(--fallback extractive, the default)")
