"""Shrinking after an overflow: transcripts (the drop-the-last-AI-turn rule, made safe), findings, max_tokens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.overflow.compaction import pairing_is_valid
from core.models import Claim, Evidence, Finding, Message
from core.overflow.shrink import (CannotShrink, drop_last_ai_turn, findings_budget_chars, fit_findings,
                         input_fit, lower_max_tokens, render_findings, shrink_transcript,
                         trim_at_sentence, window_budget_chars)
from core.signals import ContextOverflow
from core.overflow.tokens import content_bytes
from tests.core.test_compaction import (BRIEF, INSTRUCTION, SYSTEM, ZH_TEXT, research_round,
                                        transcript)


def overflow(limit: int | None = None, requested: int | None = None, kind: str | None = None,
             **kw: int) -> ContextOverflow:
    return ContextOverflow("too long", limit=limit, requested=requested, limit_kind=kind, **kw)


def ai_turns(msgs: list[Message]) -> int:
    return sum(m.role == "assistant" for m in msgs)


# --- transcripts ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("chinese", [False, True])
def test_drop_last_ai_turn_until_one_round_left(seed: int, chinese: bool) -> None:
    msgs = transcript(6, seed=seed, chinese=chinese)
    steps = 0
    while True:
        try:
            shorter = drop_last_ai_turn(msgs)
        except CannotShrink:
            break
        steps += 1
        assert shorter[:2] == [SYSTEM, BRIEF] and shorter[-1] == INSTRUCTION
        body = shorter[2:-1]
        assert body == msgs[2:2 + len(body)]  # a prefix: the *last* turn went
        assert ai_turns(shorter) == ai_turns(msgs) - 1
        assert pairing_is_valid(body)
        msgs = shorter
    assert steps == 5 and ai_turns(msgs) == 1


def test_drop_without_protected_messages() -> None:
    msgs = research_round(0, 2) + research_round(1, 0) + research_round(2, 1)
    assert drop_last_ai_turn(msgs) == msgs[:4]
    assert drop_last_ai_turn(msgs[:4]) == msgs[:3]
    with pytest.raises(CannotShrink):
        drop_last_ai_turn(msgs[:3])
    assert drop_last_ai_turn(msgs[:3], keep_rounds=0) == []


def test_drop_never_orphans_a_result_in_a_malformed_transcript() -> None:
    first, r0, r1 = research_round(0, 2)
    late = research_round(1, 0)[0]
    # The second result of round 0 arrives after a later AI turn: cutting at that turn would
    # orphan it, so the cut moves to the turn that made the call.
    msgs = [BRIEF] + research_round(9, 1) + [first, r0, late, r1, INSTRUCTION]
    assert drop_last_ai_turn(msgs) == [BRIEF] + research_round(9, 1) + [INSTRUCTION]


def test_shrink_without_numbers_is_the_seed_rule() -> None:
    msgs = transcript(5, seed=7)
    assert shrink_transcript(msgs, None, max_output_tokens=1000) == drop_last_ai_turn(msgs)


@pytest.mark.parametrize("seed", range(10))
def test_shrink_with_numbers_cuts_once_to_fit(seed: int) -> None:
    msgs = transcript(8, seed=seed)
    size = content_bytes(msgs)
    sig = overflow(limit=10_000, requested=20_000, kind="context_window")
    out = shrink_transcript(msgs, sig, max_output_tokens=2_000)
    fits = (10_000 - 2_000) * 0.95 / 20_000
    assert content_bytes(out) <= size * fits
    assert out[:2] == [SYSTEM, BRIEF] and out[-1] == INSTRUCTION
    assert pairing_is_valid(out[2:-1])


@pytest.mark.parametrize("chinese", [False, True])
def test_last_round_falls_back_to_truncating_tool_results(tmp_path: Path, chinese: bool) -> None:
    msgs = [SYSTEM, BRIEF] + research_round(0, 2, 20_000, chinese) + [INSTRUCTION]
    out = shrink_transcript(msgs, None, max_output_tokens=1000, spill_dir=tmp_path)
    assert [m.tool_call_id for m in out] == [m.tool_call_id for m in msgs]
    assert out[-1] == INSTRUCTION and out[:2] == [SYSTEM, BRIEF]
    longest = max(len(m.content) for m in msgs if m.role == "tool")
    assert all(len(m.content) <= longest // 2 for m in out if m.role == "tool")
    assert len(list(tmp_path.iterdir())) == 2  # both full texts spilled
    # With numbers it keeps halving until the ratio is met.
    sig = overflow(limit=1_000, requested=20_000, kind="input_window")
    out = shrink_transcript(msgs, sig, max_output_tokens=0, spill_dir=tmp_path)
    assert all(1_500 <= len(m.content) <= longest // 8 for m in out if m.role == "tool")
    assert content_bytes(out) < content_bytes(msgs) / 4


@pytest.mark.parametrize("big_round", [0, 3])
@pytest.mark.parametrize("chinese", [False, True])
def test_one_oversized_result_is_cut_and_every_round_kept(tmp_path: Path, big_round: int,
                                                         chinese: bool) -> None:
    rounds = [research_round(i, 1, 30_000 if i == big_round else 1_000, chinese)
              for i in range(4)]
    msgs = [SYSTEM, BRIEF] + [m for r in rounds for m in r] + [INSTRUCTION]
    size = content_bytes(msgs)
    sig = overflow(limit=10_000, requested=size // 3, kind="context_window")
    out = shrink_transcript(msgs, sig, max_output_tokens=1_000, spill_dir=tmp_path)
    target = size * (10_000 - 1_000) * 0.95 / (size // 3)
    assert 0.9 * target <= content_bytes(out) <= target  # cut to fit, not far below it
    assert [m.tool_call_id for m in out] == [m.tool_call_id for m in msgs]  # no round dropped
    normal = [m for m, o in zip(msgs, out) if m.role == "tool" and len(m.content) < 2_000]
    assert all(o == m for m, o in zip(msgs, out) if m in normal)  # only the outlier was cut
    assert out[-1] == INSTRUCTION and len(list(tmp_path.iterdir())) == 1


def test_last_round_cut_fills_the_room() -> None:
    msgs = [SYSTEM, BRIEF] + research_round(0, 1, 40_000) + [INSTRUCTION]
    size = content_bytes(msgs)
    sig = overflow(limit=5_000, requested=size // 3, kind="input_window")
    out = shrink_transcript(msgs, sig, max_output_tokens=0)
    target = size * 5_000 * 0.95 / (size // 3)
    assert 0.95 * target <= content_bytes(out) <= target  # not halved below what fits


def test_nothing_left_to_shrink() -> None:
    msgs = [SYSTEM, BRIEF] + research_round(0, 1, 200) + [INSTRUCTION]
    with pytest.raises(CannotShrink):
        shrink_transcript(msgs, None, max_output_tokens=1000)


# --- the numbers --------------------------------------------------------------------------------

@pytest.mark.parametrize("sig,out,expected", [
    # OpenAI: messages alone over the window; the answer still needs room.
    (overflow(128_000, 130_000, "context_window"), 4_000, (130_000, int(124_000 * 0.95))),
    # "you requested 140000 tokens (130000 in the messages, 10000 in the completion)"
    (overflow(128_000, 140_000, "context_window_incl_output", input_tokens=130_000,
              output_tokens=10_000), 4_000, (130_000, int(124_000 * 0.95))),
    # same without the split: the output part is assumed to be the signal's or our max_tokens
    (overflow(128_000, 140_000, "context_window_incl_output", output_tokens=10_000), 4_000,
     (130_000, int(124_000 * 0.95))),
    # TPM: one request above the per-minute budget, which covers input + max_tokens
    (overflow(30_000, 45_000, "tpm_per_request"), 5_000, (40_000, int(25_000 * 0.95))),
    # Anthropic: the prompt alone is limited
    (overflow(200_000, 210_000, "input_window"), 8_000, (210_000, int(200_000 * 0.95))),
    (overflow(200_000, None, "input_window"), 8_000, None),
    (None, 8_000, None),
])
def test_input_fit(sig: ContextOverflow | None, out: int, expected: tuple[int, int] | None) -> None:
    assert input_fit(sig, out) == expected


@pytest.mark.parametrize("sig,current,expected", [
    # prompt 120k fits a 128k window, 16k of output does not: lower to what is left
    (overflow(128_000, 136_000, "context_window_incl_output", input_tokens=120_000,
              output_tokens=16_000), 16_000, 128_000 - 120_000 - 640),
    (overflow(128_000, 136_000, "context_window_incl_output"), 16_000, 128_000 - 120_000 - 640),
    # the prompt alone is over: only shrinking helps
    (overflow(128_000, 130_000, "context_window"), 4_000, None),
    (overflow(200_000, 150_000, "input_window"), 60_000, None),
    # the room left would be a uselessly small answer
    (overflow(128_000, 131_000, "context_window_incl_output", input_tokens=127_000), 4_000, None),
    (overflow(None, None, None), 4_000, None),
    (None, 4_000, None),
])
def test_lower_max_tokens(sig: ContextOverflow | None, current: int, expected: int | None) -> None:
    assert lower_max_tokens(sig, current) == expected


def test_lower_max_tokens_uses_known_window_when_limit_missing() -> None:
    sig = overflow(None, None, "context_window_incl_output", input_tokens=100_000)
    assert lower_max_tokens(sig, 64_000, window=128_000) == 128_000 - 100_000 - 640


# --- findings budget --------------------------------------------------------------------------

def test_seed_rule_without_numbers() -> None:
    # chars_per_token=4 and no overhead/output/margin: exactly open_deep_research's 4 × limit.
    kw = dict(window=10_000, prompt_overhead_tokens=0, max_output_tokens=0, margin=0.0)
    first = findings_budget_chars(None, 100_000, **kw)
    assert first == 40_000
    second = findings_budget_chars(None, first, **kw)
    third = findings_budget_chars(None, second, **kw)
    assert (second, third) == (36_000, 32_400)  # then × 0.9 per overflow


def test_no_numbers_still_budgets_prompt_and_output() -> None:
    chars = findings_budget_chars(None, 10**6, window=10_000, prompt_overhead_tokens=1_000,
                                  max_output_tokens=2_000, chars_per_token=1.0)
    assert chars == int(10_000 * 0.95) - 3_000  # Chinese: one character a token


def test_no_window_at_all_steps_by_ten_percent() -> None:
    assert findings_budget_chars(None, 1000, window=None, prompt_overhead_tokens=0,
                                 max_output_tokens=0) == 900


def test_seed_rule_always_makes_progress() -> None:
    # The seed cut to 4 × limit even when the findings were already shorter: no progress.
    assert findings_budget_chars(None, 1000, window=128_000, prompt_overhead_tokens=0,
                                 max_output_tokens=0) == 900


def test_numbers_give_one_proportional_cut() -> None:
    # Prompt 150k tokens of which 10k overhead; the window is 128k with 8k reserved for output.
    sig = overflow(128_000, 150_000, "context_window")
    chars = findings_budget_chars(sig, 560_000, window=None, prompt_overhead_tokens=10_000,
                                  max_output_tokens=8_000)
    fits = int(120_000 * 0.95)
    assert chars == int(560_000 * (fits - 10_000) / (150_000 - 10_000))
    # Resent at that size the prompt is estimated (at the provider's own ratio) to fit.
    tokens_per_char = (150_000 - 10_000) / 560_000
    assert 10_000 + chars * tokens_per_char + 8_000 <= 128_000


def test_tpm_budget_counts_the_output() -> None:
    sig = overflow(30_000, 45_000, "tpm_per_request", output_tokens=5_000)
    chars = findings_budget_chars(sig, 200_000, window=128_000, prompt_overhead_tokens=2_000,
                                  max_output_tokens=5_000)
    assert chars == int(200_000 * (int(25_000 * 0.95) - 2_000) / (40_000 - 2_000))


def test_overhead_alone_over_the_limit_gives_zero() -> None:
    sig = overflow(8_000, 9_000, "context_window")
    assert findings_budget_chars(sig, 50_000, window=None, prompt_overhead_tokens=7_000,
                                 max_output_tokens=2_000) == 0


def test_numbers_that_say_it_fits_still_shrink() -> None:
    # Our overhead estimate was too high: the ratio would grow the findings. Step down anyway.
    sig = overflow(10_000, 10_500, "input_window")
    assert findings_budget_chars(sig, 1000, window=None, prompt_overhead_tokens=9_999,
                                 max_output_tokens=0) <= 900


def test_window_budget() -> None:
    assert window_budget_chars(1000, prompt_overhead_tokens=100, max_output_tokens=100,
                               chars_per_token=2.0, margin=0.0) == 1600
    assert window_budget_chars(100, prompt_overhead_tokens=100, max_output_tokens=100) == 0


# --- fitting findings -------------------------------------------------------------------------

def ev(n: int, quote: str = "A quoted sentence from the page.") -> Evidence:
    return Evidence(url=f"https://example.org/{n}", title=f"Page {n}", quote=quote)


def finding(i: int, support: int, *, claims: int = 2, text: str = "A claim.") -> Finding:
    per = [support // claims + (1 if k < support % claims else 0) for k in range(claims)]
    return Finding(subquestion_index=i, subquestion=f"Question {i}?", claims=tuple(
        Claim(text=f"{text} ({i}.{k})", evidence=tuple(ev(100 * i + k * 10 + e) for e in range(n)))
        for k, n in enumerate(per)), raw_notes="notes " * 100)


def keys_in(text: str) -> list[int]:
    return [int(k) for k in re.findall(r"\[E(\d+)\]", text)]


def test_fits_already() -> None:
    fs = [finding(0, 2), finding(1, 3)]
    assert fit_findings(fs, 10**6) == fs


def test_least_supported_go_first_and_order_is_kept() -> None:
    fs = [finding(0, 5), finding(1, 1), finding(2, 4), finding(3, 0), finding(4, 3)]
    full = len(render_findings(fs))
    kept = fit_findings(fs, full - 10)
    assert [f.subquestion_index for f in kept] == [0, 1, 2, 4]  # support 0 went
    kept = fit_findings(fs, len(render_findings([fs[0], fs[2], fs[4]])))
    assert [f.subquestion_index for f in kept] == [0, 2, 4]
    kept = fit_findings(fs, len(render_findings([fs[0]])))
    assert [f.subquestion_index for f in kept] == [0]


def test_room_left_by_whole_findings_is_refilled_from_the_best_one_cut() -> None:
    fs = [finding(i, 6, claims=6) for i in range(5)]
    budget = int(len(render_findings(fs)) * 0.7)  # whole findings alone would keep 3 of 5 (60%)
    kept = fit_findings(fs, budget)
    text = render_findings(kept)
    assert 0.95 * budget <= len(text) <= budget
    assert kept[:3] == fs[:3] and kept[3].subquestion_index == 3  # ties: the later goes first
    assert 0 < kept[3].support < fs[3].support
    assert keys_in(text) == list(range(1, sum(f.support for f in kept) + 1))


def test_ties_cut_the_later_subquestion() -> None:
    fs = [finding(0, 2), finding(1, 2), finding(2, 2)]
    kept = fit_findings(fs, len(render_findings(fs[:2])))
    assert [f.subquestion_index for f in kept] == [0, 1]


@pytest.mark.parametrize("budget_share", [0.9, 0.6, 0.3])
def test_references_stay_consistent_with_what_remains(budget_share: float) -> None:
    fs = [finding(i, s) for i, s in enumerate([3, 1, 4, 1, 5])]
    kept = fit_findings(fs, int(len(render_findings(fs)) * budget_share))
    text = render_findings(kept)
    total = sum(f.support for f in kept)
    assert keys_in(text) == list(range(1, total + 1))  # contiguous keys, no gaps
    kept_urls = {e.url for f in kept for c in f.claims for e in c.evidence}
    assert set(re.findall(r"<(https://[^>]+)>", text)) == kept_urls


@pytest.mark.parametrize("chinese", [False, True])
def test_single_finding_is_trimmed_at_sentences(chinese: bool) -> None:
    sentence = ZH_TEXT if chinese else "Capacity fades at high temperature. It also fades with cycling. "
    quote = sentence * 40
    big = Finding(subquestion_index=0, subquestion="Why?", claims=(
        Claim(text=sentence * 10, evidence=(ev(1, quote), ev(2, quote)), confidence="high"),
        Claim(text="weak claim", evidence=()),
    ))
    for budget in (2000, 800, 300):
        kept = fit_findings([big], budget)
        assert len(render_findings(kept)) <= budget
        (f,) = kept
        assert f.claims[0].text == trim_at_sentence(f.claims[0].text, len(f.claims[0].text))
        assert len(f.claims) == 1 and f.claims[0].confidence == "high"  # weak claim cut first
        for e in f.claims[0].evidence:
            assert quote.startswith(e.quote)  # still a verbatim prefix of the source quote
            assert e.quote.rstrip()[-1] in ".。；;!?！？" or len(e.quote) <= 16


def test_impossible_budget_raises() -> None:
    with pytest.raises(CannotShrink):
        fit_findings([finding(0, 3)], 20)


@pytest.mark.parametrize("text,limit,expected", [
    ("One. Two. Three.", 10, "One. Two."),
    ("One. Two. Three.", 100, "One. Two. Three."),
    ("no sentence end here at all", 12, "no sentence"),
    ("第一句。第二句。第三句。", 8, "第一句。第二句。"),
    ("没有标点的很长的一段中文文本", 5, "没有标点的"),
    ("v1.2 is out. Next.", 8, "v1.2 is"),  # a decimal point is not a sentence end
])
def test_trim_at_sentence(text: str, limit: int, expected: str) -> None:
    assert trim_at_sentence(text, limit) == expected


def test_fit_findings_with_an_empty_finding_cannot_shrink_it_further():
    from core.models import Finding
    from core.overflow.shrink import CannotShrink, fit_findings

    empty = Finding(subquestion_index=0, subquestion="How do A and B differ in a very long way?",
                    claims=())
    with pytest.raises(CannotShrink):
        fit_findings([empty], 10)
