"""Pydantic shapes of what the LLM engine asks a model to return, one per role.

These are wire shapes for model output only: the engine validates them, then converts them into
the domain models of `core.models` (where quotes are re-anchored in the sources and titles come
from the sources, never from the model). Every field the model may skip has a default, so a
slightly sloppy answer still validates; anything structurally wrong fails validation and is
re-asked once.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


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
    question: str = Field(min_length=3)
    queries: Queries = Field(default_factory=list, description="1-3 web search queries")


class PlanOut(_Out):
    brief: str = Field(min_length=1)
    intent: Literal["describe", "compare", "recommend"] = "describe"
    targets: Strings = Field(default_factory=list,
                             description="the options being compared (compare intent only)")
    subquestions: list[PlannedSubQuestion] = Field(min_length=1)

    @field_validator("intent", mode="before")
    @classmethod
    def _intent(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class ControllerOut(_Out):
    reflection: str = ""
    enough: bool
    queries: Strings = Field(default_factory=list)


class RewriteOut(_Out):
    queries: Queries = Field(default_factory=list, description="1-3 more specific searches")


class ChooseOut(_Out):
    read: Numbers = Field(default_factory=list)
    why: str = ""


class CondenseOut(_Out):
    ids: Numbers = Field(default_factory=list)
    note: str = ""


class FollowUpOut(_Out):
    question: str = Field(min_length=3)
    queries: Queries = Field(default_factory=list)
    why: str = ""
    fills: int | None = None

    @field_validator("fills", mode="before")
    @classmethod
    def _fills(cls, v: Any) -> int | None:
        found = _ints(v) if v is not None else []
        return found[0] if found else None


class ReviewOut(_Out):
    done: bool = False
    followups: list[FollowUpOut] = Field(default_factory=list)


class EvidenceOut(_Out):
    url: str
    quote: str = Field(min_length=1, description="copied verbatim from the page")


class ClaimOut(_Out):
    text: str = Field(min_length=1)
    evidence: list[EvidenceOut] = Field(default_factory=list)
    confidence: Literal["high", "medium", "conflict"] = "medium"

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class CompressOut(_Out):
    claims: list[ClaimOut] = Field(default_factory=list)


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema handed to `ChatModel.complete(json_schema=...)`: a fresh copy each time
    (providers' adapters reshape it), generated once per model class (pydantic takes ~1 ms)."""
    return json.loads(_schema_text(model))


@functools.lru_cache(maxsize=None)
def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema())
