"""The research engine over any chat model (core.llm), one model or one per role.

    llm_engine.py   LLMEngine: every role as one call (or a few) of the model
    calls.py        ModelCalls: output caps and input room sized to the model's window, plain
                    calls and JSON calls validated into a schema (re-asked once)
    prompts.py      every prompt, in one place
    schemas.py      the JSON shapes the roles answer in
    answers.py      reading answers: JSON out of prose, the plan's rules, markdown sections
    quotes.py       quotes checked against the pages they claim, stored as the page's text
    revisions.py    what a step was last shown and answered, and what changed since
    revising.py     condense, next queries, compress and review asked about what changed only
    writer.py       the report writer: in one call, or section by section when long
    routed.py       RoutedEngine: each role on its own model
    engines.py      the engines a RunConfig names, each model behind the run's meter

Shrinking after an overflow is the caller's (core.overflow), retrying is Prefect's.
"""

from core.engine.model_driven.llm_engine import LLMEngine
from core.engine.model_driven.routed import RoutedEngine

__all__ = ["LLMEngine", "RoutedEngine"]
