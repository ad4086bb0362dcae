"""One topic through the product's own core calls with the offline engine, in-line and without
Prefect: what `bench/offline_quality.py` measures and the offline end-to-end tests run.

Core is imported inside the function, so a bench run with `--root` measures that tree's core.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from core.models import Report, ResearchPlan, Topic


@dataclass(frozen=True)
class OfflineRun:
    plan: ResearchPlan
    report: Report
    sources: dict[str, str]  # url -> the text the engine read


def research_offline(topic: Topic, corpus_dir: Path | None, work: Path) -> OfflineRun:
    """One topic through the product's core calls with the offline engine over `corpus_dir`
    (None: the bundled CPython docs); indexes and caches live under `work`.

    The calls are those of flows/topic.run_topic and the task bodies it runs, in-line and in
    order (bench/overhead_plain.py does the same in threads): the plan, each wave's researchers
    and compressions, the supervisor's review between waves, the gate (core.relevance.gate:
    NoEvidence when no part of the topic is answered), the report. Nothing is stored."""
    from core.overflow.recovery import compress_with_shrink, report_with_shrink
    from core.overflow.roles import plan_with_shrink, review_with_shrink
    from core.settings import Settings, run_config
    try:
        from core.relevance.gate import judge, passed
    except ImportError:  # --root at a tree from before the gate (issue 32)
        judge = passed = None  # type: ignore[assignment]
    try:  # a tree with run contexts and core in quarters
        from core.reports.report import assemble, report_id_for
        from core.researcher import DirectSteps, research_subquestion
        from core.topics.waves import MAX_FOLLOWUPS, affordable_followups, for_report, gaps
        from tasks.contexts import context_for

        def notice_of(engine: Any, language: str | None) -> str | None:
            return engine.notice_for(language)

        def build_engine(config: Any) -> Any:
            return context_for(config).engine

        def build_search(config: Any) -> Any:
            return context_for(config).search
    except ImportError:  # --root at an older tree: its module names
        from core.report import assemble, report_id_for  # type: ignore[no-redef]
        from core.waves import (MAX_FOLLOWUPS, affordable_followups,  # type: ignore[no-redef]
                                for_report, gaps)
        try:
            from core.engine.offline.words import notice_of  # type: ignore[no-redef]
            from core.researcher import DirectSteps, research_subquestion
            from core.runtime import current
        except ImportError:  # before the modules were renamed (730d974)
            from core.engine.report_words import notice_of  # type: ignore[no-redef]
            from core.research import DirectSteps, research_subquestion  # type: ignore
            from core.runtime import build_engine, build_search  # type: ignore[no-redef]
        else:
            build_engine = lambda c: current().engine(c)  # type: ignore  # noqa: E731
            build_search = lambda c: current().search(c)  # type: ignore  # noqa: E731

    settings = Settings.load(model="offline", search="corpus", corpus_dir=corpus_dir,
                             cache_dir=work / "cache", db_path=work / "unused.duckdb")
    config = run_config(settings)
    engine, search = build_engine(config), build_search(config)
    steps = DirectSteps(engine, search)

    def wave(subquestions: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        transcripts = [research_subquestion(steps, sq, max_rounds=topic.max_rounds,
                                            max_pages=topic.max_pages,
                                            results_per_query=config.results_per_query)
                       for sq in subquestions]
        findings = [compress_with_shrink(engine.for_role("compress"), t) for t in transcripts]
        return findings, transcripts

    plan = plan_with_shrink(engine.for_role("plan"), topic)
    findings, transcripts = wave(plan.subquestions)
    for number in range(2, topic.max_waves + 1):
        if judge is not None:  # the supervisor reviews what the gate keeps
            findings = list(judge(plan, findings).findings)
        limit = affordable_followups(MAX_FOLLOWUPS, spent=0.0, cap=None,  # offline costs nothing
                                     researched=len(plan.subquestions))
        followups = review_with_shrink(engine.for_role("plan"), plan, findings,
                                       gaps(plan, findings), number - 1, limit)
        if not followups:
            break
        plan = plan.with_followups(followups, number)
        more, read = wave(plan.subquestions[-len(followups):])
        findings, transcripts = findings + more, transcripts + read
    unanswered: tuple[str, ...] = ()
    if passed is not None:  # the gate: NoEvidence when no part is answered
        judged = passed(plan, findings, config.search)
        findings, unanswered = list(judged.findings), judged.headings
    writer = engine.for_role("report")
    draft, kept = report_with_shrink(writer, plan, for_report(plan, findings),
                                     window=writer.context_window(),
                                     max_output_tokens=config.max_output_tokens)
    extra = {"unanswered": unanswered} if unanswered else {}
    report = assemble(plan, kept, draft, report_id=report_id_for(topic.batch_id, topic.topic_id),
                      engine=engine.name, notice=notice_of(engine, plan.language), **extra)
    return OfflineRun(plan, report, {s.url: s.text for t in transcripts for s in t.sources})
