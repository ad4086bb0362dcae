"""The artifacts a topic makes, rendered by Prefect's own UI in a real browser (headless
Chromium): the planted topic shows as typed, with no javascript: link and no image; a quote's
escaped `<https://json.org>` and a title's brackets show without backslashes (defects 11, 17).

markdown-it (test_markdown) is what `show` and the export use; the UI renders with its own
library, which reads escapes differently, so only the UI itself can say what a user sees. The
same page given the topic raw shows the live links and images: the check can fail.
"""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import subprocess

import pytest

from core.models import SubQuestion, Topic
from flows.topic import _report_artifact, _wave_artifact
from tests.security.conftest import PLANTED
from tests.security.test_markdown import QUOTE, TITLE, _report

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TOPIC = f"{PLANTED} How does asyncio cancel a task?"
BROWSER = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome"))), None)


def _rendered(ui: str, key: str, drawn: str) -> tuple[list[str], int, str]:
    """What `_seen` finds on the artifact page once the UI's scripts have drawn its body (`drawn`
    is a line of the body no attacker wrote). On a loaded machine the page's data can come in after Chromium's
    virtual time ran out, leaving a page with the artifact's name and no body, on which every
    check below would pass by seeing nothing: so look again, with more time."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async def latest() -> str:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
        return str(max(found, key=lambda a: a.created).id)

    page = f"{ui}/artifacts/artifact/{asyncio.run(latest())}"
    for budget in (30_000, 60_000, 120_000):
        done = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                               f"--virtual-time-budget={budget}", "--dump-dom", page],
                              capture_output=True, text=True, timeout=300)
        assert "Can't connect to Server API" not in done.stdout, "the UI found no API"
        seen = _seen(done.stdout)
        if drawn in seen[2]:
            return seen
    raise AssertionError(f"the UI never drew the artifact's body ({drawn!r}) on {page}")


def _seen(dom: str) -> tuple[list[str], int, str]:
    """Links that are not web or in-app ones, planted images, and the page's text."""
    hrefs = re.findall(r'<a[^>]*\bhref="([^"]*)"', dom)
    odd = [h for h in hrefs if not h.startswith(("http://", "https://", "file://", "/", "#"))]
    images = len(re.findall(r'<img[^>]*src="(?:x|http://x/t\.png)"', dom))
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))
    return odd, images, text


@pytest.fixture(scope="module")
def ui(prefect_server: str) -> str:
    if BROWSER is None:
        pytest.skip("no Chromium here to render Prefect's UI")
    return prefect_server.removesuffix("/").removesuffix("/api")


def test_the_report_artifact_renders_as_written(ui: str) -> None:
    topic = Topic(text=TOPIC, batch_id="ui")
    _report_artifact(topic, _report(TOPIC).markdown, "r_ui-check", "1 call, $0.00")
    odd, images, text = _rendered(ui, "report-r-ui-check", "References")
    assert odd == [] and images == 0
    assert PLANTED in text and QUOTE in text and TITLE in text
    references = text[text.index("References"):]
    assert "\\" not in references


def test_the_wave_artifact_renders_as_written(ui: str) -> None:
    topic = Topic(text=TOPIC, batch_id="ui")
    asked = [SubQuestion(index=2, question=f"What is {TOPIC}", wave=2, why=PLANTED, parent=0)]
    _wave_artifact(topic, 2, asked)
    odd, images, text = _rendered(ui, f"wave-2-{topic.topic_id}", "follow-up(s) for")
    assert odd == [] and images == 0
    assert text.count(PLANTED) >= 3


def test_the_same_text_unescaped_would_be_live(ui: str) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(f"# Research report: {TOPIC}\n\n{TOPIC}", key="ui-raw-control")
    odd, images, _ = _rendered(ui, "ui-raw-control", "How does asyncio")
    assert "javascript:alert(1)" in odd and images >= 1
