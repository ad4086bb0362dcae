"""Pydantic shapes of what the LLM engine asks a model to return, one per role.

These are wire shapes for model output only: the engine validates them, then converts them into
the domain models of `core.models` (where quotes are re-anchored in the sources and titles come
from the sources, never from the model). Every field the model may skip has a default, so a
slightly sloppy answer still validates; anything structurally wrong fails validation and is
re-asked once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


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


class PlannedSubQuestion(_Out):
    question: str = Field(min_length=3)
    queries: list[str] = Field(default_factory=list, description="1-3 web search queries")

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, v: Any) -> list[str]:
        if isinstance(v, str):
            v = [v]
        return _clean_strings(v or [])[:3]


class PlanOut(_Out):
    brief: str = Field(min_length=1)
    intent: Literal["describe", "compare", "recommend"] = "describe"
    targets: list[str] = Field(default_factory=list,
                               description="the options being compared (compare intent only)")
    subquestions: list[PlannedSubQuestion] = Field(min_length=1)

    @field_validator("intent", mode="before")
    @classmethod
    def _intent(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> list[str]:
        return _clean_strings(v or [])


class ControllerOut(_Out):
    enough: bool
    queries: list[str] = Field(default_factory=list)

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, v: Any) -> list[str]:
        if isinstance(v, str):
            v = [v]
        return _clean_strings(v or [])


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


class SectionOut(_Out):
    subquestion_index: int
    heading: str = Field(min_length=1)
    body: str = ""


class DraftOut(_Out):
    title: str = Field(min_length=1)
    summary: str = ""
    sections: list[SectionOut] = Field(default_factory=list)
    comparison_table: str | None = None


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema handed to `ChatModel.complete(json_schema=...)`."""
    return model.model_json_schema()
