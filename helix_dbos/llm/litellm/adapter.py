"""``LiteLLMAdapter``: the production :class:`LLMAdapter`, one ``litellm.acompletion`` call per step.

**The engine owns retries.** Every call passes ``num_retries=0`` (the openai SDK under LiteLLM
would otherwise retry twice, invisibly) and ``timeout=config.timeout_seconds`` (LiteLLM's default
is 6000 s). Retryable failures are retried here, ``config.max_retries`` times, with exponential
backoff and jitter (base 0.5 s, cap 20 s) or the server's ``Retry-After``; after that the failure
is returned as ``ErrorStepResult`` so the durable step records it as data.

LiteLLM is an optional dependency (the ``litellm`` extra) and takes seconds to import, so it is
imported on first use (:func:`import_litellm`), never when this module is; that first import sets
LiteLLM's offline switches (``LITELLM_LOCAL_MODEL_COST_MAP`` and friends) unless the environment
does (see :mod:`helix_dbos._litellm_import`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from helix_dbos._litellm_import import import_litellm_offline
from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.files import FileKind
from helix_dbos.llm.litellm.cost import call_cost_usd
from helix_dbos.llm.litellm.errors import classify_provider_error, retry_delay_seconds
from helix_dbos.llm.litellm.request import DEFAULT_STRICT_TOOL_PROVIDERS, LiteLLMRequest, build_request
from helix_dbos.llm.litellm.response import (
    RawResponse,
    parsed_calls,
    raw_response_from_completion,
    step_result,
    token_usage,
)
from helix_dbos.llm.litellm.streaming import CallbackFailed, StreamAccumulator, notify, stream_was_cut
from helix_dbos.step_result import ErrorStepResult, StepResult, TokenUsage

__all__ = ["LITELLM_INSTALL_HINT", "LiteLLMAdapter", "import_litellm"]

LITELLM_INSTALL_HINT = "pip install 'helix-dbos[litellm]'"
"""How to get LiteLLM, named in the error raised when it is missing."""

_FILE_ABILITIES = {"image": "supports_vision", "pdf": "supports_pdf_input", "audio": "supports_audio_input"}
_FILE_NOUNS = {"image": "images", "pdf": "PDFs", "audio": "audio"}


def import_litellm() -> Any:
    """Import LiteLLM on first use, offline; without it, a one-line :class:`ImportError` with the install hint."""
    try:
        litellm = import_litellm_offline()
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"LiteLLMAdapter needs LiteLLM, which is not installed: {LITELLM_INSTALL_HINT}", name=exc.name
        ) from exc
    litellm.suppress_debug_info = True  # otherwise every error prints "Give Feedback / Get Help"
    return litellm


class _Aborted(Exception):
    """The run's abort signal fired between two stream chunks."""


class LiteLLMAdapter:
    """:class:`LLMAdapter` over ``litellm.acompletion``; see :mod:`helix_dbos.llm.litellm` for the contract.

    ``sleep`` is the backoff sleep (inject a fake in tests); ``strict_tool_providers`` overrides the
    providers that receive strict tool schemas. Callbacks may observe a failed attempt's partial
    output: ``on_error`` fires before each retry, and the next attempt streams from the start.
    """

    def __init__(
        self,
        *,
        stream: bool = True,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        strict_tool_providers: Collection[str] = DEFAULT_STRICT_TOOL_PROVIDERS,
    ) -> None:
        self.stream = stream
        self._logger = logger or logging.getLogger("helix_dbos.llm")
        self._sleep = sleep
        self._strict_providers = frozenset(strict_tool_providers)

    def check_input_files(self, config: LLMConfig, kinds: Collection[FileKind]) -> None:
        """Refuse, before a run starts, files the agent's model does not take (``validation_error``).

        The rule reads LiteLLM's bundled model map (offline): a model LiteLLM knows is refused images
        unless ``supports_vision``, PDFs unless ``supports_pdf_input``, audio unless
        ``supports_audio_input``. A model it does not know (``openai/<anything>`` at an ``api_base``, a
        self-hosted one) is given the benefit of the doubt: its server answers for itself. Declare a
        known model's abilities with ``litellm.register_model`` if the map is wrong.
        """
        asked = sorted(k for k in kinds if k in _FILE_ABILITIES)
        if not asked:
            return
        litellm = import_litellm()
        try:
            litellm.get_model_info(config.model)
        except Exception:
            return  # not in LiteLLM's map
        from litellm import utils as litellm_utils

        refused = [k for k in asked if not getattr(litellm_utils, _FILE_ABILITIES[k])(config.model)]
        if refused:
            what = ", ".join(_FILE_NOUNS[k] for k in refused)
            raise HelixError(
                f"Model {config.model!r} does not take {what} (LiteLLM's model map says so); nothing was "
                "started. Use a model that does, or send the content as text.",
                code="validation_error",
                retryable=False,
            )

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Call the model, retrying retryable failures; provider failures return ``ErrorStepResult``."""
        litellm = import_litellm()
        request = build_request(litellm, input, stream=self.stream, strict_providers=self._strict_providers)
        callbacks = input.callbacks or LLMStreamCallbacks()
        max_retries = input.config.max_retries
        attempt = 0
        billed: list[TokenUsage] = []
        """Usage of attempts that got a response (so were billed) and then failed; kept apart."""
        while True:
            if _aborted(input):
                return _cancelled(input, billed)
            spent: list[TokenUsage] = []
            try:
                result = await self._attempt(litellm, request, input, callbacks, spent)
                return result.model_copy(update={"failed_attempts_usage": billed}) if billed else result
            except CallbackFailed as failed:
                raise failed.error from None
            except _Aborted:
                return _cancelled(input, billed + spent)
            except Exception as exc:
                error = classify_provider_error(exc, provider=request.provider)
            billed.extend(spent)
            if not error.retryable or attempt >= max_retries:
                self._logger.warning(
                    "LLM call to %s failed after %d attempt(s): [%s] %s",
                    input.config.model,
                    attempt + 1,
                    error.code,
                    error.message,
                )
                return ErrorStepResult(error=error, should_stop=True, stop_reason="error", failed_attempts_usage=billed)
            delay = retry_delay_seconds(attempt, error)
            self._logger.info(
                "LLM call to %s failed (attempt %d of %d): [%s] %s; retrying in %.2fs",
                input.config.model,
                attempt + 1,
                max_retries + 1,
                error.code,
                error.message,
                delay,
            )
            await notify(callbacks.error(error))
            await self._sleep(delay)
            attempt += 1

    async def _attempt(
        self,
        litellm: Any,
        request: LiteLLMRequest,
        input: LLMGenerateInput,
        callbacks: LLMStreamCallbacks,
        spent: list[TokenUsage],
    ) -> StepResult:
        """One call; its usage goes into ``spent`` as soon as the response is in.

        So an attempt that fails after that (its output unusable) is still known to have been billed.
        """
        if self.stream:
            raw, reported = await self._stream(litellm, request, input, callbacks)
        else:
            raw, reported = await self._complete(litellm, request, callbacks), 0
        model = str(request.kwargs.get("model") or input.config.model)
        usage = token_usage(raw.usage, model=model, cost_usd=call_cost_usd(litellm, model, raw.usage))
        if usage is not None:
            spent.append(usage)
        calls = parsed_calls(raw, request.strict_schemas)
        for call in calls[reported:]:
            await notify(callbacks.tool_call(call))
        return step_result(raw, calls, usage)

    async def _complete(self, litellm: Any, request: LiteLLMRequest, callbacks: LLMStreamCallbacks) -> RawResponse:
        raw = raw_response_from_completion(await litellm.acompletion(**request.kwargs))
        if raw.reasoning:
            await notify(callbacks.thinking(raw.reasoning, False))
            await notify(callbacks.thinking("", True))
        if raw.text:
            await notify(callbacks.text_delta(raw.text))
        return raw

    async def _stream(
        self,
        litellm: Any,
        request: LiteLLMRequest,
        input: LLMGenerateInput,
        callbacks: LLMStreamCallbacks,
    ) -> tuple[RawResponse, int]:
        """Consume a stream, reporting deltas live; returns the response and how many calls were reported."""
        stream = await litellm.acompletion(**request.kwargs)
        accumulator = StreamAccumulator(callbacks, request.strict_schemas)
        try:
            async for chunk in stream:
                if _aborted(input):
                    raise _Aborted()
                await accumulator.add(chunk)
        finally:
            await self._close(stream)
        raw = await accumulator.finish()
        if stream_was_cut(stream):
            # Name the broken tool call if there is one; it is the more useful message.
            parsed_calls(raw, request.strict_schemas)
            raise HelixError(
                "the stream ended without a finish reason (connection dropped?); the response is incomplete",
                code="provider_error",
                retryable=True,
            )
        return raw, accumulator.reported

    async def _close(self, stream: Any) -> None:
        """Release the connection even when the stream was abandoned; a failure to close is only logged."""
        closer = getattr(stream, "aclose", None)
        if closer is None:
            return
        try:
            await closer()
        except Exception:
            self._logger.debug("closing the LLM stream failed", exc_info=True)


def _aborted(input: LLMGenerateInput) -> bool:
    return input.abort_signal is not None and input.abort_signal.aborted


def _cancelled(input: LLMGenerateInput, billed: list[TokenUsage]) -> ErrorStepResult:
    reason = input.abort_signal.reason if input.abort_signal is not None else None
    error = HelixError(f"LLM call aborted: {reason or 'no reason given'}", code="framework_cancelled", retryable=False)
    return ErrorStepResult(error=error, should_stop=True, stop_reason="error", failed_attempts_usage=billed)
