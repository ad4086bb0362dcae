"""A throwaway workspace for a benchmark run: Prefect's home, results and our cache in a temp
folder, and quiet logs unless BENCH_VERBOSE is set. Call before Prefect is imported."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path


def workspace(prefix: str) -> Path:
    work = Path(tempfile.mkdtemp(prefix=prefix))
    verbose = bool(os.environ.get("BENCH_VERBOSE"))
    os.environ.update(PREFECT_HOME=str(work / "prefect"),
                      PREFECT_RESULTS_LOCAL_STORAGE_PATH=str(work / "results"),
                      PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="INFO" if verbose else "CRITICAL",
                      RESEARCHFLOW_CACHE_DIR=str(work / "cache"))
    if not verbose:
        logging.disable(logging.ERROR)
    return work
