"""Pages cut into pieces that fit: verbatim slices at paragraph and sentence ends, head + tail
when there are too many, and notes merged in page order without repeats."""

from __future__ import annotations

import pytest

from core.overflow.chunking import merge_notes, pieces_for, split_text

PAGE = "\n\n".join(" ".join(f"Paragraph {p} sentence {s} says something useful." for s in range(5))
                   for p in range(20))


def test_pieces_are_verbatim_slices_that_cover_the_page():
    pieces = split_text(PAGE, 600)
    assert "".join(pieces).strip() == PAGE.strip()
    assert all(len(p) <= 600 for p in pieces)
    assert all(p in PAGE for p in pieces)


def test_pieces_end_at_paragraphs_or_sentences():
    for piece in split_text(PAGE, 600)[:-1]:
        assert piece.endswith(("\n\n", ".")), repr(piece[-20:])


def test_a_single_long_word_is_still_cut():
    assert [len(p) for p in split_text("x" * 250, 100)] == [100, 100, 50]
    with pytest.raises(ValueError):
        split_text("text", 0)


def test_too_many_pieces_keep_head_and_tail():
    pieces, left_out = pieces_for(PAGE, 200, max_pieces=4)
    all_pieces = split_text(PAGE, 200)
    assert pieces == all_pieces[:3] + all_pieces[-1:]
    assert left_out == sum(len(p) for p in all_pieces[3:-1]) > 0
    assert pieces_for(PAGE, 10_000) == ([PAGE], 0)


def test_notes_merge_in_order_each_line_once():
    assert merge_notes(["A.\nB.", "", "B.\n C. ", "D."]) == "A.\nB.\n C.\nD."
