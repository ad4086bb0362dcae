"""What changed between two editions of a topic's report: sources, claims and numbers.

An edition is one run of a scheduled batch (by default the run's date). Each edition of a
topic stores its own report; from the second on, the report carries a "What changed since
<previous edition>" section, and `researchflow diff` prints the same comparison for any two
reports of a topic. Editions are ordered by name, not by when they ran (the store's
`edition_order`: digits by value, so dates order by date and week-9 comes before week-49), and
the previous edition is the latest one before this one in that order.

A snapshot is what a report rested on when it was written: the pages as its topic read them
(each in the version it read, core.store.source_versions), never as they read now.

The comparison is made in code, never by a model, from what each report rests on:

- sources: the pages the topic read, by URL (new, gone);
- claims, matched by their evidence: a claim keeps its identity while it quotes the same
  passages. Quotes are compared with their numbers masked, so "waits 7 ms" and "waits 9 ms" on
  the same page are the same passage with a number changed, not a claim dropped and one added;
  a matched claim whose passages differ otherwise is "changed".

Every item cites the way the rest of the report does: the current report's reference number
when it cites that passage (or that source), else a link to the source.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Literal

from core.models import MAX_EDITION_CHARS, ResearchResult
from core.text.escaping import markdown_link, markdown_text

Kind = Literal["source_added", "source_gone", "claim_added", "claim_dropped", "claim_changed",
               "number_changed"]
KINDS: tuple[str, ...] = ("source_added", "source_gone", "claim_added", "claim_dropped",
                          "claim_changed", "number_changed")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACE = re.compile(r"\s+")

# The section's own words; a language without a table gets English.
WORDS: dict[str, dict[str, str]] = {
    "en": {"heading": "What changed since {edition}", "none": "Nothing changed since {edition}.",
           "source_added": "New source", "source_gone": "Source gone",
           "claim_added": "Claim added", "claim_dropped": "Claim dropped",
           "claim_changed": "Claim changed", "number_changed": "Number changed",
           "before": "before", "compared": "Compared with edition {edition} (report {report})"},
    "zh": {"heading": "自 {edition} 以来的变化", "none": "自 {edition} 以来没有变化。",
           "source_added": "新来源", "source_gone": "来源已消失", "claim_added": "新增论断",
           "claim_dropped": "删除的论断", "claim_changed": "变化的论断",
           "number_changed": "变化的数字", "before": "之前",
           "compared": "与版本 {edition}（报告 {report}）比较"},
}


def edition_name(given: str | None, default: Callable[[], str]) -> str:
    """The edition a run belongs to: as given (spaces around it dropped), else `default()` (the
    date, for a schedule); ValueError, saying what an edition may be, when it is too long or
    holds a character that does not print (it is part of a topic's id and of every report).
    Its name also orders it among the topic's editions (see the module docstring)."""
    edition = (given or "").strip() or default()
    if len(edition) > MAX_EDITION_CHARS or not edition.isprintable():
        raise ValueError(f"at most {MAX_EDITION_CHARS} printable characters, e.g. 2026-12-03 or "
                         "week-49")
    return edition


@dataclass(frozen=True)
class ClaimView:
    subquestion: str
    text: str
    evidence: tuple[tuple[str, str], ...]  # (url, quote)

    def exact(self) -> set[tuple[str, str]]:
        return {(url, _norm(quote)) for url, quote in self.evidence}

    def masked(self) -> set[tuple[str, str]]:
        return {(url, mask_numbers(quote)) for url, quote in self.evidence}


@dataclass(frozen=True)
class Snapshot:
    """What one report rests on: the sources its topic read, its claims, its references."""

    report_id: str
    edition: str
    sources: dict[str, str]  # url -> title
    claims: tuple[ClaimView, ...]
    citations: dict[tuple[str, str], int] = field(default_factory=dict)  # (url, quote) -> n

    def reference(self, url: str, quote: str | None = None) -> int | None:
        """The reference number citing this passage (or, without a quote, this source)."""
        if quote is not None:
            return self.citations.get((url, _norm(quote)))
        numbers = [n for (u, _), n in self.citations.items() if u == url]
        return min(numbers) if numbers else None


@dataclass(frozen=True)
class Change:
    kind: Kind
    url: str
    title: str = ""
    text: str = ""  # the claim (or quote) as it is now; for what is gone, as it was
    quote: str = ""
    before: str = ""  # a changed claim's or number's previous form
    numbers: tuple[tuple[str, str], ...] = ()  # (before, now), for number_changed


@dataclass(frozen=True)
class EditionDiff:
    previous: Snapshot
    current: Snapshot
    changes: tuple[Change, ...]

    def counts(self) -> dict[str, int]:
        return {kind: sum(1 for c in self.changes if c.kind == kind) for kind in KINDS}

    def as_json(self) -> dict[str, Any]:
        return {"previous": {"report_id": self.previous.report_id,
                             "edition": self.previous.edition},
                "current": {"report_id": self.current.report_id,
                            "edition": self.current.edition},
                "counts": self.counts(), "changes": [asdict(c) for c in self.changes]}


def mask_numbers(text: str) -> str:
    """A passage with every number replaced by '#', whitespace collapsed."""
    return _NUMBER.sub("#", _norm(text))


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text or "").strip()


def snapshot_of(result: ResearchResult, edition: str) -> Snapshot:
    """The snapshot of a result about to be stored."""
    claims = tuple(ClaimView(f.subquestion, c.text, tuple((e.url, e.quote) for e in c.evidence))
                   for f in result.findings for c in f.claims)
    return Snapshot(result.report.report_id, edition,
                    {s.url: s.title for s in result.sources}, claims,
                    citations_of((c.number, c.url, c.quote) for c in result.report.citations))


def citations_of(rows: Iterable[tuple[int, str, str]]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for number, url, quote in rows:
        out.setdefault((url, _norm(quote or "")), int(number))
    return out


def compare(previous: Snapshot, current: Snapshot) -> EditionDiff:
    """Everything that differs from `previous` to `current` (see the module docstring)."""
    changes: list[Change] = []
    for url in current.sources.keys() - previous.sources.keys():
        changes.append(Change("source_added", url, current.sources[url]))
    for url in previous.sources.keys() - current.sources.keys():
        changes.append(Change("source_gone", url, previous.sources[url]))
    changes.sort(key=lambda c: (c.kind, c.url))

    old = list(previous.claims)
    new = list(current.claims)
    # Claims quoting exactly the same passages are the same claim: nothing to say.
    for claim in list(new):
        same = next((o for o in old if o.exact() == claim.exact()), None)
        if same is not None:
            old.remove(same)
            new.remove(claim)
    # Then claims sharing a passage (numbers masked): the same claim, changed.
    for claim in list(new):
        masked = claim.masked()
        best = max(old, key=lambda o: len(o.masked() & masked), default=None)
        if best is None or not best.masked() & masked:
            continue
        old.remove(best)
        new.remove(claim)
        changes.extend(_changed(best, claim, previous, current))
    for claim in new:
        url, quote = claim.evidence[0] if claim.evidence else ("", "")
        changes.append(Change("claim_added", url, current.sources.get(url, ""), claim.text,
                              quote))
    for claim in old:
        url, quote = claim.evidence[0] if claim.evidence else ("", "")
        changes.append(Change("claim_dropped", url, previous.sources.get(url, ""), claim.text,
                              quote))
    return EditionDiff(previous, current, _unique(changes))


def _unique(changes: list[Change]) -> tuple[Change, ...]:
    """Each change once: two sub-questions quoting the same edited sentence are one change."""
    seen: set[tuple[str, ...]] = set()
    out: list[Change] = []
    for c in changes:
        key = ((c.kind, c.url, c.quote, c.before) if c.kind == "number_changed"
               else (c.kind, c.url, c.text, c.quote, c.before))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return tuple(out)


def _changed(before: ClaimView, now: ClaimView, previous: Snapshot,
             current: Snapshot) -> list[Change]:
    out: list[Change] = []
    old_by_mask = {(url, mask_numbers(q)): q for url, q in before.evidence}
    for url, quote in now.evidence:
        was = old_by_mask.get((url, mask_numbers(quote)))
        if was is not None and _norm(was) != _norm(quote):
            pairs = tuple((a, b) for a, b in zip(_NUMBER.findall(_norm(was)),
                                                 _NUMBER.findall(_norm(quote))) if a != b)
            out.append(Change("number_changed", url, previous.sources.get(url, ""), now.text,
                              quote, before=was, numbers=pairs))
    if before.masked() != now.masked() or (not out and _norm(before.text) != _norm(now.text)):
        url, quote = now.evidence[0] if now.evidence else ("", "")
        out.append(Change("claim_changed", url, current.sources.get(url, ""), now.text, quote,
                          before=before.text))
    return out


def section(diff: EditionDiff, language: str = "en") -> str:
    """The report's "What changed since <edition>" section, in markdown."""
    words = WORDS.get(re.split(r"[-_]", language.lower(), maxsplit=1)[0], WORDS["en"])
    edition = markdown_text(diff.previous.edition or diff.previous.report_id)
    lines = [f"## {words['heading'].format(edition=edition)}", ""]
    if not diff.changes:
        lines.append(words["none"].format(edition=edition))
        return "\n".join(lines) + "\n"
    lines += [words["compared"].format(edition=edition,
                                       report=markdown_text(diff.previous.report_id)) + ":", ""]
    for change in diff.changes:
        lines.append(f"- **{words[change.kind]}:** {_item(change, diff, words)}")
    return "\n".join(lines) + "\n"


def _item(change: Change, diff: EditionDiff, words: dict[str, str]) -> str:
    cite = _cite(change, diff.current)
    if change.kind in ("source_added", "source_gone"):
        return f"{markdown_text(change.title or change.url)} {cite}"
    if change.kind == "number_changed":
        numbers = ", ".join(f"{markdown_text(a)} → {markdown_text(b)}" for a, b in change.numbers)
        return f"{numbers}: “{markdown_text(change.quote)}” {cite}"
    text = markdown_text(change.text or change.quote)
    if change.kind == "claim_changed" and change.before:
        return f"{text} {cite} ({words['before']}: {markdown_text(change.before)})"
    return f"{text} {cite}"


def _cite(change: Change, current: Snapshot) -> str:
    """The current report's reference number for the passage (or its source), as the rest of
    the report cites; what is gone, or not cited now, links to its source."""
    number = None
    if change.kind not in ("source_gone", "claim_dropped"):
        number = current.reference(change.url, change.quote or None)
        if number is None:
            number = current.reference(change.url)
    return f"[{number}]" if number is not None else f"({markdown_link(change.url)})"


def with_section(markdown: str, text: str, references_heading: str) -> str:
    """`markdown` with `text` inserted before its references (exports rebuild those)."""
    marker = f"\n## {references_heading}\n"
    at = markdown.rfind(marker)
    if at < 0:
        return markdown.rstrip() + "\n\n" + text
    return markdown[:at].rstrip() + "\n\n" + text + markdown[at:]
