"""What to cut when a provider says the request is too big (ARCHITECTURE.md, "Shrinking after an overflow").

Pure functions: each takes what would have been sent plus the `ContextOverflow` signal and
returns something smaller, or raises `CannotShrink` when cutting more would leave nothing worth
sending. `core.overflow.recovery` runs them in a bounded loop.

- researcher transcript: drop the last AI turn and everything after it (the seed's rule), but
  keep the system prompt, the brief and the compression instruction, never split a tool call from
  its results, and keep at least one round; then fall back to cutting long tool results.
- findings for the report: the seed's 4 × window characters then × 0.9 per overflow, but when the
  error states limit and requested, one proportional cut to what fits, after budgeting for the
  prompt around the findings and the output tokens. Whole findings go, least-supported first, so
  the evidence left is exactly the evidence rendered and cited.
- output-side overflow (the prompt fits, prompt + max_tokens does not): lower max_tokens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Sequence

from core.overflow.compaction import head_length, tail_start, truncate_tool_results
from core.models import Finding, Message
from core.reports.report import evidence_catalog
from core.signals import ContextOverflow
from core.overflow.tokens import content_bytes

SAFETY_MARGIN = 0.05  # token counts differ between our estimate, the error text and the next call
SEED_CHARS_PER_TOKEN = 4.0  # open_deep_research's "4 × limit characters"
SEED_STEP = 0.9
MIN_TOOL_RESULT_CHARS = 1_500  # below this a tool result says too little to keep shrinking it
_OUTPUT_COUNTED = ("context_window_incl_output", "tpm_per_request")
_INPUT_ONLY = ("input_window", "message_chars", "request_bytes")
_SENTENCE_END = re.compile(r"[.!?。！？;；](?=\s|$|[^\x00-\x7f])")


class CannotShrink(Exception):
    """Nothing more can be cut without losing what the call is for."""


# --- the numbers in the signal ----------------------------------------------------------------

def input_fit(signal: ContextOverflow | None, max_output_tokens: int, *,
              margin: float = SAFETY_MARGIN) -> tuple[int, int] | None:
    """(input size now, input size that fits) in the signal's units, or None without numbers.

    `requested` counts the output tokens for *_incl_output and tpm_per_request (a per-minute
    budget covers input + max_tokens), so the input is requested - output. For context_window
    (and unknown kinds) requested is the prompt alone, but the window must also hold the answer,
    so the output is reserved from the limit. input_window, message_chars and request_bytes limit
    the input only. A safety margin comes off what fits.
    """
    if signal is None or not signal.limit or not signal.requested:
        return None
    kind = signal.limit_kind
    if kind in _OUTPUT_COUNTED:
        out = signal.output_tokens if signal.output_tokens is not None else max_output_tokens
        now = signal.input_tokens or max(1, signal.requested - out)
        allowed = signal.limit - max_output_tokens
    elif kind in _INPUT_ONLY:
        now, allowed = signal.input_tokens or signal.requested, signal.limit
    else:
        now = signal.input_tokens or signal.requested
        allowed = signal.limit - max_output_tokens
    return now, int(allowed * (1 - margin))


def lower_max_tokens(signal: ContextOverflow | None, current_max_tokens: int, *,
                     window: int | None = None, min_output_tokens: int = 1024) -> int | None:
    """A smaller max_tokens that fits beside the prompt, or None when lowering cannot help.

    Only for output-side overflows: the provider's numbers show the prompt alone fits and the
    room left is at least `min_output_tokens` (a tinier answer is worse than a shorter prompt).
    """
    if signal is None or signal.limit_kind in _INPUT_ONLY:
        return None
    limit = signal.limit or window
    if not limit:
        return None
    if signal.limit_kind in _OUTPUT_COUNTED:
        out = signal.output_tokens if signal.output_tokens is not None else current_max_tokens
        prompt = signal.input_tokens or (signal.requested - out if signal.requested else None)
    else:
        prompt = signal.input_tokens or signal.requested
    if prompt is None:
        return None
    room = limit - prompt - max(16, limit // 200)
    if room < min_output_tokens or room >= current_max_tokens:
        return None
    return room


# --- researcher transcripts -------------------------------------------------------------------

def drop_last_ai_turn(messages: Sequence[Message], *, keep_rounds: int = 1) -> list[Message]:
    """The messages without their last AI turn and what followed it (protected ones kept).

    Protected: leading system messages, the first user message (the brief), and trailing user
    messages (the compression instruction), which the seed dropped along with the last turn.
    The cut lands on an AI turn whose tool calls and results all fall on one side. Raises
    `CannotShrink` when no more than `keep_rounds` AI turns would remain: compressing nothing
    is worthless, so the caller cuts tool results instead.
    """
    head, tail = head_length(messages), tail_start(messages)
    body = list(messages[head:tail])
    turns = [i for i, m in enumerate(body) if m.role == "assistant"]
    k = len(turns) - 1
    while k >= keep_rounds:
        cut = turns[k]
        called = {c.id for m in body[cut:] for c in m.tool_calls}
        if all(m.tool_call_id in called for m in body[cut:] if m.role == "tool"):
            return list(messages[:head]) + body[:cut] + list(messages[tail:])
        k -= 1  # a result after the cut answers an earlier call: cut earlier
    raise CannotShrink(f"only {len(turns)} AI turn(s) left to compress")


def shrink_transcript(messages: Sequence[Message], signal: ContextOverflow | None, *,
                      max_output_tokens: int, spill_dir: Path | None = None,
                      min_tool_chars: int = MIN_TOOL_RESULT_CHARS) -> list[Message]:
    """One shrinking step for a researcher transcript.

    Without numbers: drop the last AI turn (open_deep_research's rule). With limit and requested the size must
    fall by the ratio that fits: when that is reachable by cutting only tool results longer than
    the median one (a page that extracted into far too much text), those are cut head + tail to
    fit and every round stays; otherwise whole turns go, last first, as in the seed. When only
    one round is left, its longest tool results are cut (full text spilled to `spill_dir`).
    """
    fit = input_fit(signal, max_output_tokens)
    size = content_bytes(list(messages))
    target = size * fit[1] / fit[0] if fit else None
    out = list(messages)
    if target is not None:
        tools = sorted(len(m.content) for m in out if m.role == "tool")
        median = tools[(len(tools) - 1) // 2] if tools else 0
        cap = _largest_cap(out, target, max(min_tool_chars, median + 1), spill_dir)
        if cap is not None:
            return truncate_tool_results(out, cap, spill_dir)
    while True:
        try:
            out = drop_last_ai_turn(out)
        except CannotShrink:
            break
        if target is None or content_bytes(out) <= target:
            return out
    longest = max((len(m.content) for m in out if m.role == "tool"), default=0)
    if target is not None:
        cap = _largest_cap(out, target, min_tool_chars, spill_dir)
        out = truncate_tool_results(out, cap if cap is not None else min_tool_chars, spill_dir)
        if content_bytes(out) < size:
            return out  # if not small enough, the next call tells us more
        raise CannotShrink(f"no AI turn left to drop and no tool result above "
                           f"{min_tool_chars} chars")
    cap = longest // 2
    if cap >= min_tool_chars:
        return truncate_tool_results(out, cap, spill_dir)
    raise CannotShrink(f"no AI turn left to drop and no tool result above {min_tool_chars} chars")


def fit_tool_results(messages: Sequence[Message], target_bytes: float, *,
                     lowest: int = MIN_TOOL_RESULT_CHARS // 3,
                     spill_dir: Path | None = None) -> list[Message] | None:
    """The messages with every tool result cut head + tail to the largest cap that fits
    `target_bytes`, or None when even `lowest` characters each would not fit."""
    cap = _largest_cap(list(messages), target_bytes, lowest, spill_dir)
    return None if cap is None else truncate_tool_results(messages, cap, spill_dir)


def _largest_cap(messages: list[Message], target: float, lowest: int,
                 spill_dir: Path | None) -> int | None:
    """The largest tool-result cap >= `lowest` that brings the messages within `target` bytes.

    Searched without spilling (the spill note names a path, so it is a little longer: that
    slack comes off the target), so no file is written for a cap that is not used.
    """
    longest = max((len(m.content) for m in messages if m.role == "tool"), default=0)
    if longest <= lowest:
        return None
    slack = 256 * sum(1 for m in messages if m.role == "tool") if spill_dir is not None else 0

    def fits(cap: int) -> bool:
        return content_bytes(truncate_tool_results(messages, cap)) <= target - slack

    if not fits(lowest):
        return None
    lo, hi = lowest, longest  # fits(lo); the whole transcript (cap = longest) does not
    while hi - lo > 64:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


# --- findings for the report ----------------------------------------------------------------

def render_findings(findings: Sequence[Finding]) -> str:
    """The findings as the report prompt carries them, each quote under its catalogue key.

    Keys come from `core.reports.report.evidence_catalog`, so the prompt, the budget and the
    reference numbering all see the same evidence.
    """
    return "\n\n".join(finding_blocks(findings))


def finding_blocks(findings: Sequence[Finding]) -> list[str]:
    """`render_findings` one finding at a time (keys still numbered across all of them), for
    a report written section by section."""
    keys = iter(key for key, _ in evidence_catalog(findings))
    parts = []
    for f in findings:
        lines = [f"### Sub-question {f.subquestion_index + 1}: {f.subquestion}"]
        for claim in f.claims:
            lines.append(f"- ({claim.confidence}) {claim.text}")
            for ev in claim.evidence:
                lines.append(f"  [{next(keys)}] \"{ev.quote}\" — {ev.title} <{ev.url}>")
            if not claim.evidence:
                lines.append("  (no quoted evidence)")
        parts.append("\n".join(lines))
    return parts


def window_budget_chars(window: int, *, prompt_overhead_tokens: int, max_output_tokens: int,
                        chars_per_token: float = SEED_CHARS_PER_TOKEN,
                        margin: float = SAFETY_MARGIN) -> int:
    """Characters of findings that fit a window beside the rest of the prompt and the output."""
    tokens = window * (1 - margin) - prompt_overhead_tokens - max_output_tokens
    return max(0, int(tokens * chars_per_token))


def findings_budget_chars(signal: ContextOverflow | None, current_chars: int, *,
                          window: int | None, prompt_overhead_tokens: int,
                          max_output_tokens: int, chars_per_token: float = SEED_CHARS_PER_TOKEN,
                          margin: float = SAFETY_MARGIN) -> int:
    """How many characters of rendered findings to send after this overflow.

    With limit and requested (see `input_fit`): the findings are the prompt minus its overhead,
    so findings_now = input_now - overhead and findings_fit = input_fit - overhead, and the new
    size is current_chars × findings_fit / findings_now — the provider's own count of this text
    sets the ratio. Without them (open_deep_research's rule): (window - overhead - output) × chars_per_token
    (chars_per_token = 4 and no overhead is the seed's 4 × limit), then × 0.9 per overflow. The
    result is always at most 0.9 × current_chars, so every overflow makes progress.
    """
    step = int(current_chars * SEED_STEP)
    fit = input_fit(signal, max_output_tokens, margin=margin)
    if fit is not None and signal is not None and signal.limit_kind in ("message_chars",
                                                                        "request_bytes"):
        return min(step, int(current_chars * fit[1] / fit[0]))
    if fit is not None:
        now, fits = fit
        findings_now, findings_fit = now - prompt_overhead_tokens, fits - prompt_overhead_tokens
        if findings_fit <= 0:
            return 0
        if findings_now > 0:
            return min(step, int(current_chars * findings_fit / findings_now))
        return min(step, int(findings_fit * chars_per_token))
    limit = (signal.limit if signal is not None and signal.limit else None) or window
    if limit:
        return min(step, window_budget_chars(limit, prompt_overhead_tokens=prompt_overhead_tokens,
                                             max_output_tokens=max_output_tokens,
                                             chars_per_token=chars_per_token, margin=margin))
    return step


def fit_findings(findings: Sequence[Finding], max_chars: int,
                 render: Callable[[Sequence[Finding]], str] = render_findings) -> list[Finding]:
    """The findings whose rendering fits `max_chars`, cutting whole findings first.

    The least-supported finding goes first (ties: the later sub-question), and the survivors
    keep their order. Only when one finding alone is too big are its weakest claims, extra quotes
    and then sentences cut (quotes keep a verbatim prefix). Raises `CannotShrink` when not even a
    trimmed single claim fits.
    """
    alive = list(findings)
    if len(render(alive)) <= max_chars:
        return alive
    for victim in sorted(range(len(findings)), key=lambda i: (findings[i].support, -i)):
        if len(alive) == 1:
            break
        alive.remove(findings[victim])
        if len(render(alive)) <= max_chars:
            return _refill(findings, alive, findings[victim], max_chars, render)
    if not alive:
        return alive
    return [_fit_one(alive[0], max_chars, render)]


def _refill(findings: Sequence[Finding], alive: list[Finding], last: Finding, max_chars: int,
            render: Callable[[Sequence[Finding]], str]) -> list[Finding]:
    """`alive` plus the quoted claims of `last` (the best finding cut) that fit the room left.

    Whole findings overshoot: with five findings, dropping one can free a fifth of the window
    more than needed. The room goes back to `last`'s best-supported claims, trimmed like a lone
    finding; claims without quotes add nothing citable, so they are not brought back.
    """
    quoted = tuple(c for c in last.claims if c.evidence)
    if not quoted:
        return alive
    order = {id(f): i for i, f in enumerate(findings)}

    def with_part(part: Sequence[Finding]) -> list[Finding]:
        return sorted([*alive, *part], key=lambda f: order.get(id(f), order[id(last)]))

    try:
        part = _fit_one(last.model_copy(update={"claims": quoted}), max_chars,
                        lambda fs: render(with_part(fs)))
    except CannotShrink:
        return alive
    return with_part([part])


def _fit_one(finding: Finding, max_chars: int,
             render: Callable[[Sequence[Finding]], str]) -> Finding:
    def size(f: Finding) -> int:
        return len(render([f]))

    claims = list(finding.claims)
    order = sorted(range(len(claims)), key=lambda i: (len(claims[i].evidence), -i))
    for i in order[:-1]:  # weakest claims first, keep at least one
        if size(finding.model_copy(update={"claims": tuple(claims)})) <= max_chars:
            break
        claims.remove(finding.claims[i])
    f = finding.model_copy(update={"claims": tuple(claims)})
    for _ in range(64):  # bounded: each pass shortens one field or drops one quote
        over = size(f) - max_chars
        if over <= 0:
            return f
        f = _shorten(f, over)
        if f is None:
            break
    raise CannotShrink(f"a single finding does not fit in {max_chars} characters")


def _shorten(f: Finding, over: int) -> Finding | None:
    """`f` with its extra quotes dropped, else its longest text cut by `over` chars, or None."""
    claims = list(f.claims)
    for i, c in enumerate(claims):
        if len(c.evidence) > 1:
            claims[i] = c.model_copy(update={"evidence": c.evidence[:-1]})
            return f.model_copy(update={"claims": tuple(claims)})
    fields: list[tuple[int, int, int | None]] = [(len(c.text), i, None)
                                                 for i, c in enumerate(claims)]
    fields += [(len(ev.quote), i, j) for i, c in enumerate(claims)
               for j, ev in enumerate(c.evidence)]
    if not fields:  # a finding without claims has nothing left to shorten
        return None
    length, i, j = max(fields, key=lambda field: field[0])
    if length <= 16:
        return None
    new = trim_at_sentence(claims[i].text if j is None else claims[i].evidence[j].quote,
                           max(16, length - over))
    if len(new) >= length:
        return None
    c = claims[i]
    if j is None:
        claims[i] = c.model_copy(update={"text": new})
    else:
        evidence = list(c.evidence)
        evidence[j] = evidence[j].model_copy(update={"quote": new})
        claims[i] = c.model_copy(update={"evidence": tuple(evidence)})
    return f.model_copy(update={"claims": tuple(claims)})


def trim_at_sentence(text: str, max_chars: int) -> str:
    """The longest prefix of whole sentences within `max_chars`; else cut at a word boundary.

    Sentences end at . ! ? ; and their CJK forms. A prefix stays a verbatim substring, so a
    trimmed quote still matches its source.
    """
    if len(text) <= max_chars:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, max_chars + 1) if m.end() <= max_chars]
    if ends:
        return text[:ends[-1]]
    space = text.rfind(" ", 0, max_chars + 1)
    return text[:space].rstrip() if space > max_chars // 2 else text[:max_chars]

