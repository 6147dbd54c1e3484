"""Embeddings through LiteLLM (any provider it supports): ``MemoryConfig(embed=LiteLLMEmbedding(...))``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix_dbos._litellm_import import import_litellm_offline


class LiteLLMEmbedding:
    """An :data:`~helix_dbos.memory.base.EmbeddingFunction` calling ``litellm.embedding``.

    ``model`` is a LiteLLM model string (``"openai/text-embedding-3-small"``); ``api_base`` and
    ``api_key`` reach an OpenAI-compatible server of your own. Called from the embedding executor
    and from the memory search step, never from workflow code.
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None, **kwargs: Any) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.kwargs = kwargs

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        litellm = import_litellm_offline()  # imported on first use: it takes seconds to import

        response = litellm.embedding(
            model=self.model, input=list(texts), api_base=self.api_base, api_key=self.api_key, **self.kwargs
        )
        items = sorted(response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
        return [list(d["embedding"] if isinstance(d, dict) else d.embedding) for d in items]


__all__ = ["LiteLLMEmbedding"]
