"""The result serializer loads only what it could have written: our models and plain data."""

from __future__ import annotations

import json

import pytest

from core.models import (Claim, Evidence, Finding, Message, PageNotes, SearchResult, Source,
                         SubQuestion, Transcript)
from core.secrets import remember
from tasks.result_serializer import DATA, StoredError, refusal


def test_every_kind_of_task_result_comes_back_equal():
    hit = SearchResult(url="file:///c/a.md#p0", title="A", snippet="s", rank=1)
    values = [hit, [hit, hit], [3, 1], ["q1", "q2"], (1, "a"), {"k": [hit]}, None,
              SubQuestion(index=1, question="Why?", queries=("a", "b")),
              Finding(subquestion_index=1, subquestion="Why?", claims=(Claim(
                  text="c", evidence=(Evidence(url="u", title="t", quote="q"),)),)),
              PageNotes(url="u", source=Source(url="u", title="t", text="x"), notes="n"),
              Transcript(subquestion=SubQuestion(index=2, question="How?"),
                         messages=[Message(role="user", content="hi")], queries_run=["q"])]
    for value in values:
        assert DATA.loads(DATA.dumps(value)) == value


@pytest.mark.parametrize("payload", [
    {"__class__": "subprocess.Popen", "data": ["touch /tmp/x"]},  # Prefect json's encoding
    {"__model__": "Popen", "data": {}},  # a name outside core.models
    {"__model__": "SearchResult", "data": {"url": 1}},  # ours, but not valid
    {"__exc_type__": "builtins.SystemExit", "message": "bye"},
])
def test_anything_else_is_refused(payload):
    with pytest.raises(ValueError):
        DATA.loads(json.dumps(payload).encode())


def test_an_exception_is_kept_as_its_name_and_masked_message():
    remember("rfproxy-results-0123456789")
    stored = DATA.loads(DATA.dumps(RuntimeError("bad key rfproxy-results-0123456789")))
    assert isinstance(stored, StoredError) and stored.type_name == "RuntimeError"
    assert "rfproxy-results" not in str(stored)


def test_unknown_objects_are_not_persisted():
    with pytest.raises(TypeError):
        DATA.dumps(object())


def test_metadata_must_name_exactly_our_serializer(tmp_path, monkeypatch):
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(tmp_path)}):
        (tmp_path / "k").write_bytes(DATA.dumps([1, 2]))
        good = {"storage_key": str(tmp_path / "k"), "serializer": {"type": "researchflow-data"}}
        assert refusal(json.dumps(good).encode()) is None
        for serializer in ({"type": "pickle"}, {"type": "json"},
                           {"type": "researchflow-data", "jsonlib": "builtins.exec"}):
            assert refusal(json.dumps({**good, "serializer": serializer}).encode())
        outside = {**good, "storage_key": "/etc/passwd"}
        assert "outside" in refusal(json.dumps(outside).encode())
        (tmp_path / "k").write_text('{"__class__": "os.system", "data": "x"}')
        assert "does not load" in refusal(json.dumps(good).encode())


def test_every_cached_task_keeps_its_metadata_where_only_data_loads():
    """A task given a policy of its own (not tasks.caching.cache_policy) would hand Prefect
    whatever serializer a tampered metadata file names: the report task once did."""
    from prefect import Task

    import tasks.research
    import tasks.write
    from tasks.result_serializer import METADATA

    cached = [t for module in (tasks.research, tasks.write) for t in vars(module).values()
              if isinstance(t, Task) and t.persist_result]
    assert len(cached) >= 10
    for t in cached:
        assert getattr(t.cache_policy, "key_storage", None) is METADATA, t.name
        assert t.result_serializer is DATA, t.name
