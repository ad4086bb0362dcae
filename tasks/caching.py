"""Cross-run result caching shared by the research tasks (see DESIGN.md, facts measured here).

The default policy includes the run id, so nothing would carry across runs; inputs + task source
does, and a UI retry of a failed run reuses what already succeeded. Inputs are pydantic models
(topic, plan, transcript, RunConfig), never clients or keys. The task source alone would miss a
change in `core/` (where the logic lives), so the code of `core` is part of the key as well.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import timedelta
from pathlib import Path

from prefect.cache_policies import INPUTS, TASK_SOURCE, CacheKeyFnPolicy

import core


@functools.lru_cache(maxsize=1)
def core_fingerprint() -> str:
    """A hash of every module in `core/`, computed once per process."""
    digest = hashlib.sha256()
    root = Path(core.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


CORE_CODE = CacheKeyFnPolicy(cache_key_fn=lambda _ctx, _params: core_fingerprint())
CACHE_POLICY = INPUTS + TASK_SOURCE + CORE_CODE
CACHE_EXPIRATION = timedelta(hours=24)

CACHED = dict(cache_policy=CACHE_POLICY, cache_expiration=CACHE_EXPIRATION, persist_result=True)
