"""Compaction (ARCHITECTURE.md, "Compaction before a call"): tool-result truncation with spill files, checkpoints, summarizer budget.

The transcript builders at the top are shared with test_shrink.py and test_recovery.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from core.overflow.compaction import (CHECKPOINT_OPEN, CompactionFailed, checkpoint_message,
                             checkpoint_text, compact_transcript, head_length, is_checkpoint,
                             pairing_is_valid, render_for_summary, safe_cut,
                             summarizer_input, tail_start, truncate_tool_result,
                             truncate_tool_results)
from core.models import Message, ToolCall
from core.signals import ContextOverflow, Fatal, RateLimited
from core.overflow.tokens import TokenEstimator

SYSTEM = Message(role="system", content="You are a careful researcher.")
BRIEF = Message(role="user", content="Research brief: how do lithium-ion batteries degrade?")
INSTRUCTION = Message(role="user", content="Clean up these findings into a compressed summary, "
                                           "keeping every quote verbatim.")
ZH_TEXT = "锂离子电池在高温下容量衰减更快。循环次数增加时，固体电解质界面膜会持续增厚。"


def research_round(i: int, calls: int, size: int = 400, chinese: bool = False) -> list[Message]:
    """One AI turn calling `calls` tools (or none), followed by one result per call."""
    text = (ZH_TEXT if chinese else "Capacity fades faster at high temperature. ") * (size // 30 + 1)
    if not calls:
        return [Message(role="assistant", content=f"round {i}: thinking. " + text[:size])]
    ids = [f"r{i}c{j}" for j in range(calls)]
    turn = Message(role="assistant", content=f"round {i}: searching",
                   tool_calls=tuple(ToolCall(id=c, name="search", arguments={"q": f"q{i}{c}"})
                                    for c in ids))
    return [turn] + [Message(role="tool", tool_call_id=c, name="search",
                             content=f"[{c}] " + text[:size]) for c in ids]


def transcript(rounds: int, *, seed: int = 0, chinese: bool = False, instruction: bool = True,
               system: bool = True, max_calls: int = 3) -> list[Message]:
    rng = random.Random(seed)
    msgs = ([SYSTEM] if system else []) + [BRIEF]
    for i in range(rounds):
        msgs += research_round(i, rng.randint(0, max_calls), rng.randint(50, 3000), chinese)
    return msgs + ([INSTRUCTION] if instruction else [])


# --- level 1 --------------------------------------------------------------------------------

def test_short_result_untouched(tmp_path: Path) -> None:
    assert truncate_tool_result("short", 100, tmp_path) == "short"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["A" * 5000 + "MIDDLE" + "Z" * 5000,
                                  ZH_TEXT * 300, ("line\n" * 2000) + "exit code 1"])
def test_long_result_keeps_head_tail_and_spills(tmp_path: Path, text: str) -> None:
    out = truncate_tool_result(text, 1000, tmp_path / "spill")
    assert len(out) <= 1000
    assert text.startswith(out.split("\n[...")[0])
    assert text.endswith(out.rsplit("...]\n", 1)[1])
    note = out[out.index("[..."):out.index("...]") + 4]
    path = Path(note.split("full text at ")[1].removesuffix(" ...]"))
    assert path.read_text(encoding="utf-8") == text  # the full text, recoverable
    omitted = int(note.split()[1])
    assert omitted == len(text) - len(out) + len(note) + 2  # two newlines around the note
    # Idempotent: cutting again changes nothing; the same text spills to the same file.
    assert truncate_tool_result(out, 1000, tmp_path / "spill") == out
    assert truncate_tool_result(text, 1000, tmp_path / "spill") == out
    assert len(list((tmp_path / "spill").iterdir())) == 1


def test_without_spill_dir_note_says_how_to_get_more() -> None:
    out = truncate_tool_result("x" * 3000, 500)
    assert len(out) <= 500 and "omitted" in out and "full text at" not in out


def test_unwritable_spill_dir_falls_back(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = truncate_tool_result("y" * 3000, 500, blocker / "spill")
    assert "omitted" in out and "full text at" not in out


def test_truncate_tool_results_only_touches_tool_messages(tmp_path: Path) -> None:
    msgs = [BRIEF.model_copy(update={"content": "b" * 5000})] + research_round(0, 2, 5000)
    out = truncate_tool_results(msgs, 800, tmp_path)
    assert out[0] == msgs[0] and out[1] == msgs[1]
    assert all(len(m.content) <= 800 for m in out if m.role == "tool")
    assert [m.tool_call_id for m in out] == [m.tool_call_id for m in msgs]
    assert pairing_is_valid(out[1:])


# --- structure ------------------------------------------------------------------------------

def test_protected_head_and_tail() -> None:
    msgs = transcript(3)
    assert head_length(msgs) == 2
    assert tail_start(msgs) == len(msgs) - 1
    assert head_length([BRIEF]) == 1 and tail_start([BRIEF]) == 1
    assert head_length([SYSTEM, SYSTEM]) == 2
    no_instruction = transcript(3, instruction=False)
    assert tail_start(no_instruction) == len(no_instruction)


def test_pairing_validity() -> None:
    call, res = research_round(0, 1)
    assert pairing_is_valid([call, res])
    assert not pairing_is_valid([call])  # dangling call
    assert not pairing_is_valid([res])  # orphaned result
    assert not pairing_is_valid([call, BRIEF, res])  # result not right after its call


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("keep", [0, 1, 2, 5, 10])
def test_safe_cut_never_splits_a_tool_round(seed: int, keep: int) -> None:
    body = transcript(8, seed=seed, system=False, instruction=False)[1:]
    cut = safe_cut(body, keep)
    assert cut >= len(body) - keep
    assert pairing_is_valid(body[:cut]) and pairing_is_valid(body[cut:])


# --- summarizer input -------------------------------------------------------------------------

def test_summarizer_input_within_budget_returns_everything() -> None:
    msgs = transcript(2, seed=1)
    assert summarizer_input(msgs, 10**6) == msgs


@pytest.mark.parametrize("chinese", [False, True])
@pytest.mark.parametrize("budget", [300, 1000, 3000])
def test_summarizer_input_first_plus_newest_with_omission(chinese: bool, budget: int) -> None:
    est = TokenEstimator()
    msgs = transcript(12, seed=3, chinese=chinese)
    out = summarizer_input(msgs, budget, est)
    assert est.estimate(out) <= budget
    assert out[0].content == msgs[0].content
    assert "omitted" in out[1].content
    omitted = int(out[1].content.split()[1])
    newest = out[2:]
    assert newest == msgs[len(msgs) - len(newest):]  # a verbatim suffix
    assert omitted + 1 + len(newest) == len(msgs)
    assert not newest or newest[0].role != "tool"


def test_summarizer_input_clips_a_huge_first_message() -> None:
    est = TokenEstimator()
    msgs = [BRIEF.model_copy(update={"content": ZH_TEXT * 2000})] + research_round(0, 1, 200)
    out = summarizer_input(msgs, 500, est, per_message_chars=10**9)
    assert est.estimate(out) <= 500 and out[0].content.endswith("…[truncated]")


# --- checkpoints ------------------------------------------------------------------------------

class Recorder:
    """A summarizer that records its inputs; `fail` makes its first calls raise."""

    def __init__(self, fail: list[BaseException] | None = None) -> None:
        self.calls: list[tuple[list[Message], str | None]] = []
        self.fail = list(fail or [])

    def __call__(self, msgs: list[Message], prior: str | None) -> str:
        self.calls.append((msgs, prior))
        if self.fail:
            raise self.fail.pop(0)
        return f"summary #{len(self.calls)} of {len(msgs)} messages (prior: {bool(prior)})"


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("chinese", [False, True])
def test_compaction_shape_and_invariants(seed: int, chinese: bool) -> None:
    msgs = transcript(10, seed=seed, chinese=chinese)
    summarize = Recorder()
    out = compact_transcript(msgs, keep_recent=6, summarize=summarize, budget_tokens=4000)
    assert out[:2] == msgs[:2] and out[-1] == INSTRUCTION  # brief and instruction survive
    assert is_checkpoint(out[2]) and out[2].content.startswith(CHECKPOINT_OPEN)
    kept = out[3:-1]
    assert kept == msgs[len(msgs) - 1 - len(kept):-1]  # newest verbatim
    assert len(kept) <= 6
    assert pairing_is_valid(out[2:-1])
    (given, prior), = summarize.calls
    assert prior is None and given[0] == BRIEF


def test_existing_checkpoint_is_updated_not_resummarized() -> None:
    msgs = transcript(10, seed=4)
    first = compact_transcript(msgs, keep_recent=4, summarize=Recorder(), budget_tokens=4000)
    grown = first[:-1] + research_round(20, 2) + research_round(21, 1) + [INSTRUCTION]
    summarize = Recorder()
    second = compact_transcript(grown, keep_recent=4, summarize=summarize, budget_tokens=4000)
    (given, prior), = summarize.calls
    assert prior == checkpoint_text(first[2])  # the old checkpoint text, unwrapped
    assert not any(is_checkpoint(m) for m in given)  # never summarized as a message
    assert sum(is_checkpoint(m) for m in second) == 1
    assert second[2].content.count(CHECKPOINT_OPEN) == 1
    assert second[-1] == INSTRUCTION and pairing_is_valid(second[3:-1])


def test_short_transcript_is_summarized_whole_and_instruction_kept() -> None:
    msgs = transcript(1, seed=2, max_calls=1)
    out = compact_transcript(msgs, keep_recent=10, summarize=Recorder(), budget_tokens=2000)
    assert out == msgs[:2] + [out[2], INSTRUCTION] and is_checkpoint(out[2])


def test_nothing_to_compact_returns_input() -> None:
    msgs = [SYSTEM, BRIEF, INSTRUCTION]
    summarize = Recorder()
    assert compact_transcript(msgs, keep_recent=4, summarize=summarize, budget_tokens=100) == msgs
    assert summarize.calls == []


def test_failures_halve_the_budget_then_succeed() -> None:
    est = TokenEstimator()
    msgs = transcript(14, seed=5)
    summarize = Recorder(fail=[ContextOverflow("too long"), TimeoutError("gateway")])
    logs: list[str] = []
    out = compact_transcript(msgs, keep_recent=4, summarize=summarize, budget_tokens=8000,
                             estimator=est, log=logs.append)
    sizes = [est.estimate(given) for given, _ in summarize.calls]
    assert len(sizes) == 3 and sizes[0] <= 8000 and sizes[1] <= 4000 and sizes[2] <= 2000
    assert sizes[0] > sizes[1] > sizes[2]
    assert "halved to 4000" in logs[0] and "halved to 2000" in logs[1]
    assert is_checkpoint(out[2])


def test_exhausted_attempts_raise_with_the_cause() -> None:
    summarize = Recorder(fail=[ValueError("a"), ValueError("b"), ValueError("c")])
    with pytest.raises(CompactionFailed) as info:
        compact_transcript(transcript(8), keep_recent=2, summarize=summarize, budget_tokens=3000)
    assert isinstance(info.value.__cause__, ValueError) and len(summarize.calls) == 3


def test_empty_summary_counts_as_failure() -> None:
    with pytest.raises(CompactionFailed, match="empty"):
        compact_transcript(transcript(8), keep_recent=2, budget_tokens=3000,
                           summarize=lambda m, p: "  ")


@pytest.mark.parametrize("exc", [Fatal("bad key"), RateLimited("slow down", retry_after=3)])
def test_auth_and_quota_errors_are_not_retried(exc: Exception) -> None:
    summarize = Recorder(fail=[exc])
    with pytest.raises(type(exc)):
        compact_transcript(transcript(8), keep_recent=2, summarize=summarize, budget_tokens=3000)
    assert len(summarize.calls) == 1


def test_render_for_summary_is_plain_text() -> None:
    text = render_for_summary(research_round(0, 1, 60) + [checkpoint_message("old")])
    assert "tool call r0c0 search" in text and "[tool result r0c0]" in text
    assert "old" in text
