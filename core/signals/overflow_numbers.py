"""What an overflow or output-cap message says: the numbers, the side, the cap.

Servers word the same facts many ways (vLLM alone has five templates across versions; SGLang,
TGI, llama.cpp, Ollama, LM Studio and the hosted APIs each have their own). Two layers read them:

1. exact templates read from the servers' own code (`_TEMPLATES`), tried first;
2. a general reader for wording never seen before (`_generic`): it finds each number by the
   role its phrase gives it (the limit, the prompt/input, the requested output, the stated total)
   in whatever order the message uses, and composes them. It runs only on text that reads as an
   overflow (`looks_like_overflow`), never on rate-limit texts.

`side` says what to cut: "input" when the prompt alone is too long, "output" when the prompt fits
and only prompt + requested output does not (lowering max_tokens recovers), None when the message
cannot tell (vLLM's "at least N input tokens" is a count cut off at the limit, a bare total).
Pure text handling, no SDK imports; `core.signals.bodies` re-exports the public names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"\d+(?:,\d{3})*"
_FLAGS = re.I | re.S


@dataclass(frozen=True)
class OverflowNumbers:
    limit: int | None = None
    requested: int | None = None
    input: int | None = None
    output: int | None = None
    kind: str = "context_window"
    over: bool = True  # False: the numbers fit (a TPM message where waiting helps)
    lower_bound: bool = False  # the input count is "at least" (cut off by the server)
    exact: bool = True  # False: read by the general reader, whose server may cut counts off

    @property
    def side(self) -> str | None:
        """What the numbers say is too long; None when they cannot tell."""
        if self.kind in ("tpm_per_request",):
            return None
        if self.limit and self.input is not None:
            if self.input >= self.limit:
                return "input"
            if self.lower_bound or (not self.exact and self.output
                                    and self.input == self.limit - self.output + 1):
                # "at least", or (wording not known to count exactly) the first count that does
                # not fit: servers that tokenize with truncation (vLLM cuts the prompt at
                # max_input + 1) report just that, whatever the real length
                return None
            if self.output is not None and self.input + self.output > self.limit:
                return "output"
            return None
        if self.kind in ("input_window", "message_chars", "request_bytes"):
            return "input"
        if self.limit and self.requested and self.kind == "context_window":
            return "input"  # requested counts the prompt alone, and it is over
        return None


def _int(value: str | None) -> int | None:
    return int(value.replace(",", "")) if value else None


# -- 1. templates read from the servers' code ------------------------------------------------
# (pattern, limit_kind). Groups: lim, req, inp, out, parts (the "(x in the messages, y in the
# completion)" parenthesis), used, least ("at least").
_TEMPLATES: list[tuple[re.Pattern[str], str]] = [(re.compile(p, _FLAGS), kind) for p, kind in [
    (rf"prompt is too long: (?P<req>{_NUM}) tokens > (?P<lim>{_NUM})", "context_window"),
    (rf"exceed context limit: (?P<inp>{_NUM}) \+ (?P<out>{_NUM}) > (?P<lim>{_NUM})",
     "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens[.,]? however,? you requested "
     rf"(?:about )?(?P<req>{_NUM}) tokens(?: \((?P<parts>[^)]*)\))?", "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens[.,]? however,? your messages resulted "
     rf"in (?P<req>{_NUM}) tokens", "context_window"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens and your request has (?P<inp>{_NUM}) "
     rf"input tokens \((?P<out>{_NUM}) >", "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens. however, you requested (?P<out>{_NUM}) "
     rf"output tokens and your prompt contains (?P<least>at least )?(?P<inp>{_NUM}) input tokens",
     "context_window_incl_output"),
    (rf"input token count is (?P<req>{_NUM}) but (?:the )?model only supports up to (?P<lim>{_NUM})",
     "input_window"),
    (rf"input token count \((?P<req>{_NUM})\) exceeds the maximum number of tokens allowed "
     rf"\((?P<lim>{_NUM})\)", "input_window"),
    (rf"input token count exceeds the maximum number of tokens allowed \((?P<lim>{_NUM})\)",
     "input_window"),
    (rf"exceed the configured limit of (?P<lim>{_NUM}) tokens. your messages resulted in "
     rf"(?P<req>{_NUM}) tokens", "input_window"),
    (rf"prompt contains (?P<req>{_NUM}) tokens[^,]*, too large for model with (?P<lim>{_NUM}) "
     rf"maximum context length", "context_window"),
    (rf"input length \((?P<req>{_NUM}) tokens\) exceeds the maximum allowed length "
     rf"\((?P<lim>{_NUM}) tokens\)", "context_window"),
    (rf"request \((?P<req>{_NUM}) tokens\) exceeds the available context size "
     rf"\((?P<lim>{_NUM}) tokens\)", "context_window"),
    (rf"prompt \(total length (?P<req>{_NUM})\) is too long to fit into the model "
     rf"\(context length (?P<lim>{_NUM})\)", "context_window"),
    (rf"input prompt \((?P<req>{_NUM}) tokens\) is too long and exceeds limit of (?P<lim>{_NUM})",
     "context_window"),
    (rf"`inputs` tokens \+ `max_new_tokens` must be <= (?P<lim>{_NUM})\. given: (?P<inp>{_NUM}) "
     rf"`inputs` tokens and (?P<out>{_NUM}) `max_new_tokens`", "context_window_incl_output"),
    (rf"(?:tokens per min(?:ute)?|\(tpm\))[^:]*: limit (?P<lim>{_NUM}),\s*(?:used "
     rf"(?P<used>{_NUM}),\s*)?requested (?P<req>{_NUM})", "tpm_per_request"),
    (rf"request too large for .{{0,200}}?per min.{{0,40}}?limit:? (?P<lim>{_NUM})", "tpm_per_request"),
    (r"request too large for .{0,200}?(?:per min|\(tpm\))", "tpm_per_request"),
    (rf"request payload size exceeds the limit: (?P<lim>{_NUM}) bytes", "request_bytes"),
    (r"max_tokens must be at least 1, got -\d+", "context_window"),  # vLLM: no room left
]]
_PART_OUT = re.compile(rf"(?P<n>{_NUM}) (?:in|for) (?:the )?(?:completion|output)", re.I)
_PART_IN = re.compile(rf"(?P<n>{_NUM}) (?:in (?:the |your )?(?:messages|prompt)|of \w+ input)", re.I)


def _from_template(text: str) -> OverflowNumbers | None:
    for pattern, kind in _TEMPLATES:
        m = pattern.search(text)
        if not m:
            continue
        g = {k: _int(v) for k, v in m.groupdict().items() if k not in ("parts", "least")}
        lim, req, inp, out = g.get("lim"), g.get("req"), g.get("inp"), g.get("out")
        parts = m.groupdict().get("parts")
        if parts is not None:
            if o := _PART_OUT.search(parts):
                out = _int(o.group("n"))
            ins = [_int(i.group("n")) or 0 for i in _PART_IN.finditer(parts)]
            if ins and out is None:
                inp = sum(ins)  # "(60833 of text input, 10042 of tool input)"
        if kind == "context_window_incl_output" and inp is None and out is None:
            kind = "context_window"  # "you requested N tokens" without the split
        if req is None and inp is not None:
            req = inp + (out or 0)
        if inp is None and req is not None and out is not None:
            inp = req - out
        over = not (kind == "tpm_per_request" and lim is not None and req is not None and req <= lim)
        return OverflowNumbers(lim, req, inp, out, kind, over, bool(m.groupdict().get("least")))
    return None


# -- 2. the general reader: numbers by the role their phrase gives them -----------------------
_N = rf"`?(?P<n>{_NUM})`?"
_ROLES: dict[str, list[str]] = {
    "limit": [
        rf"maximum(?: \w+){{0,2}} (?:length|size|window)(?: is| of)?:? (?:only )?\(?{_N}",
        rf"context (?:length|window|size|limit)(?: limit)?(?: is| of)?:?(?: only)? \(?{_N}",
        rf"{_N} maximum context length",
        rf"(?:token |configured )?limit(?: of|:)? {_N}",
        rf"(?:n_ctx|max_model_len|max_total_tokens)\W{{1,3}}(?:max_total_tokens=)?{_N}",
        rf"(?:model only supports|supports up to|must have less than|must be <=) {_N}",
        rf"(?:input|prompt) length should be \[\s*\d+\s*,\s*{_N}\s*\]",
    ],
    "input": [
        rf"(?P<least>at least )?{_N} input tokens",
        rf"{_N} tokens? (?:in|from) (?:the |your )?(?:input )?(?:messages|prompt)",
        rf"{_N} in (?:the |your )?(?:messages|prompt)",
        rf"{_N} of \w+ input",
        rf"(?:input|prompt|request)(?: length)? \({_N} tokens\)",
        rf"(?<!maximum )(?<!max )(?<!allowed )(?:input|prompt) (?:length|token count) \(?{_N}\b",
        rf"(?:request|prompt|input) contains(?P<least> at least)? {_N}",
        rf"prompt \((?:total )?length {_N}\)",
        rf"prompt (?:contains|has)(?P<least> at least)? {_N}",
        rf"prompt(?: token count)? (?:is too long|of):? {_N}",
        rf"(?:messages resulted in|keep the first) {_N}",
        rf"n_keep \({_N}\)",
        rf"given: {_N}(?! `inputs`)(?!\d)",
    ],
    "output": [
        rf"{_N} output tokens",
        rf"{_N} (?:tokens )?(?:in|for) the (?:completion|output)",
        rf"{_N} `max_new_tokens`",
        rf"max_(?:new_|completion_)?tokens'?(?: or 'max_completion_tokens')? is too large: {_N}",
        rf"max_(?:new_|completion_)?tokens={_N}",
    ],
    "total": [
        rf"you requested (?:about |a total of )?(?P<least>at least )?{_N} tokens",
        rf"total of (?P<least>at least )?{_N} tokens",
        rf"token budget {_N}",
        rf"input and (?:maximum )?output tokens \({_N}\)",
        rf"\(requested: {_N}\)",
    ],
}
_ROLE_RE = {role: [re.compile(p, re.I) for p in ps] for role, ps in _ROLES.items()}
_TOKEN_TALK = re.compile(r"token|context|n_ctx|n_keep|max_model_len|model length|"
                         r"\b(?:input|prompt)\b[^.]{0,12}length", re.I)
_INPUT_LIMIT = re.compile(r"(?:input|prompt) length should be|maximum input length|configured "
                          r"limit|maximum allowed length|must have less than", re.I)


def _first(role: str, text: str) -> tuple[int | None, bool, str]:
    """The earliest number the text gives this role: (value, "at least", the phrase)."""
    best: re.Match[str] | None = None
    for pattern in _ROLE_RE[role]:
        m = pattern.search(text)
        if m and (best is None or m.start() < best.start()):
            best = m
    if best is None:
        return None, False, ""
    return _int(best.group("n")), bool(best.groupdict().get("least")), best.group(0)


def _generic(text: str) -> OverflowNumbers | None:
    lim, _, lim_phrase = _first("limit", text)
    out, _, _ = _first("output", text)
    total, total_least, _ = _first("total", text)
    ins = [_int(m.group("n")) or 0 for m in re.finditer(rf"{_N} of \w+ input", text, re.I)]
    inp, least, _ = _first("input", text)
    if len(ins) > 1:
        inp = sum(ins)
    least = least or total_least
    if lim is None and inp is None and total is None:
        return None
    if total is not None:
        requested = total
        if inp is None and out is not None and not least:
            inp = total - out
    elif inp is not None:
        requested = inp + (out or 0)
    else:
        requested = None
    if (out is not None and requested is not None) or total is not None:
        kind = "context_window_incl_output"
    elif _INPUT_LIMIT.search(lim_phrase):
        kind = "input_window"
    else:
        kind = "context_window"
    return OverflowNumbers(lim, requested, inp, out, kind, True, least, exact=False)


def overflow_numbers(text: str, numbers: dict[str, int] | None = None) -> OverflowNumbers | None:
    """The limit and the request an overflow message states, or None when it is not one."""
    numbers = numbers or {}
    if "n_ctx" in numbers and "n_prompt_tokens" in numbers:  # llama.cpp says it structurally
        prompt = numbers["n_prompt_tokens"]
        return OverflowNumbers(numbers["n_ctx"], prompt, prompt)
    found = _from_template(text)
    if found is None and looks_like_overflow(text) and _TOKEN_TALK.search(text):
        found = _generic(text)  # only numbers said of tokens: "maximum length 2048" of an array
    return found                # must never teach a 2048-token window


STRING_TOO_LONG = re.compile(rf"expected a string with maximum length (?P<lim>{_NUM}), but got "
                             rf"a string with length (?P<req>{_NUM})", re.I)


def string_length_numbers(text: str) -> OverflowNumbers:
    m = STRING_TOO_LONG.search(text)
    lim, req = (_int(m.group("lim")), _int(m.group("req"))) if m else (None, None)
    return OverflowNumbers(lim, req, kind="message_chars")


# -- overflow wording, and the side it names -------------------------------------------------
# STRONG names the window itself; WEAK names a prompt / input / request that is too long, which a
# rate-limit text ("this request would exceed the rate limit") can say too.
_STRONG = re.compile(
    r"context[ _]?(?:length|window|size|limit)s?\b(?! ?(?:shift|cach))|maximum context|"
    r"context the overflows|max(?:imum)? model length|model token limit|\bn_ctx\b|max_model_len|"
    r"prompt is too long|prompt too long|input is too long|too many (?:input )?tokens|"
    r"reduce the length of the messages|contextwindowexceedederror|context_length_exceeded|"
    r"(?:input|prompt) length should be|`inputs` must have less than|maximum (?:\w+ )?(?:prompt|"
    r"input|context) length|exceed(?:s|ed)? (?:the |this )?(?:model'?s? )?(?:context|maximum "
    r"(?:allowed )?(?:length|number of tokens))", re.I)
_WEAK = re.compile(
    r"\b(?:prompt|input|inputs|request|messages?|conversation)\b[^.]{0,50}?\b(?:too long|too large|"
    r"longer than|larger than|greater than|more than|exceed(?:s|ed)?)\b", re.I)
_NOT_WINDOW = re.compile(r"rate.?limit|per min|per day|per hour|\b(?:tpm|rpm|tpd)\b|quota|"
                         r"tokens per|\barray\b|\bur[il]\b", re.I)  # rate limits; array, URI
_INPUT_SIDE = re.compile(
    r"\b(?:prompt|input|inputs)\b[^.]{0,50}?\b(?:too long|too large|longer than|larger than|"
    r"greater than|exceed(?:s|ed)?)\b|cannot truncate prompt|prompt too long|"
    r"request exceeds the available context|reduce the length of the (?:input )?messages\.?(?! or)",
    re.I)
_OUTPUT_SUBJECT = re.compile(r"max_(?:new_|completion_|output_)?tokens|max tokens|completion|"
                             r"output tokens", re.I)


def looks_like_overflow(text: str) -> bool:
    return bool(_STRONG.search(text) or (_WEAK.search(text) and not _NOT_WINDOW.search(text)))


def side_from_text(text: str) -> str | None:
    """The side a message without usable numbers names: "input" when it says the prompt /
    input is too long and says nothing of the completion; otherwise None."""
    m = _INPUT_SIDE.search(text)
    if not m:
        return None
    end = text.find(".", m.end())
    sentence = text[text.rfind(".", 0, m.start()) + 1:len(text) if end < 0 else end]
    return None if _OUTPUT_SUBJECT.search(sentence) else "input"


# -- output caps: configuration, not overflow ------------------------------------------------
_CAP_PATTERNS = [
    (re.compile(rf"max_tokens: {_NUM} > (?P<cap>{_NUM}), which is the maximum allowed", re.I), 0),
    (re.compile(rf"supports at most (?P<cap>{_NUM}) completion tokens", re.I), 0),
    (re.compile(rf"maxoutputtokens value of {_NUM} but the supported range is from {_NUM} "
                rf"\(inclusive\) to (?P<cap>{_NUM}) \(exclusive\)", re.I), -1),
    (re.compile(rf"max_(?:new_|completion_|output_)?tokens\W[^.\[]{{0,40}}\[\s*\d+\s*,\s*"
                rf"(?P<cap>{_NUM})\s*\]", re.I), 0),
    (re.compile(rf"max_(?:new_|completion_)?tokens.{{0,80}}?(?:less than or equal to|<=|at most) "
                rf"`?(?P<cap>{_NUM})", re.I), 0),
    (re.compile(r"max_tokens is too large|max_tokens.{0,40}(?:greater|larger) than|"
                r"maximum (?:allowed )?(?:number of )?output tokens|max tokens exceeds|"
                r"max_(?:output|completion)_tokens.{0,60}(?:too large|exceed|maximum)", re.I), 0),
]
_CAP_PARAMS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "generation_config")


def output_cap(text: str, params: list[str]) -> int | None:
    """The output-token cap a "max_tokens too large" error states: the cap, 0 when it says none,
    None when the text is not about the output cap."""
    for pattern, adjust in _CAP_PATTERNS:
        m = pattern.search(text)
        if m:
            cap = m.groupdict().get("cap")
            return _int(cap) + adjust if cap else 0
    if any(p.startswith(_CAP_PARAMS) for p in params) and re.search(r"too large|maximum|exceed", text, re.I):
        return 0
    return None


OVERFLOW_TEXT = _STRONG  # kept for callers of the old name
