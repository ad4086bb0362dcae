"""Cross-run result caching shared by the research tasks (see DESIGN.md, facts measured here).

The default policy includes the run id, so nothing would carry across runs; inputs + task source
does, and a UI retry of a failed run reuses what already succeeded. Inputs are pydantic models
(topic, plan, transcript, RunConfig), never clients or keys.
"""

from __future__ import annotations

from datetime import timedelta

from prefect.cache_policies import INPUTS, TASK_SOURCE

CACHE_POLICY = INPUTS + TASK_SOURCE
CACHE_EXPIRATION = timedelta(hours=24)
