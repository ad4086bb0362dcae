"""Editions of a batch over days, through the real flows, the real openai SDK against the
loopback research provider, and a corpus that changes between days."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from flows.cli import app
from tests.fakes import providers as fake
from tests.fakes.editions_scenario import SUBJECTS, TOPICS, EditionsScenario
from tests.fakes.http import Reply

runner = CliRunner()


def test_editions_research_again_pay_for_what_changed_and_say_what_changed(tmp_path,
                                                                         prefect_harness):
    with EditionsScenario(tmp_path) as days:
        first = days.day("2026-12-01")
        assert first.state == "COMPLETED" and first.calls > 0 and first.reports == 2
        assert first.changed == ("", "")  # a first edition compares with nothing

        # A rerun within the edition skips the stored topics: same reports, no call.
        again = days.day("2026-12-01")
        assert (again.report_ids, again.calls, again.reports) == (first.report_ids, 0, 2)

        # A new edition researches every topic again and stores new reports, keeping the old;
        # nothing changed, so every thinking step is reused and the report says so.
        quiet = days.day("2026-12-02")
        assert quiet.state == "COMPLETED" and quiet.reports == 4
        assert not set(quiet.report_ids) & set(first.report_ids)
        assert quiet.share_of(first) <= 0.05, quiet
        assert quiet.changed == ("no change", "no change")
        markdown = days.report(quiet.report_ids[0])["markdown"]
        assert "## What changed since 2026-12-01\n\nNothing changed since 2026-12-01." in markdown

        # The corpus changes: a page added, a cited page removed, a number edited. The first
        # try of the edition is refused at its report; the retry pays only for the reports.
        days.add_page("locks")
        gone = days.page(SUBJECTS[2]).as_uri()
        days.remove_page(SUBJECTS[2])
        days.edit_number(SUBJECTS[0], 0, 9)
        days.provider.fail_roles["report"] = Reply(400, fake.error_body(
            "openai", 400, "Your request was rejected as a result of our safety system.",
            code="content_policy_violation"))
        refused = days.day("2026-12-03")
        assert refused.state == "FAILED" and refused.reports == 4
        # An LLM request sent before (a sub-question's next queries, an unchanged transcript
        # compressed) is served from the call memo, in a new edition too.
        assert refused.repeated == 0, refused
        del days.provider.fail_roles["report"]
        changed = days.day("2026-12-03")
    assert changed.state == "COMPLETED" and changed.reports == 6
    assert changed.calls == 2 and changed.repeated == 0  # the two reports, nothing else
    assert all(c.endswith("changes") for c in changed.changed), changed.changed

    report = days.report(changed.report_ids[0])
    section = report["markdown"].split("## What changed since 2026-12-02", 1)[1]
    section = section.split("## References", 1)[0]
    assert "**New source:** Locks in threading and asyncio [" in section
    assert "**Source gone:** Memory Use in threading and asyncio ([memory-use.md](" in section
    assert "**Number changed:** 0 → 9:" in section

    # The same comparison for any two reports of the topic, and in SQL.
    db = str(days.db)
    md = runner.invoke(app, ["diff", first.report_ids[0], changed.report_ids[0], "--db", db])
    assert md.exit_code == 0, md.output
    assert "What changed since 2026-12-01" in md.output
    assert "New source" in md.output and "Source gone" in md.output
    out = runner.invoke(app, ["diff", first.report_ids[0], changed.report_ids[0], "--db", db,
                              "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["counts"]["source_added"] == 1 and data["counts"]["source_gone"] == 1
    assert gone in {c["url"] for c in data["changes"] if c["kind"] == "source_gone"}
    rows = runner.invoke(app, ["query", "--db", db, "--format", "json",
                               "SELECT edition, sources_added, sources_gone, numbers_changed "
                               "FROM report_changes WHERE changes > 0"])
    assert rows.exit_code == 0, rows.output
    assert [r["edition"] for r in json.loads(rows.output)] == ["2026-12-03", "2026-12-03"]
    editions = runner.invoke(app, ["query", "--db", db, "--format", "json",
                                   "SELECT topic, count(*) AS n FROM report_editions "
                                   "GROUP BY topic"])
    assert {r["n"] for r in json.loads(editions.output)} == {3}
    latest = runner.invoke(app, ["query", "--db", db, "--format", "json",
                                 "SELECT DISTINCT edition FROM latest_reports"])
    assert json.loads(latest.output) == [{"edition": "2026-12-03"}]


def test_an_edited_page_costs_its_path_and_the_cascade_stops_where_outputs_are_the_same(
        tmp_path, prefect_harness):
    """Issue 33, item 2: an edition recomputes what a changed page touches and nothing else.
    Every sub-question reads the edited page here (three pages, all read). An edited figure
    leaves what each sentence is about, and so what the notes cover, as it was: no page is
    condensed by the model again, no search decided again, no review asked again; the findings
    that quote the sentence are written again (with the new figure), and the reports. An edit
    to a figure nothing quotes costs nothing at all, and the reports say nothing changed."""
    with EditionsScenario(tmp_path) as days:
        first = days.day("2026-12-01")
        days.edit_number(SUBJECTS[0], 0, 9)  # example 0: quoted (the top of the page)
        quoted = days.day("2026-12-02")
        days.edit_number(SUBJECTS[0], 70, 71)  # example 10: the middle, which nothing quotes
        unquoted = days.day("2026-12-03")
    assert [d.state for d in (first, quoted, unquoted)] == ["COMPLETED"] * 3
    read = {(topic, index) for topic, index, role, _ in first.paid if role == "choose"}
    assert len(read) == 10 and first.steps()["condense"] == 30

    steps = quoted.steps()
    assert quoted.off_path() == 0, quoted.paid
    assert set(steps) == {"compress", "report"}, steps
    assert 0 < steps["compress"] <= len(read) and steps["report"] == 2, steps
    assert quoted.changed == ("1 change", "1 change")
    for report_id in quoted.report_ids:  # the new figure, never the old one
        text, _ = _without_changes(days.report(report_id)["markdown"])
        assert "for 9 milliseconds" in text and "example 0 shows that a threading or asyncio " \
            "program waits on input or output for 0 milliseconds" not in text

    assert unquoted.calls == 0 and unquoted.steps() == {}, unquoted.paid
    assert unquoted.changed == ("no change", "no change")
    # An edition per run, even when its reports were served from the cache.
    assert not set(unquoted.report_ids) & set(quoted.report_ids) and unquoted.reports == 6


def test_a_page_one_topic_reads_costs_that_topics_path_only(tmp_path, prefect_harness):
    """Issue 33, item 2, in its own premise: one page of three changed, read by one topic of
    two. The provider chooses pages by subject (as a model reading titles would), so each topic
    reads its own page. An edited figure on the first topic's page is paid for on that topic's
    path alone: the findings quoting it and its report, at most 15% of the first edition. A
    sentence reworded there is asked about again (each page's changed sentence, each search
    decision and finding that saw it, the review), the model shown the changed lines and its
    earlier answer, not the page or the notes again."""
    with EditionsScenario(tmp_path, by_subject=True) as days:
        first = days.day("2026-12-01")
        days.edit_number(SUBJECTS[0], 0, 9)  # example 0: quoted (the top of the page)
        sent = len(days.server.requests)
        edited = days.day("2026-12-02")
        asked = [r.body for r in days.server.requests[sent:]]
        days.edit_words(SUBJECTS[0], 1, "waits on input or output", "stalls on a socket read")
        sent = len(days.server.requests)
        reworded = days.day("2026-12-03")
        reasked = [r.body for r in days.server.requests[sent:]]
    assert [d.state for d in (first, edited, reworded)] == ["COMPLETED"] * 3
    # Every call the edit cost was shown the edited sentence: none could have been served.
    assert len(asked) == edited.calls and edited.repeated == 0, edited
    assert all(b"for 9 milliseconds" in body for body in asked)
    mine = TOPICS[0]  # "... for waiting on sockets", the subject of the edited page
    read = {(topic, index) for topic, index, role, _ in first.paid if role == "choose"}
    # Each sub-question reads the one page on its topic's subject.
    assert first.steps()["condense"] == len(read) == 10, first.paid

    assert {topic for topic, _, _, _ in edited.paid} == {mine}, edited.paid
    assert {topic for topic, _ in edited.on_path} == {mine}
    assert edited.off_path() == 0, edited.paid
    steps = edited.steps()
    assert set(steps) == {"compress", "report"} and steps["report"] == 1, steps
    assert edited.changed == ("1 change", "no change")  # in the CSV's order
    assert edited.share_of(first) <= 0.15, edited

    steps = reworded.steps()
    assert reworded.off_path() == 0, reworded.paid
    assert {topic for topic, _, _, _ in reworded.paid} == {mine}, reworded.paid
    assert steps["condense"] == 5 and steps["review"] == 1 and steps["report"] == 1, steps
    # Each condensing was shown the reworded sentence alone, not the page's other nineteen.
    condensed = [b for b in reasked if b"pick the evidence on one web page" in b]
    assert len(condensed) == 5
    assert all(b"stalls on a socket read" in b and b"example 2 " not in b for b in condensed)
    text, changes = _without_changes(days.report(reworded.report_ids[0])["markdown"])
    assert "stalls on a socket read" in text
    assert "example 1 shows that a threading or asyncio program waits on input" not in text
    assert "**Claim dropped:** The source says: Waiting on sockets example 1 shows that a " \
        "threading or asyncio program waits on input" in changes
    assert reworded.share_of(first) <= 0.30, reworded


def test_a_backfill_compares_with_its_predecessor_and_every_edition_stays_verifiable(
        tmp_path, prefect_harness):
    """Editions run out of order over a page that changes each time: the backfilled edition
    says what changed since the edition before it (not since the newest), the newer one's
    comparison is marked stale and compared again on demand, and `researchflow verify` passes
    on every edition's reports although the page they quoted changed after each."""
    with EditionsScenario(tmp_path) as days:
        first = days.day("2026-12-01")
        days.edit_number(SUBJECTS[0], 0, 9)
        third = days.day("2026-12-03")
        days.edit_number(SUBJECTS[0], 9, 5)
        second = days.day("2026-12-02")  # the backfill, run after the newer edition
    assert [d.state for d in (first, second, third)] == ["COMPLETED"] * 3
    db = str(days.db)

    section = days.report(second.report_ids[0])["markdown"].split("## References", 1)[0]
    assert "## What changed since 2026-12-01" in section, section
    assert "**Number changed:** 0 → 5:" in section and "9 → 5" not in section
    assert second.changed[0].endswith(("change", "changes")), second.changed
    rows = runner.invoke(app, ["query", "--db", db, "--format", "json",
                               "SELECT report_id, edition, previous_report_id, "
                               "predecessor_report_id, stale FROM report_editions "
                               "WHERE report_id IN (?, ?, ?) ORDER BY n",
                               "-p", first.report_ids[0], "-p", second.report_ids[0],
                               "-p", third.report_ids[0]])
    assert rows.exit_code == 0, rows.output
    assert [(r["edition"], r["previous_report_id"], r["predecessor_report_id"], r["stale"])
            for r in json.loads(rows.output)] == [
        ("2026-12-01", None, None, False),
        ("2026-12-02", first.report_ids[0], first.report_ids[0], False),
        ("2026-12-03", first.report_ids[0], second.report_ids[0], True)]
    again = runner.invoke(app, ["diff", third.report_ids[0], "--db", db, "--format", "json"])
    assert again.exit_code == 0, again.output
    data = json.loads(again.stdout)
    assert data["previous"]["edition"] == "2026-12-02"
    assert [c["numbers"] for c in data["changes"] if c["kind"] == "number_changed"] == [
        [["5", "9"]]]

    # The page was read in three versions; each edition's quotes check against their own.
    versions = runner.invoke(app, ["query", "--db", db, "--format", "json",
                                   "SELECT n, reports FROM source_versions WHERE url = ? "
                                   "ORDER BY n", "-p", days.page(SUBJECTS[0]).as_uri()])
    assert versions.exit_code == 0, versions.output
    assert len(json.loads(versions.output)) == 3
    for day in (first, second, third):
        for report_id in day.report_ids:
            verified = runner.invoke(app, ["verify", report_id, "--db", db])
            assert verified.exit_code == 0, (day.edition, verified.output)
            assert "found in the version of the page they cite" in verified.output


def test_a_changed_topic_emits_an_event_an_automation_can_match(prefect_harness, monkeypatch):
    from prefect.events.clients import AssertingEventsClient
    from prefect.events.worker import EventsWorker

    from core.reports.editions import ClaimView, Snapshot, compare
    from core.models import Topic
    from flows.topic import _changed_event

    worker = EventsWorker.instance(AssertingEventsClient)
    monkeypatch.setattr(EventsWorker, "instance", lambda *_: worker)
    url = "file:///c/a.md"
    before = Snapshot("r_1", "2026-12-01", {url: "A"}, (ClaimView("q", "x", ((url, "7 ms"),)),))
    after = Snapshot("r_2", "2026-12-02", {url: "A", "file:///c/b.md": "B"},
                     (ClaimView("q", "x", ((url, "9 ms"),)),))
    topic = Topic(text="Threading or asyncio for sockets", batch_id="nightly",
                  edition="2026-12-02")
    _changed_event(topic, compare(before, after))
    worker.drain()
    events = [e for e in worker._client.events if e.event == "researchflow.topic.changed"]
    assert len(events) == 1
    event = events[0]
    assert event.resource.id == f"researchflow.topic.{topic.topic_id}"
    assert event.payload["report_id"] == "r_2" and event.payload["previous_report_id"] == "r_1"
    assert event.payload["changes"] == 2 and event.payload["edition"] == "2026-12-02"
    assert event.payload["counts"]["source_added"] == 1
    assert event.payload["counts"]["number_changed"] == 1


def _without_changes(markdown: str) -> tuple[str, str]:
    """A report's text without its "What changed" section (which names what was before), and
    that section."""
    head, rest = markdown.split("## What changed", 1)
    changes, references = rest.split("## References", 1)
    return head + "## References" + references, changes
