"""What one call cost, from LiteLLM's local cost map (offline, never a network fetch).

The adapter prices each response as it arrives, so the price recorded with a call is the one in
force when it was made: a later LiteLLM upgrade with new prices does not rewrite history. The cost
map is the one bundled with LiteLLM (the adapter sets ``LITELLM_LOCAL_MODEL_COST_MAP``); a model it
does not know (``openai/<anything>`` at an ``api_base``, a self-hosted one) costs ``None``, never a
crash and never a guess. Register its prices with ``litellm.register_model`` to have it priced.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["call_cost_usd"]

_log = logging.getLogger("helix_dbos.llm")


def call_cost_usd(litellm: Any, model: str, usage: Any) -> float | None:
    """The call's cost in USD for LiteLLM ``usage``, or ``None`` when LiteLLM cannot price the model.

    ``litellm.cost_per_token`` with the usage object prices cached input at the cache-read rate and
    cache writes at theirs, which a sum of prompt and completion tokens would not.
    """
    if usage is None:
        return None
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, usage_object=usage)
    except Exception as exc:  # ModelNotMappedError and friends: unknown price, not a failed call
        _log.debug("no price for model %s in LiteLLM's cost map: %s", model, exc)
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total if total >= 0 else None
