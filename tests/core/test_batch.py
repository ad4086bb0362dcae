"""Reading a CSV of topics (core/topics/rows.py): good rows run, bad rows are reported by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.topics.rows import BatchFileError, RowError, TopicRow, read_topics_csv
from core.models import Topic


def _write(tmp_path: Path, content: str | bytes, name: str = "topics.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


def _by_row(errors: list[RowError]) -> dict[int, str]:
    return {e.row: e.message for e in errors}


MIXED = (
    "topic,max_subquestions,max_rounds\n"      # 1
    "asyncio vs threading,3,2\n"               # 2 good
    ",3,2\n"                                   # 3 empty topic
    "json or pickle,abc,2\n"                   # 4 non-integer
    "How does the GIL work,9,2\n"              # 5 out of range
    "What is a coroutine,3,0\n"                # 6 out of range
    "What is a generator,3,2,extra\n"          # 7 extra cell
    "Asyncio vs Threading ,4,1\n"              # 8 duplicate of 2 (case, space)
    "Describe the pickle protocol,,\n"         # 9 good, defaults
    "hi,1,1\n"                                 # 10 too short
    "Compare lists and tuples,6,6\n"           # 11 good, at the bounds
)


def test_good_rows_become_topics_and_bad_rows_errors(tmp_path: Path) -> None:
    good, errors = read_topics_csv(_write(tmp_path, MIXED), batch_id="nightly")
    assert good == [
        TopicRow(2, Topic(text="asyncio vs threading", max_subquestions=3, max_rounds=2,
                          batch_id="nightly")),
        TopicRow(9, Topic(text="Describe the pickle protocol", batch_id="nightly")),
        TopicRow(11, Topic(text="Compare lists and tuples", max_subquestions=6, max_rounds=6,
                           batch_id="nightly")),
    ]
    messages = _by_row(errors)
    assert sorted(messages) == [3, 4, 5, 6, 7, 8, 10]
    assert messages[3] == "empty topic"
    assert messages[4].startswith("max_subquestions:") and "integer" in messages[4]
    assert messages[5].startswith("max_subquestions:") and "6" in messages[5]
    assert messages[6].startswith("max_rounds:") and "1" in messages[6]
    assert messages[7] == "more cells than the header has columns"
    assert messages[8] == "duplicate of row 2"
    assert messages[10].startswith("topic:") and "3 characters" in messages[10]


def test_defaults_come_from_topic_when_override_columns_are_absent(tmp_path: Path) -> None:
    good, errors = read_topics_csv(_write(tmp_path, "topic\nWhat is asyncio\n"), batch_id="b")
    assert errors == []
    default = Topic(text="x" * 3)
    assert (good[0].topic.max_subquestions, good[0].topic.max_rounds) == (
        default.max_subquestions, default.max_rounds)


def test_bom_header_case_and_whitespace_are_tolerated(tmp_path: Path) -> None:
    content = "\ufeff Topic , MAX_ROUNDS\n  What is asyncio  , 3 \n".encode("utf-8")
    good, errors = read_topics_csv(_write(tmp_path, content), batch_id="b")
    assert errors == []
    assert [(r.row, r.topic.text, r.topic.max_rounds) for r in good] == [(2, "What is asyncio", 3)]


def test_line_numbers_count_blank_lines_and_multiline_cells(tmp_path: Path) -> None:
    content = ('topic,notes\n'
               '"A topic that\nspans two lines",x\n'   # lines 2-3
               'after the multiline topic,y\n'          # line 4
               '\n\n'                                   # lines 5-6 blank
               'no,z\n')                                # line 7: too short
    good, errors = read_topics_csv(_write(tmp_path, content), batch_id="b")
    assert [(r.row, r.topic.text) for r in good] == [(2, "A topic that\nspans two lines"),
                                                     (4, "after the multiline topic")]
    assert [e.row for e in errors] == [7]


def test_extra_cells_in_the_first_row_are_a_row_error_not_a_crash(tmp_path: Path) -> None:
    good, errors = read_topics_csv(_write(tmp_path, "topic\nabc,def\nWhat is asyncio\n"),
                                   batch_id="b")
    assert errors == [RowError(2, "more cells than the header has columns")]
    assert [r.row for r in good] == [3]


def test_duplicates_are_per_batch_text_ignoring_case_and_spacing(tmp_path: Path) -> None:
    content = "topic\nWhat is asyncio\nwhat is ASYNCIO\nWhat is asyncio?\n"
    good, errors = read_topics_csv(_write(tmp_path, content), batch_id="b")
    assert [r.row for r in good] == [2, 4]  # the question mark makes a different topic
    assert errors == [RowError(3, "duplicate of row 2")]
    assert good[0].topic.topic_id != good[1].topic.topic_id


def test_topic_ids_depend_on_the_batch(tmp_path: Path) -> None:
    path = _write(tmp_path, "topic\nWhat is asyncio\n")
    (a,), _ = read_topics_csv(path, batch_id="one")
    (b,), _ = read_topics_csv(path, batch_id="two")
    assert a.topic.batch_id == "one" and a.topic.topic_id != b.topic.topic_id


def test_all_rows_bad_still_returns_errors_not_raise(tmp_path: Path) -> None:
    good, errors = read_topics_csv(_write(tmp_path, "topic,max_rounds\n,1\nabc,x\n"), batch_id="b")
    assert good == [] and [e.row for e in errors] == [2, 3]


def test_accepts_a_str_path(tmp_path: Path) -> None:
    good, _ = read_topics_csv(str(_write(tmp_path, "topic\nWhat is asyncio\n")), batch_id="b")
    assert len(good) == 1


@pytest.mark.parametrize(("content", "expected"), [
    ("", "header"),
    ("\n\ntopic\nWhat is asyncio\n", "header"),
    ("name,notes\nWhat is asyncio,x\n", "no 'topic' column (found: name, notes)"),
    ("topic\n", "no topics below the header"),
    (b"\xff\xfetopic\nWhat is asyncio\n", "UTF-8"),  # a header that is not UTF-8
])
def test_unusable_files_raise_with_what_to_do(tmp_path: Path, content, expected: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(BatchFileError) as info:
        read_topics_csv(path, batch_id="b")
    message = str(info.value)
    assert str(path) in message and expected in message
    assert "'topic'" in message or "topic" in message  # says what the file needs


def test_missing_file_and_directory_raise(tmp_path: Path) -> None:
    with pytest.raises(BatchFileError, match="no such file"):
        read_topics_csv(tmp_path / "absent.csv", batch_id="b")
    with pytest.raises(BatchFileError, match="no such file"):
        read_topics_csv(tmp_path, batch_id="b")
