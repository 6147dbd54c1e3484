"""The LiteLLM adapter: any provider LiteLLM speaks, behind helix's :class:`LLMAdapter` contract.

One concept per module:

* :mod:`~helix_dbos.llm.litellm.adapter`: :class:`LiteLLMAdapter`, the attempt / retry loop and the
  lazy import of LiteLLM (an optional extra: ``pip install 'helix-dbos[litellm]'``);
* :mod:`~helix_dbos.llm.litellm.request`: helix messages and tools -> ``litellm.acompletion`` kwargs;
* :mod:`~helix_dbos.llm.litellm.schema`: strict-mode JSON schemas for tools and outputs;
* :mod:`~helix_dbos.llm.litellm.errors`: provider exceptions -> ``provider_*`` :class:`HelixError`
  codes (with the server's ``Retry-After``); the retry and fallback rules are
  :mod:`helix_dbos.llm.retry`'s;
* :mod:`~helix_dbos.llm.litellm.streaming`: stream chunks -> a raw response, deltas reported live;
* :mod:`~helix_dbos.llm.litellm.response`: a raw response -> the step's :data:`StepResult`.

What the adapter guarantees, and why:

* **The engine owns retries and fallbacks** (``num_retries=0`` to LiteLLM, and ``provider_options``
  may not turn its retries or fallbacks on; each model of ``LLMConfig``'s chain retried by its
  ``RetryPolicy`` with backoff or the server's ``Retry-After``, then the next; every attempt on the
  result as ``model_attempts``; the final failure returned as ``ErrorStepResult``, data the step
  records).
* **Request dicts are built explicitly** from helix messages (never ``message.model_dump()``,
  which on LiteLLM 1.106.2 leaks ``provider_specific_fields`` into the next request).
* **Truncated streams are failures.** LiteLLM 1.106.2 ends a stream whose connection dropped as if
  it had finished (synthesised ``finish_reason="stop"``, half a tool-call JSON). A stream that
  ended without a provider finish reason, or a tool call whose arguments are not valid JSON, is a
  retryable ``provider_error``. (Exception: with ``finish_reason="length"`` the arguments were cut
  by ``max_output_tokens``; retrying would cut them again, so the raw string is kept and the step
  reports ``stop_reason="max_tokens"`` for the orchestration layer to recover from.)
* **The loop is driven by tool calls, not finish reasons**: LiteLLM 1.106.2 streaming keeps
  ``stop`` even when tool calls were returned.

Strict tools (seed 003 "Strict (constrained) structured output"): a tool with ``strict=True`` (the
``__finish__`` tool gets it from ``LLMConfig.strict_output``) is sent with ``"strict": true`` and a
strict-form schema (see :func:`to_strict_json_schema`) only when the provider is in
``strict_tool_providers`` (default :data:`DEFAULT_STRICT_TOOL_PROVIDERS`: ``openai``, ``azure``,
``azure_ai``). The rule is by provider, not by LiteLLM's model table, because ``openai/<anything>``
against an ``api_base`` is an unregistered model that LiteLLM knows nothing about but forwards
``strict`` byte-for-byte. Elsewhere the tool is sent as usual, a safe no-op as the seed requires
(LiteLLM 1.106.2 drops ``strict`` for ``anthropic/`` and ``hosted_vllm/`` anyway). Strict form makes
optional fields nullable, so ``null`` arguments for fields whose original schema does not allow
null are removed from the parsed arguments, letting the tool's defaults apply.
"""

from helix_dbos.llm.litellm.adapter import LITELLM_INSTALL_HINT, LiteLLMAdapter, import_litellm
from helix_dbos.llm.litellm.errors import classify_provider_error, retry_delay_seconds
from helix_dbos.llm.litellm.request import DEFAULT_STRICT_TOOL_PROVIDERS
from helix_dbos.llm.litellm.schema import to_strict_json_schema

__all__ = [
    "DEFAULT_STRICT_TOOL_PROVIDERS",
    "LITELLM_INSTALL_HINT",
    "LiteLLMAdapter",
    "classify_provider_error",
    "import_litellm",
    "retry_delay_seconds",
    "to_strict_json_schema",
]
