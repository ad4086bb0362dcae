"""Test-wide isolation: Prefect, caches and keys never leak in from the developer's machine."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports prefect: its home, results and analytics point at a throwaway place.
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="researchflow-tests-"))
os.environ["PREFECT_HOME"] = str(_SESSION_DIR / "prefect")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_SESSION_DIR / "prefect-results")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_LOGGING_TO_API_BATCH_INTERVAL"] = "0.3"
os.environ["RESEARCHFLOW_CACHE_DIR"] = str(_SESSION_DIR / "cache")
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
             "SERPAPI_API_KEY", "SERPAPI_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_key, None)


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test server for the whole session (it takes ~12 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def session_dir() -> Path:
    return _SESSION_DIR
