"""What each model accepts, learned from its own 400s and kept by the model for as long as it lives.

A model's name is only a first guess at its request shape (`core.llm.openai.is_reasoning_model`
knows o1/o3/o4/gpt-5); the API has the last word. When a provider rejects a parameter as
unsupported, `fix_for(exc)` reads which one from the SDK exception (status 400; structured
`param` and `code` fields first, then the message), the model's `Quirks` remember the supported
form (`learn(provider, model, fix)`), and `SDKBackend.complete` rebuilds the request and sends it
again, once per fix. A run builds each of its models once (core.context), so every task of the
run sends what one of them was taught. The messages it understands, as the providers word them:

- OpenAI: "Unsupported parameter: 'max_tokens' is not supported with this model. Use
  'max_completion_tokens' instead." (code unsupported_parameter); "Unsupported value:
  'temperature' does not support 0.0 with this model. Only the default (1) value is supported."
  (code unsupported_value); "Unrecognized request argument supplied: reasoning_effort".
- Anthropic: "`temperature` is deprecated for this model." (Opus 4.7 and later);
  "'claude-3-5-haiku-20241022' does not support thinking."; "\"thinking.type.enabled\" is not
  supported for this model. Use \"thinking.type.adaptive\" and \"output_config.effort\" ...".
- Gemini: "thinking is not supported by this model"; "Thinking budget is not supported for this
  model."; "thinking is not configurable in this model; please remove the thinking_config";
  "Thinking can't be disabled for this model" / "This model only works in thinking mode."
- Structured output, on OpenAI-compatible servers: any 400 that names `response_format` or
  `json_schema` as refused or invalid ("response_format json_schema is not supported",
  "'response_format.type' must be 'json_object' or 'text'", "Invalid value: 'json_schema'",
  "This response_format type is unavailable now") steps that model down from the JSON mode it
  was sent: json_schema -> json_object -> instruction (the schema as a system message only).
  Which mode was refused is read from the request sent, not the wording: LM Studio refuses
  json_object with "must be 'json_schema' or 'text'".

What it does not do: classify errors (that stays `core.signals.translate_errors`; this
module only reads the SDK exception a `Fatal(reason="bad_request")` keeps as `__cause__`), retry
anything itself, or persist what it learned (a new run asks the API again: one free 400).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, replace
from typing import Any, Literal

from core.signals.bodies import read_body

log = logging.getLogger("researchflow.llm")

Fix = Literal["max_completion_tokens", "max_tokens", "no_temperature", "no_top_p",
              "no_reasoning_effort", "no_thinking", "adaptive_thinking", "thinks",
              "json_object", "json_instruction"]
JsonMode = Literal["json_schema", "json_object", "instruction"]
# Structured output modes from the most to the least the server enforces; learning only steps
# down, so two threads refused the same mode at once still land one step lower, not two.
_JSON_ORDER: tuple[JsonMode, ...] = ("json_schema", "json_object", "instruction")


@dataclass(frozen=True)
class Form:
    """How one model wants its request, as far as its replies have said (defaults: as guessed).

    `token_param` None: the backend's guess from the name. `thinking`: "enabled" sends the
    configured thinking, "adaptive" the Anthropic adaptive form, "off" none at all. `thinks`:
    the model was seen thinking without being asked (Gemini), so its output cap needs room.
    `json_mode` None: the backend's first choice (json_schema); else the mode the server took.
    """

    token_param: Literal["max_tokens", "max_completion_tokens"] | None = None
    temperature: bool = True
    top_p: bool = True
    reasoning_effort: bool = True
    thinking: Literal["enabled", "adaptive", "off"] = "enabled"
    thinks: bool = False
    json_mode: JsonMode | None = None

    def with_fix(self, fix: Fix) -> "Form":
        if fix in ("json_object", "json_instruction"):
            wanted: JsonMode = "json_object" if fix == "json_object" else "instruction"
            now = _JSON_ORDER.index(self.json_mode or "json_schema")
            return replace(self, json_mode=_JSON_ORDER[max(now, _JSON_ORDER.index(wanted))])
        changes: dict[str, Any] = {
            "max_completion_tokens": {"token_param": "max_completion_tokens"},
            "max_tokens": {"token_param": "max_tokens"},
            "no_temperature": {"temperature": False},
            "no_top_p": {"top_p": False},
            "no_reasoning_effort": {"reasoning_effort": False},
            "no_thinking": {"thinking": "off"},
            "adaptive_thinking": {"thinking": "adaptive"},
            "thinks": {"thinks": True},
        }[fix]
        return replace(self, **changes)


class Quirks:
    """The learned `Form` per (provider, model). Thread-safe: worker threads share it."""

    def __init__(self) -> None:
        self._forms: dict[tuple[str, str], Form] = {}
        self._lock = threading.Lock()

    def form(self, provider: str, model: str) -> Form:
        with self._lock:
            return self._forms.get(_key(provider, model), Form())

    def learn(self, provider: str, model: str, fix: Fix) -> Form:
        """Record a fix; returns the model's form with it. Logged once per model and fix."""
        key = _key(provider, model)
        with self._lock:
            before = self._forms.get(key, Form())
            after = before.with_fix(fix)
            self._forms[key] = after
        if after != before:
            log.info("%s model %r: %s from now on (learned from the provider's reply)",
                     provider, model, _DESCRIBE[fix])
        return after


def _key(provider: str, model: str) -> tuple[str, str]:
    return provider, model.strip().lower()


_DESCRIBE: dict[Fix, str] = {
    "max_completion_tokens": "sending max_completion_tokens instead of max_tokens",
    "max_tokens": "sending max_tokens instead of max_completion_tokens",
    "no_temperature": "leaving temperature at the model's default",
    "no_top_p": "leaving top_p at the model's default",
    "no_reasoning_effort": "not sending reasoning_effort",
    "no_thinking": "not sending a thinking configuration",
    "adaptive_thinking": "asking for adaptive thinking instead of a fixed budget",
    "thinks": "leaving room for thinking it does by default",
    "json_object": "asking for JSON with response_format json_object (json_schema refused)",
    "json_instruction": "asking for JSON by instruction only (response_format refused)",
}

# -- reading the 400 ------------------------------------------------------------------------------

# Words that say a parameter is not accepted at all (not merely out of range, which is the
# caller's to fix: "The thinking budget (52428) is invalid" stays a Fatal).
_REFUSAL = re.compile(
    r"unsupported|not supported|does not support|doesn't support|is deprecated|unrecognized|"
    r"unknown (?:parameter|field|argument)|not permitted|not allowed|not configurable|"
    r"can(?:no|')t be disabled|only works in thinking mode|only the default", re.I)
_NAMED = re.compile(r"(?:unsupported (?:parameter|value)|unrecognized request argument supplied|"
                    r"unknown (?:parameter|field|argument))\s*:?\s*['\"`]?([a-z_.]+)", re.I)
# Our parameter names, as providers spell them (snake or camel case, dotted paths).
_PARAMS: list[tuple[str, str]] = [
    ("max_completion_tokens", r"max_completion_tokens"),
    ("max_tokens", r"max_tokens"),
    ("reasoning_effort", r"reasoning_effort"),
    ("temperature", r"temperature"),
    ("top_p", r"top_?p"),
    ("thinking", r"thinking(?:_?config|_?budget|_?level|\.type\.enabled)?"),
]


# A 400 about structured output: it names the parameter or the mode, and says it is not taken.
_JSON_NAMED = re.compile(r"response_?format|json[_ ]schema|json[_ ]object", re.I)
_JSON_REFUSAL = re.compile(
    r"unsupported|not supported|does not support|doesn't support|unavailable|not available|"
    r"invalid|must be|should be|unknown|unrecognized|not allowed|not permitted|"
    r"not implemented|cannot|can't", re.I)


def fix_for(exc: BaseException | None, sent: dict[str, Any] | None = None) -> Fix | None:
    """The change that would make the request acceptable, when `exc` is a 400 refusing one of
    our parameters as unsupported; None for any other error (nothing to learn).

    `sent` is the request that was refused: a refusal of structured output steps down from the
    `response_format` it carried (without it, json_schema is taken as the refused mode)."""
    if exc is None or _status(exc) != 400:
        return None
    body: list[Any] = [getattr(exc, "body", None), getattr(exc, "details", None),
                       getattr(exc, "message", None)]
    structured = {k: getattr(exc, k, None) for k in ("param", "code", "type")}
    body.append({k: v for k, v in structured.items() if isinstance(v, str)})
    facts = read_body(body)
    text = facts.text
    json_fix = _json_fix(text, sent)
    if json_fix is not None and any(p.startswith("response_format") for p in facts.params):
        return json_fix  # the provider's own `param` field points at it
    if {"unsupported_parameter", "unsupported_value"} & facts.codes or _REFUSAL.search(text):
        for name in _named_params(facts.params, text):
            fix = _fix(name, text)
            if fix is not None:
                return fix
    return json_fix


def _json_fix(text: str, sent: dict[str, Any] | None) -> Fix | None:
    """One step down from the JSON mode `sent` asked for, when the error refuses it."""
    if not (_JSON_NAMED.search(text) and _JSON_REFUSAL.search(text)):
        return None
    if sent is None:
        return "json_object"
    response_format = sent.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    return _STEP_DOWN.get(kind) if isinstance(kind, str) else None


_STEP_DOWN: dict[str, Fix] = {"json_schema": "json_object", "json_object": "json_instruction"}


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:  # google-genai: .code is the HTTP status
        status = getattr(exc, "code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _named_params(params: list[str], text: str) -> list[str]:
    """Our parameter names the error points at: structured `param` fields first, then names
    quoted after "Unsupported parameter:" and the like, then any mention in the text."""
    found: list[str] = []
    candidates = [*params, *(m.group(1) for m in _NAMED.finditer(text))]
    for raw in candidates:
        name = _canonical(raw)
        if name and name not in found:
            found.append(name)
    mentioned: list[tuple[int, str]] = []
    for name, pattern in _PARAMS:
        m = re.search(rf"(?<![a-z_]){pattern}(?![a-z_])", text, re.I)
        if m and name not in found:
            mentioned.append((m.start(), name))
    return found + [name for _, name in sorted(mentioned)]  # the first mentioned first


def _canonical(raw: str) -> str | None:
    raw = raw.strip("'\"`.").lower()
    for name, pattern in _PARAMS:
        if re.fullmatch(rf"(?:generation_?config\.)?{pattern}(?:\..*)?", raw):
            return name
    return None


def _fix(name: str, text: str) -> Fix | None:
    low = text.lower()
    if name == "max_tokens":
        # Only the rename is learned; "max_tokens: 100000 > 64000" is an output cap (not here).
        return "max_completion_tokens" if "max_completion_tokens" in low else None
    if name == "max_completion_tokens":
        return "max_tokens"
    if name == "thinking":
        return "adaptive_thinking" if "adaptive" in low else "no_thinking"
    return {"temperature": "no_temperature", "top_p": "no_top_p",
            "reasoning_effort": "no_reasoning_effort"}.get(name)  # type: ignore[return-value]
