"""Testing helpers for helix-dbos users: a scripted OpenAI-compatible server and scripted models.

``ScriptedOpenAIServer`` serves canned chat completions (streamed or not, with tool calls, errors,
delays and dropped connections) on 127.0.0.1, so tests drive the real LiteLLM adapter with no
network. ``MockLLMAdapter`` (re-exported here) scripts the model in-process.
``deterministic_embedding`` embeds texts without a model, for memory tests.
"""

from helix_dbos.llm.mock import MockLLMAdapter, MockResponse
from helix_dbos.testing.embeddings import deterministic_embedding
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer, ScriptedResponse, ScriptedToolCall

__all__ = [
    "MockLLMAdapter",
    "MockResponse",
    "ScriptedOpenAIServer",
    "ScriptedResponse",
    "ScriptedToolCall",
    "deterministic_embedding",
]
