"""Pydantic shapes of what the LLM engine asks a model to return, one per role.

These are wire shapes for model output only: the engine validates them, then converts them into
the domain models of `core.models` (where quotes are re-anchored in the sources and titles come
from the sources, never from the model). Every field the model may skip has a default, so a
slightly sloppy answer still validates; anything structurally wrong fails validation and is
re-asked once.

Every string and list the model writes is bounded in the schema sent (`maxLength`, `maxItems`;
`_bound`), never in validation: a server that constrains its output with a grammar (llama.cpp,
vLLM) then cannot loop inside a string until the output cap, while a strong model's slightly
longer answer is still accepted. Each role's output cap (`core.engine.model_driven.calls`
ROLE_OUTPUT_TOKENS) is sized to what its bounded answer can hold.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _bound(item_chars: int | None = None, **limits: int) -> dict[str, Any]:
    """Limits shown in the JSON schema only (see the module docstring); `item_chars` bounds
    each string of a list."""
    extra: dict[str, Any] = dict(limits)
    if item_chars is not None:
        extra["items"] = {"type": "string", "maxLength": item_chars}
    return {"json_schema_extra": extra}


# Bounds in characters (strings) and items (lists), shared by the roles that write them.
QUESTION_CHARS = 200
QUERY_CHARS = 80
NOTE_CHARS = 300
CLAIM_CHARS = 400
QUOTE_CHARS = 500
URL_CHARS = 400


def _clean_strings(values: list[Any]) -> list[str]:
    """Strip, drop empties and duplicates (first wins), keeping order."""
    out: list[str] = []
    for v in values:
        s = str(v).strip()
        if s and s not in out:
            out.append(s)
    return out


def _strings(v: Any) -> list[str]:
    return _clean_strings([v] if isinstance(v, str) else v or [])


def _ints(v: Any) -> list[int]:
    """Numbers as a model writes them: [3, "7", "[9]"]; anything else is skipped."""
    if isinstance(v, (int, str)):
        v = [v]
    out: list[int] = []
    for item in v or []:
        try:
            n = int(str(item).strip(" []#"))
        except ValueError:
            continue
        if n not in out:
            out.append(n)
    return out


# Lenient list fields: a lone value becomes a list; blanks, duplicates and strays are dropped.
Strings = Annotated[list[str], BeforeValidator(_strings)]
Queries = Annotated[list[str], BeforeValidator(lambda v: _strings(v)[:3])]  # 1-3 searches
Numbers = Annotated[list[int], BeforeValidator(_ints)]


class PlannedSubQuestion(_Out):
    question: str = Field(min_length=3, **_bound(maxLength=QUESTION_CHARS))
    queries: Queries = Field(default_factory=list, description="1-3 web search queries",
                             **_bound(QUERY_CHARS, minItems=1, maxItems=3))


class PlanOut(_Out):
    brief: str = Field(min_length=1, **_bound(maxLength=400))
    intent: Literal["describe", "compare", "recommend"] = "describe"
    targets: Strings = Field(default_factory=list,
                             description="the options being compared (compare intent only)",
                             **_bound(QUERY_CHARS, maxItems=4))
    # minItems/maxItems follow the topic's own bounds (set per call by the engine).
    subquestions: list[PlannedSubQuestion] = Field(min_length=1, **_bound(maxItems=6))

    @field_validator("intent", mode="before")
    @classmethod
    def _intent(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class ControllerOut(_Out):
    reflection: str = Field(default="", **_bound(maxLength=NOTE_CHARS))
    enough: bool
    queries: Strings = Field(default_factory=list, **_bound(QUERY_CHARS, maxItems=3))


class RewriteOut(_Out):
    queries: Queries = Field(default_factory=list, description="1-3 more specific searches",
                             **_bound(QUERY_CHARS, maxItems=3))


class ChooseOut(_Out):
    read: Numbers = Field(default_factory=list, **_bound(maxItems=10))
    why: str = Field(default="", **_bound(maxLength=NOTE_CHARS))


class CondenseOut(_Out):
    ids: Numbers = Field(default_factory=list, **_bound(maxItems=20))
    note: str = Field(default="", **_bound(maxLength=NOTE_CHARS))


class FollowUpOut(_Out):
    question: str = Field(min_length=3, **_bound(maxLength=QUESTION_CHARS))
    queries: Queries = Field(default_factory=list, **_bound(QUERY_CHARS, maxItems=3))
    why: str = Field(default="", **_bound(maxLength=NOTE_CHARS))
    fills: int | None = None

    @field_validator("fills", mode="before")
    @classmethod
    def _fills(cls, v: Any) -> int | None:
        found = _ints(v) if v is not None else []
        return found[0] if found else None


class ReviewOut(_Out):
    done: bool = False
    followups: list[FollowUpOut] = Field(default_factory=list, **_bound(maxItems=3))


class EvidenceOut(_Out):
    url: str = Field(**_bound(maxLength=URL_CHARS))
    quote: str = Field(min_length=1, description="copied verbatim from the page",
                       **_bound(maxLength=QUOTE_CHARS))


class ClaimOut(_Out):
    text: str = Field(min_length=1, **_bound(maxLength=CLAIM_CHARS))
    evidence: list[EvidenceOut] = Field(default_factory=list, **_bound(maxItems=2))
    confidence: Literal["high", "medium", "conflict"] = "medium"

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class CompressOut(_Out):
    claims: list[ClaimOut] = Field(default_factory=list, **_bound(maxItems=6))


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema handed to `ChatModel.complete(json_schema=...)`: a fresh copy each time
    (providers' adapters reshape it), generated once per model class (pydantic takes ~1 ms)."""
    return json.loads(_schema_text(model))


def plan_schema(low: int, high: int) -> dict[str, Any]:
    """The plan's schema with the topic's own bounds on how many sub-questions it has."""
    schema = json_schema(PlanOut)
    schema["properties"]["subquestions"].update(minItems=low, maxItems=high)
    return schema


@functools.lru_cache(maxsize=None)
def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema())
