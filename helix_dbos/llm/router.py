"""Route LLM steps to different adapters by model-string prefix.

One executor can host agents on different back ends: real providers through LiteLLM, and a
scripted model (the demo's, or a test's) under a prefix of its own such as ``helix/``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, check_input_files
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.files import FileKind
from helix_dbos.step_result import StepResult


class ModelRouter:
    """An :class:`LLMAdapter` that delegates by the longest matching model prefix."""

    def __init__(self, routes: Mapping[str, LLMAdapter], default: LLMAdapter) -> None:
        self._routes = sorted(routes.items(), key=lambda item: len(item[0]), reverse=True)
        self._default = default

    def adapter_for(self, model: str) -> LLMAdapter:
        """The adapter that serves ``model``."""
        return next((adapter for prefix, adapter in self._routes if model.startswith(prefix)), self._default)

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Delegate to the adapter for ``input.config.model``.

        A model chain (``LLMConfig.fallbacks``) goes whole to the primary model's adapter, which
        tries the fallbacks itself: the step's attempts are then one adapter's record, in order.
        """
        return await self.adapter_for(input.config.model).generate_step(input)

    def check_input_files(self, config: LLMConfig, kinds: Collection[FileKind]) -> None:
        """Ask the adapter that serves ``config.model`` whether it takes these files."""
        check_input_files(self.adapter_for(config.model), config, kinds)
