"""Model names helix-dbos serves itself, not through LiteLLM: a registry the models add themselves to.

``launch()``'s default adapter (:func:`~helix_dbos.runtime.launch.default_llm_adapter`) routes every
name registered here to its adapter and every other model string to LiteLLM. A module that ships
such a model registers it when imported (the demo's scripted model, ``helix/demo-scripted``, is
registered by :mod:`helix_dbos.demo`), so the runtime never imports the module that owns it: the
agent that names the model comes from that module, and importing it is what registers the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from helix_dbos.llm.base import LLMAdapter

__all__ = ["builtin_models", "register_builtin_model"]

_MODELS: dict[str, Callable[[], LLMAdapter]] = {}


def register_builtin_model(name: str, factory: Callable[[], LLMAdapter]) -> None:
    """Serve the model string ``name`` (and any string it prefixes) with ``factory()``'s adapter.

    Registering the same name again replaces it (a module reloaded in a test).
    """
    _MODELS[name] = factory


def builtin_models() -> Mapping[str, Callable[[], LLMAdapter]]:
    """The registered model names and their adapter factories (read-only)."""
    return MappingProxyType(_MODELS)
