"""Two-level context compaction for researcher transcripts (ARCHITECTURE.md, "Compaction before a call").

1. Cheap level: a tool result longer than a cap keeps its head and tail around an omission note;
   the full text is spilled to a file named by its content hash, and the note says where.
2. Expensive level: older turns are summarized into one checkpoint message while the newest
   turns stay verbatim. The cut point never separates a tool call from its results. An existing
   checkpoint is *updated* with the turns that aged out since, never re-summarized with them
   (summaries of summaries drift). The summarizer's own input has a budget — the first message
   plus the newest messages that fit, with one line saying what was omitted — and the budget is
   halved on each failure, because "the history to summarize is itself too big" is the usual
   reason a summary call fails.

Protected everywhere: the leading system messages, the first user message (the research brief),
and a trailing run of user messages after the last AI turn (the compression instruction).

This module decides what to cut; it never calls a model itself (`summarize` is passed in) and
never imports Prefect. Shrinking after a provider's overflow error lives in `core.overflow.shrink`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from core.models import Message
from core.signals import Fatal, RateLimited
from core.overflow.tokens import TokenEstimator

CHECKPOINT_NAME = "checkpoint"
CHECKPOINT_OPEN, CHECKPOINT_CLOSE = "<checkpoint>", "</checkpoint>"
OMISSION_NAME = "omission"
MIN_SUMMARY_BUDGET_TOKENS = 256  # below this a summary input holds nothing useful
PER_MESSAGE_SUMMARY_CHARS = 8_000  # one huge tool result must not eat the whole budget

# summarize(messages to summarize, existing checkpoint text or None) -> new checkpoint text
Summarize = Callable[[list[Message], "str | None"], str]


class CompactionFailed(Exception):
    """Every summarizer attempt failed, even with the smallest input budget."""


# --- level 1: long tool results ------------------------------------------------------------

def spill_text(text: str, spill_dir: Path) -> Path:
    """Write `text` to `spill_dir/<sha256>.txt` once (same text, same file) and return its path."""
    spill_dir.mkdir(parents=True, exist_ok=True)
    path = (spill_dir / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()[:24]}.txt").resolve()
    if not path.exists():
        # Write then rename, so a concurrent reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=spill_dir, prefix=".spill-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return path


def _omission_note(omitted: int, path: Path | None) -> str:
    if path is None:
        return (f"\n[... {omitted} chars omitted; rerun the tool with a narrower query "
                f"for more ...]\n")
    return f"\n[... {omitted} chars omitted; full text at {path} ...]\n"


def truncate_tool_result(text: str, cap_chars: int, spill_dir: Path | None = None) -> str:
    """`text` if it fits in `cap_chars`, else head + omission note + tail within the cap.

    Head and tail both survive because a page's conclusion, a table's totals or an error's last
    line sit at the end. The result is at most `cap_chars` long whenever the cap can hold the
    note itself. Truncating the result again with the same cap changes nothing.
    """
    if len(text) <= cap_chars:
        return text
    path: Path | None = None
    if spill_dir is not None:
        try:
            path = spill_text(text, spill_dir)
        except OSError:
            path = None  # a full disk must not fail the research: fall back to the plain note
    room = max(0, cap_chars - len(_omission_note(len(text), path)))
    head_n = room // 2
    tail_n = room - head_n
    omitted = len(text) - head_n - tail_n
    return text[:head_n] + _omission_note(omitted, path) + (text[-tail_n:] if tail_n else "")


def truncate_tool_results(messages: Sequence[Message], cap_chars: int,
                          spill_dir: Path | None = None) -> list[Message]:
    """The messages with every tool result cut to `cap_chars` (others untouched)."""
    out = []
    for m in messages:
        if m.role == "tool" and len(m.content) > cap_chars:
            cut = truncate_tool_result(m.content, cap_chars, spill_dir)
            m = m.model_copy(update={"content": cut})
        out.append(m)
    return out


# --- structure: protected messages, tool rounds, safe cut points ------------------------------

def head_length(messages: Sequence[Message]) -> int:
    """How many leading messages are protected: the system messages and the first user message."""
    i = 0
    while i < len(messages) and messages[i].role == "system":
        i += 1
    if i < len(messages) and messages[i].role == "user" and not is_checkpoint(messages[i]):
        i += 1
    return i


def tail_start(messages: Sequence[Message]) -> int:
    """Where the protected trailing user messages (the compression instruction) begin."""
    head = head_length(messages)
    i = len(messages)
    while i > head and messages[i - 1].role in ("user", "system") \
            and not is_checkpoint(messages[i - 1]) and messages[i - 1].name != OMISSION_NAME:
        i -= 1
    return i


def pairing_is_valid(messages: Sequence[Message]) -> bool:
    """True when every tool call is answered right after its AI turn and no result is orphaned.

    This is what chat APIs require: an assistant message with tool_calls is followed by exactly
    one tool message per call id before anything else.
    """
    pending: set[str] = set()
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id not in pending:
                return False
            pending.discard(m.tool_call_id)
            continue
        if pending:
            return False
        if m.role == "assistant":
            pending = {c.id for c in m.tool_calls}
    return not pending


def safe_cut(messages: Sequence[Message], keep_recent: int) -> int:
    """Index splitting `messages` into (summarized, kept verbatim), keeping about `keep_recent`.

    Seed 003's compactCut: start at len - keep_recent and move forward past tool results and past
    an AI turn with tool calls (with its results), so the summarized part never ends on a
    dangling call and the kept part never starts with an orphaned result.
    """
    cut = max(0, len(messages) - keep_recent)
    while cut < len(messages):
        m = messages[cut]
        if m.role == "tool":
            cut += 1
        elif m.role == "assistant" and m.tool_calls:
            cut += 1
            while cut < len(messages) and messages[cut].role == "tool":
                cut += 1
        else:
            break
    return cut


# --- level 2: checkpoints ----------------------------------------------------------------

def checkpoint_message(summary: str) -> Message:
    return Message(role="user", name=CHECKPOINT_NAME,
                   content=f"{CHECKPOINT_OPEN}\nSummary of the earlier research turns:\n\n"
                           f"{summary.strip()}\n{CHECKPOINT_CLOSE}")


def is_checkpoint(m: Message) -> bool:
    return m.name == CHECKPOINT_NAME and m.content.startswith(CHECKPOINT_OPEN)


def checkpoint_text(m: Message) -> str:
    """The summary inside a checkpoint message, without its wrapper."""
    body = m.content.removeprefix(CHECKPOINT_OPEN).removesuffix(CHECKPOINT_CLOSE).strip()
    return body.removeprefix("Summary of the earlier research turns:").strip()


def render_for_summary(messages: Sequence[Message]) -> str:
    """Messages flattened to plain text, the form a summarizer prompt should carry them in.

    Plain text never trips a chat API's tool-pairing rules, whatever the budget cut off.
    """
    lines = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"[tool result {m.tool_call_id}]: {m.content}")
        elif m.name == OMISSION_NAME:
            lines.append(m.content)
        else:
            lines.append(f"[{m.role}]: {m.content}".rstrip())
            for c in m.tool_calls:
                lines.append(f"  -> tool call {c.id} {c.name} {c.arguments}")
    return "\n".join(lines)


def _clip(m: Message, max_chars: int) -> Message:
    if len(m.content) <= max_chars:
        return m
    return m.model_copy(update={"content": m.content[:max(0, max_chars)] + "…[truncated]"})


def omission_line(count: int) -> Message:
    return Message(role="user", name=OMISSION_NAME,
                   content=f"[... {count} earlier messages omitted to fit the summarizer's input "
                           f"budget ...]")


def summarizer_input(messages: Sequence[Message], budget_tokens: int,
                     estimator: TokenEstimator | None = None, *, model: str | None = None,
                     per_message_chars: int = PER_MESSAGE_SUMMARY_CHARS) -> list[Message]:
    """The first message + the newest messages that fit `budget_tokens`, and one omission line.

    The first message is the research brief a checkpoint most needs; the newest are the freshest
    state. Skipping the middle silently would make a summary look complete when it is not, so
    the omission line says how many messages were left out. The kept newest part starts at a
    safe point (never an orphaned tool result).
    """
    est = estimator or TokenEstimator()
    msgs = [_clip(m, per_message_chars) for m in messages]
    if not msgs or est.estimate(msgs, model=model) <= budget_tokens:
        return msgs
    first = msgs[0]
    first_budget = max(1, budget_tokens - est.estimate(omission_line(len(msgs)), model=model))
    if est.estimate(first, model=model) > first_budget:
        ratio = first_budget / est.estimate(first, model=model)
        first = _clip(first, int(len(first.content) * ratio * 0.95) - 16)
    used = est.estimate([first, omission_line(len(msgs))], model=model)
    start = len(msgs)
    for i in range(len(msgs) - 1, 0, -1):
        cost = est.estimate(msgs[i], model=model)
        if used + cost > budget_tokens:
            break
        used += cost
        start = i
    while start < len(msgs) and msgs[start].role == "tool":
        start += 1  # its call was omitted: a lone result reads as noise
    omitted = start - 1
    return [first] + ([omission_line(omitted)] if omitted else []) + msgs[start:]


def _summarize_within_budget(context: list[Message], aged: list[Message], prior: str | None,
                             summarize: Summarize, budget_tokens: int, est: TokenEstimator,
                             model: str | None, max_attempts: int,
                             log: Callable[[str], None]) -> str:
    budget = budget_tokens
    last: BaseException | None = None
    for attempt in range(1, max_attempts + 1):
        # An update carries the old checkpoint too: the history gets what remains.
        prior_tokens = est.estimate(prior, model=model) if prior else 0
        room = max(MIN_SUMMARY_BUDGET_TOKENS, budget - prior_tokens)
        batch = summarizer_input(context + aged, room, est, model=model)
        try:
            text = summarize(batch, prior).strip()
        except (Fatal, RateLimited):
            raise  # a smaller input cannot fix auth, billing or quota: let the caller handle it
        except Exception as exc:  # noqa: BLE001 - any other summarizer failure: shrink and retry
            last = exc
            text = ""
        else:
            if not text:
                last = CompactionFailed("the summarizer returned an empty checkpoint")
        if text:
            return text
        if attempt < max_attempts:
            budget = max(MIN_SUMMARY_BUDGET_TOKENS, budget // 2)
            log(f"compaction: summary attempt {attempt}/{max_attempts} failed ({last}); "
                f"input budget halved to {budget} tokens")
    raise CompactionFailed(f"could not summarize {len(aged)} messages in {max_attempts} attempts "
                           f"(last input budget {budget} tokens): {last}") from last


def compact_transcript(messages: Sequence[Message], *, keep_recent: int, summarize: Summarize,
                       budget_tokens: int, estimator: TokenEstimator | None = None,
                       model: str | None = None, max_attempts: int = 3,
                       log: Callable[[str], None] = lambda _: None) -> list[Message]:
    """[protected head, checkpoint, newest ~keep_recent messages verbatim, protected tail].

    Messages older than the safe cut point are summarized; if a checkpoint already follows the
    head it is updated with them (`summarize(aged, old_text)`), else one is created
    (`summarize(aged, None)`). `summarize` receives the brief first and at most `budget_tokens`
    of input (see `summarizer_input`); a good budget is half the compaction threshold, so a
    summary request fits whenever the real call would have. When there are no more than
    `keep_recent` messages the whole middle is summarized (the fallback when no safe cut is left). Raises
    `CompactionFailed` if every attempt fails; the messages passed in are never modified.
    """
    if budget_tokens <= 0:
        raise ValueError("budget_tokens must be positive")
    est = estimator or TokenEstimator()
    head, tail = head_length(messages), tail_start(messages)
    start, prior = head, None
    if start < tail and is_checkpoint(messages[start]):
        prior = checkpoint_text(messages[start])
        start += 1
    body = list(messages[start:tail])
    cut = len(body) if len(body) <= keep_recent else safe_cut(body, keep_recent)
    aged, kept = body[:cut], body[cut:]
    if not aged and prior is None:
        return list(messages)
    context = [m for m in messages[:head] if m.role == "user"]
    summary = _summarize_within_budget(context, aged, prior, summarize, budget_tokens, est, model,
                                       max_attempts, log)
    log(f"compaction: {len(aged)} messages {'merged into the' if prior else 'summarized into a'} "
        f"checkpoint, {len(kept)} kept verbatim")
    return list(messages[:head]) + [checkpoint_message(summary)] + kept + list(messages[tail:])
