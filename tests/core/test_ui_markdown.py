"""The UI's copy of a report lists a table's rows (the UI clipped a four-column comparison to
two columns); everything else, and what a cell says, stays as written."""

from core.text.escaping import markdown_text
from core.text.ui_markdown import tables_as_lists

REPORT = f"""# Report

| aspect | threading | {markdown_text("a|b")} | multiprocessing |
| --- | --- | --- | --- |
| purpose | threads share memory [1] | one loop [2] | — |
| speed | the GIL [3] | fast |  |

## Conclusion

Not | a table, since no rule follows.
"""


def test_a_table_becomes_a_list_naming_every_cell_by_its_header():
    shown = tables_as_lists(REPORT)
    assert "| --- |" not in shown
    assert "- **purpose**\n  - threading: threads share memory [1]\n" in shown
    assert "  - a\\|b: one loop [2]\n  - multiprocessing: —" in shown
    assert "- **speed**\n  - threading: the GIL [3]\n  - a\\|b: fast\n  - multiprocessing: —" in shown
    assert "Not | a table, since no rule follows." in shown
    assert shown.startswith("# Report\n\n") and "## Conclusion" in shown


def test_markdown_without_tables_is_unchanged():
    text = "# T\n\n- a | b\n\n| lone pipe line"
    assert tables_as_lists(text) == text
