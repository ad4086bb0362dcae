"""The cheaper sibling of a model, for bulk work (condensing every page) when the model is auto.

The flows hand it to `core.settings.run_config` when they turn Settings into a RunConfig: the
settings hold no provider's price ladder.
"""

from __future__ import annotations

# A cheaper model of the same provider for bulk work (condensing every page), by exact model
# name or its dated snapshot ("claude-sonnet-4-5-20250929"). A model not listed is its own.
CHEAPER = {
    "openai": {"gpt-4o": "gpt-4o-mini", "gpt-4.1": "gpt-4.1-mini", "gpt-4.1-mini": "gpt-4.1-nano",
               "gpt-5": "gpt-5-mini", "gpt-5.1": "gpt-5-mini", "gpt-5-mini": "gpt-5-nano",
               "gpt-5.4": "gpt-5.4-mini", "gpt-5.4-mini": "gpt-5.4-nano",
               "gpt-5.5": "gpt-5.4-mini"},
    "anthropic": {"claude-sonnet-5": "claude-haiku-4-5", "claude-sonnet-5-5": "claude-haiku-4-5",
                  "claude-opus-5": "claude-haiku-4-5", "claude-sonnet-4-6": "claude-haiku-4-5",
                  "claude-sonnet-4-5": "claude-haiku-4-5", "claude-sonnet-4": "claude-haiku-4-5",
                  "claude-opus-4-5": "claude-haiku-4-5", "claude-opus-4-1": "claude-haiku-4-5",
                  "claude-3-7-sonnet": "claude-3-5-haiku"},
    "gemini": {"gemini-2.5-pro": "gemini-2.5-flash", "gemini-2.5-flash": "gemini-2.5-flash-lite",
               "gemini-3-pro-preview": "gemini-2.5-flash", "gemini-3.5-flash": "gemini-3.1-flash-lite",
               "gemini-3.1-pro-preview": "gemini-3.5-flash"},
}


def cheaper(spec: str) -> str:
    """The cheaper sibling of a model spec, or the spec itself."""
    provider, _, model = spec.strip().partition(":")
    siblings = CHEAPER.get(provider, {})
    for name, sibling in siblings.items():
        if model == name or model.startswith(f"{name}-20"):
            return f"{provider}:{sibling}"
    return spec

