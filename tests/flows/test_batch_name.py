"""A batch's name, which a topic's edition history is kept under: `--batch-name`, by default
the CSV file's name. Before, the CLI spelt it `--batch-id`, "Default: the CSV file name", and
nothing said that it keys the history, so the same topic run from another CSV file started a
fresh one."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from core.store import query_readonly
from core.store.connection import release_all
from flows.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

runner = CliRunner()


def test_one_topic_from_two_csv_files_under_one_batch_name_keeps_one_history(
        corpus, db_path, tmp_path):
    for name, edition in (("monday.csv", "2026-12-01"), ("tuesday.csv", "2026-12-02")):
        csv = tmp_path / name
        csv.write_text("topic,max_subquestions,max_rounds\n"
                       "How do threads share memory?,2,1\n", encoding="utf-8")
        result = runner.invoke(app, ["batch", str(csv), "--batch-name", "nightly",
                                     "--edition", edition, "--model", "offline",
                                     "--search", "corpus", "--corpus", str(corpus),
                                     "--db", str(db_path)])
        assert result.exit_code == 0, (name, result.output)
        assert "batch nightly" in result.output
        release_all()  # as the command's process would at exit
    _, rows = query_readonly(db_path, "SELECT batch_id, edition, n, previous_report_id IS NOT "
                                      "NULL FROM report_editions ORDER BY n")
    assert rows == [("nightly", "2026-12-01", 1, False), ("nightly", "2026-12-02", 2, True)]
