"""LiteLLM's first import, offline: the one place helix-dbos imports LiteLLM from.

LiteLLM reads a few switches *while it is imported*: without them it fetches its model cost map
and Anthropic beta headers from the network (and Hugging Face may be consulted), which stalls or
fails a process with no network, and makes a run's cost depend on what was online that day. So
right before the first import, :func:`import_litellm_offline` sets them unless the environment
already does. Importing helix-dbos itself changes no environment variable; if something imports
LiteLLM before helix-dbos does, set these variables yourself.

A leaf module (not under :mod:`helix_dbos.llm`) so that memory's embeddings use it too.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final

OFFLINE_SWITCHES: Final = (
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True"),
    ("HF_HUB_OFFLINE", "1"),
)
"""Set (unless already set) before LiteLLM is first imported."""


def import_litellm_offline() -> Any:
    """``import litellm``, with the offline switches set first when it is not imported yet.

    Raises ``ImportError`` as ``import`` does when LiteLLM is not installed.
    """
    if "litellm" not in sys.modules:
        for name, value in OFFLINE_SWITCHES:
            os.environ.setdefault(name, value)
    import litellm

    return litellm


__all__ = ["OFFLINE_SWITCHES", "import_litellm_offline"]
