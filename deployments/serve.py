"""Serve the flows as deployments from this process: a nightly CSV batch and ad-hoc topics.

    python deployments/serve.py            # needs a Prefect API: `make ui` in another terminal
                                           # and PREFECT_API_URL=http://127.0.0.1:4200/api

Both deployments then appear in the Prefect UI, where a failed topic or batch can be rerun
(finished tasks come back from the result cache) and parameters overridden per run.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect import serve

from flows.batch import research_batch
from flows.research import research_topic

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    csv_path = os.environ.get("RESEARCHFLOW_BATCH_CSV", str(ROOT / "examples" / "topics.csv"))
    cron = os.environ.get("RESEARCHFLOW_BATCH_CRON", "0 6 * * *")
    nightly = research_batch.to_deployment(
        name="nightly", cron=cron, parameters={"csv_path": csv_path},
        description="The topics CSV, researched every morning; reports land in DuckDB.")
    adhoc = research_topic.to_deployment(
        name="adhoc", description="Research one topic; override model/search/corpus per run.")
    serve(nightly, adhoc)


if __name__ == "__main__":
    main()
