"""What changed between two editions: sources, claims matched by evidence, numbers."""

from __future__ import annotations

from core.reports.editions import ClaimView, Snapshot, compare, mask_numbers, section, with_section

A, B, C = "file:///c/a.md", "file:///c/b.md", "file:///c/c.md"
QA = "Sockets example 1 shows that a program waits for 7 milliseconds before it resumes."
QB = "Blocking calls stall the event loop."
QC = "Memory use grows with every thread."


def snap(report_id: str, edition: str, sources: dict, claims: list, cites: dict | None = None):
    return Snapshot(report_id, edition, sources, tuple(claims), cites or {})


def claim(text: str, *evidence: tuple[str, str]) -> ClaimView:
    return ClaimView("How long does it wait?", text, tuple(evidence))


def first() -> Snapshot:
    return snap("r_1", "2026-12-01", {A: "Sockets", B: "Blocking"},
                [claim("It waits 7 ms.", (A, QA)), claim("Blocking stalls.", (B, QB))],
                {(A, QA): 1, (B, QB): 2})


def test_nothing_changed_is_one_line_naming_the_previous_edition():
    diff = compare(first(), first())
    assert diff.changes == ()
    text = section(diff)
    assert text.splitlines() == ["## What changed since 2026-12-01", "",
                                 "Nothing changed since 2026-12-01."]


def test_a_page_added_a_cited_page_removed_and_a_number_edited():
    edited = QA.replace("7 milliseconds", "9 milliseconds")
    now = snap("r_2", "2026-12-02", {A: "Sockets", C: "Memory"},
               [claim("It waits 9 ms.", (A, edited)), claim("Memory grows.", (C, QC))],
               {(A, edited): 1, (C, QC): 2})
    diff = compare(first(), now)
    kinds = sorted(c.kind for c in diff.changes)
    assert kinds == ["claim_added", "claim_dropped", "number_changed", "source_added",
                     "source_gone"]
    counts = diff.counts()
    assert counts["source_added"] == counts["source_gone"] == counts["number_changed"] == 1
    number = next(c for c in diff.changes if c.kind == "number_changed")
    assert number.numbers == (("7", "9"),) and number.before == QA and number.quote == edited
    text = section(diff)
    # What is in the report now cites its reference number; what is gone links to its source.
    assert "- **New source:** Memory [2]" in text
    assert "- **Source gone:** Blocking ([b.md](file:///c/b.md))" in text
    assert "- **Number changed:** 7 → 9:" in text and text.count("[1]") == 1
    assert "- **Claim added:** Memory grows. [2]" in text
    assert "- **Claim dropped:** Blocking stalls. ([b.md](file:///c/b.md))" in text


def test_claims_are_matched_by_their_evidence_not_their_wording():
    reworded = snap("r_2", "e2", {A: "Sockets", B: "Blocking"},
                    [claim("A program waits seven ms.", (A, QA)),
                     claim("Blocking stalls.", (B, QB))])
    assert compare(first(), reworded).changes == ()  # same passages: the same claims
    more = snap("r_2", "e2", {A: "Sockets", B: "Blocking"},
                [claim("It waits 7 ms.", (A, QA), (B, QB)), claim("Blocking stalls.", (B, QB))])
    changed = compare(first(), more).changes
    assert [c.kind for c in changed] == ["claim_changed"]
    assert changed[0].before == "It waits 7 ms."


def test_masking_keeps_words_and_hides_only_numbers():
    assert mask_numbers("waits  7.5 ms, 1,200 times") == "waits # ms, # times"


def test_the_section_goes_before_the_references_exports_rebuild():
    markdown = "# T\n\n## Conclusion\n\nDone [1].\n\n## References\n\n1. a (x) — “q”\n"
    out = with_section(markdown, "## What changed since e1\n\nNothing changed since e1.\n",
                       "References")
    assert out.index("## What changed since e1") < out.index("## References")
    assert out.endswith("1. a (x) — “q”\n")


def test_hostile_text_in_a_change_stays_text():
    now = snap("r_2", "e2", {A: "Sockets", B: "Blocking", C: "[x](javascript:alert(1))"},
               [claim("It waits 7 ms.", (A, QA)), claim("Blocking stalls.", (B, QB))])
    text = section(compare(first(), now))
    assert "\\[x\\](javascript:" in text  # escaped: shown as typed, never a link
    assert "[x](javascript:" not in text


def test_a_sentence_quoted_by_two_claims_changes_once():
    edited = QA.replace("7 milliseconds", "9 milliseconds")
    before = snap("r_1", "e1", {A: "Sockets"}, [claim("x", (A, QA)), claim("y", (A, QA))])
    now = snap("r_2", "e2", {A: "Sockets"}, [claim("x", (A, edited)), claim("y", (A, edited))])
    assert [c.kind for c in compare(before, now).changes] == ["number_changed"]
