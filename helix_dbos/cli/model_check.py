"""Agents' model strings checked before anything is written: one line, not a failed session.

``demo --model``, ``serve`` and ``worker`` run agents whose model strings a person typed. Three
mistakes are common and can be seen without calling a model:

- LiteLLM is not installed (the core install is lean): ``pip install 'helix-dbos[litellm]'``;
- the string names no provider LiteLLM knows (``opnai/gpt-4o-mini``, ``gpt4o-mini``) or no model
  helix-dbos serves itself (``helix/demo-scripte``): the hint lists similar names;
- the provider's API key is not set (``OPENAI_API_KEY``).

Left unchecked, each surfaces only once a run has started: the session is created, the first model
step fails, and the failure is reported as if a provider had refused a request that was never sent.
The checks read LiteLLM's offline tables (``get_llm_provider``, ``validate_environment``); no request
is made. The credential check is deliberately narrow: only providers that take nothing but an API
key, and only when the agent's ``LLMConfig`` names neither a key nor a server of its own, because
other credential sources (cloud roles, ``litellm.api_key`` set in code) cannot be seen from here.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import Any

from helix_dbos.agent import AgentConfig
from helix_dbos.cli.inputs import CliError
from helix_dbos.demo import DEMO_MODEL
from helix_dbos.sub_agent import sub_agents_of

__all__ = ["HELIX_MODELS", "check_agent_models", "check_model"]

HELIX_MODELS = (DEMO_MODEL,)
"""Model names helix-dbos serves itself (``launch()``'s default adapter routes them), not LiteLLM."""

_KEY_ONLY_PROVIDERS = frozenset(
    {"openai", "anthropic", "gemini", "mistral", "groq", "deepseek", "xai", "openrouter", "cohere", "cohere_chat"}
)
"""Providers whose only credential is an API-key variable, so a missing one is certain to fail."""


def check_agent_models(agents: Iterable[AgentConfig]) -> None:
    """Check the model of every agent (and of the agents they delegate to); see :func:`check_model`."""
    seen: set[str] = set()
    pending = list(agents)
    while pending:
        agent = pending.pop(0)
        if agent.name in seen:
            continue
        seen.add(agent.name)
        check_model(
            agent.llm_config.model,
            api_key=agent.llm_config.api_key,
            api_base=agent.llm_config.api_base,
            agent=agent.name,
        )
        pending.extend([*sub_agents_of(agent), *(c.agent for c in agent.persistent_agents)])


def check_model(model: str, *, api_key: Any = None, api_base: str | None = None, agent: str | None = None) -> None:
    """Raise a one-line :class:`CliError` if ``model`` cannot be run here; return otherwise.

    Exit code 2 for a model string that names nothing (a bad argument), 1 for what is missing on
    this machine (LiteLLM, an API key).
    """
    whose = f"agent {agent!r}: " if agent else ""
    if model.startswith(HELIX_MODELS):
        return
    if model.startswith("helix/"):
        raise CliError(f"{whose}unknown model {model!r}: helix-dbos serves {_names(HELIX_MODELS)}", exit_code=2)
    litellm = _litellm(model, whose)
    try:
        provider = str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception:
        raise CliError(f"{whose}unknown model {model!r}: {_unknown_hint(litellm, model)}", exit_code=2) from None
    if api_key is not None or api_base or provider not in _KEY_ONLY_PROVIDERS:
        return
    if getattr(litellm, "api_key", None) or getattr(litellm, f"{provider}_key", None):
        return  # set in code; LiteLLM uses it
    try:
        missing = list(litellm.validate_environment(model=model).get("missing_keys") or [])
    except Exception:
        return  # LiteLLM could not tell: the call will say
    if missing and all(name.endswith("_API_KEY") and not os.environ.get(name) for name in missing):
        raise CliError(
            f"{whose}model {model!r} needs an API key: set {' or '.join(missing)} (or LLMConfig.api_key)",
            exit_code=1,
        )


def _litellm(model: str, whose: str) -> Any:
    from helix_dbos.llm.litellm import LITELLM_INSTALL_HINT, import_litellm

    try:
        return import_litellm()
    except ImportError:
        raise CliError(
            f"{whose}model {model!r} needs LiteLLM, which is not installed: {LITELLM_INSTALL_HINT} "
            f"(or use the built-in {DEMO_MODEL})",
            exit_code=1,
        ) from None


def _unknown_hint(litellm: Any, model: str) -> str:
    """Why LiteLLM cannot place ``model``, and the closest names it (or helix-dbos) knows."""
    providers = [str(getattr(p, "value", p)) for p in litellm.provider_list]
    prefix, slash, rest = model.partition("/")
    if slash and prefix not in providers:
        close = difflib.get_close_matches(prefix, providers, n=2, cutoff=0.75)
        guesses = [f"{p}/{rest}" for p in close]
        reason = f"LiteLLM knows no provider {prefix!r}"
    else:
        names = [*litellm.model_cost, *HELIX_MODELS]
        guesses = [_qualified(litellm, n) for n in difflib.get_close_matches(model, names, n=3, cutoff=0.75)]
        reason = "LiteLLM cannot tell which provider serves it"
    hint = f" (did you mean {_names(guesses)}?)" if guesses else ""
    return f"{reason}{hint}; write provider/model, e.g. openai/gpt-4o-mini, or {DEMO_MODEL} (no key, offline)"


def _qualified(litellm: Any, name: str) -> str:
    """``name`` as ``provider/name`` when LiteLLM's table says which provider serves it."""
    provider = (litellm.model_cost.get(name) or {}).get("litellm_provider")
    return f"{provider}/{name}" if provider and "/" not in name else name


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    return listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " or " + listed[-1]
