"""Cross-run result caching shared by the research tasks (see DESIGN.md, facts measured here).

The default policy includes the run id, so nothing would carry across runs; inputs + task source
does, and a UI retry of a failed run reuses what already succeeded. Inputs are pydantic models
(topic, plan, transcript, RunConfig), never clients or keys. The task source alone would miss a
change in `core/` (where the logic lives), so the code of `core` is part of the key as well: its
syntax, not its comments.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from datetime import timedelta
from pathlib import Path

from prefect.cache_policies import INPUTS, TASK_SOURCE, CacheKeyFnPolicy

import core


@functools.lru_cache(maxsize=1)
def core_fingerprint() -> str:
    """A hash of the code in `core/`, computed once per process.

    It hashes each module's syntax tree without docstrings, so an edit to a comment, a docstring
    or the layout of a line (a checkout updated between a failure and its retry, say) does not
    make every finished call be paid for again; a change to what the code does still does.
    """
    digest = hashlib.sha256()
    root = Path(core.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(_code_only(path.read_text(encoding="utf-8")).encode())
    return digest.hexdigest()[:16]


def _code_only(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


CORE_CODE = CacheKeyFnPolicy(cache_key_fn=lambda _ctx, _params: core_fingerprint())
CACHE_POLICY = INPUTS + TASK_SOURCE + CORE_CODE
CACHE_EXPIRATION = timedelta(hours=24)

CACHED = dict(cache_policy=CACHE_POLICY, cache_expiration=CACHE_EXPIRATION, persist_result=True)
