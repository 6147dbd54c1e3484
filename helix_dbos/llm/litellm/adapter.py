"""``LiteLLMAdapter``: the production :class:`LLMAdapter`, one ``litellm.acompletion`` call per step.

**The engine owns retries and fallbacks.** Every call passes ``num_retries=0`` (the openai SDK
under LiteLLM would otherwise retry twice, invisibly) and ``timeout=config.timeout_seconds``
(LiteLLM's default is 6000 s). The config's chain (``model``, then ``fallbacks``) is tried in
order; each model is retried by its :class:`~helix_dbos.llm.retry.RetryPolicy` with backoff or the
server's ``Retry-After``, and fails over by the rules of :mod:`helix_dbos.llm.retry`. The final
failure is returned as ``ErrorStepResult`` so the durable step records it as data, and every
attempt is on the result (``model_attempts``): the step's recorded output says which model
answered, so a replay reads it and calls no model.

LiteLLM is an optional dependency (the ``litellm`` extra) and takes seconds to import, so it is
imported on first use (:func:`import_litellm`), never when this module is; that first import sets
LiteLLM's offline switches (``LITELLM_LOCAL_MODEL_COST_MAP`` and friends) unless the environment
does (see :mod:`helix_dbos._litellm_import`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, ClassVar

from helix_dbos._litellm_import import import_litellm_offline
from helix_dbos.errors import HelixError, ModelFallbacksExhaustedError
from helix_dbos.llm.base import LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.files import FileKind
from helix_dbos.llm.litellm.cost import call_cost_usd
from helix_dbos.llm.litellm.errors import classify_provider_error
from helix_dbos.llm.litellm.request import DEFAULT_STRICT_TOOL_PROVIDERS, LiteLLMRequest, build_request
from helix_dbos.llm.litellm.response import (
    RawResponse,
    parsed_calls,
    raw_response_from_completion,
    step_result,
    token_usage,
)
from helix_dbos.llm.litellm.send_gate_transport import install_send_gate
from helix_dbos.llm.litellm.streaming import CallbackFailed, StreamAccumulator, notify, stream_was_cut
from helix_dbos.llm.retry import Move, next_move, retry_delay_seconds
from helix_dbos.llm.send_slot import LeavingRequest, claim_send_slot, claims_active, request_leaving
from helix_dbos.step_result import AttemptOutcome, ErrorStepResult, ModelAttempt, StepResult, TokenUsage

__all__ = ["LITELLM_INSTALL_HINT", "LiteLLMAdapter", "import_litellm"]

LITELLM_INSTALL_HINT = "pip install 'helix-dbos[litellm]'"
"""How to get LiteLLM, named in the error raised when it is missing."""

_unclaimed_logger = logging.getLogger("helix_dbos.llm.litellm")

_OUTCOME_OF: dict[Move, AttemptOutcome] = {"retry": "retried", "fall_back": "fell_back", "fail": "failed"}

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
    global _send_gate_installed
    if _send_gate_installed is None:
        _send_gate_installed = install_send_gate(litellm)
    return litellm


_send_gate_installed: bool | None = None
"""Whether LiteLLM's transports claim send slots themselves (:mod:`~helix_dbos.llm.litellm.send_gate_transport`)."""


@asynccontextmanager
async def _sending(model: str) -> AsyncIterator[None]:
    """Around one ``acompletion``: its requests claim their send slots at the transport, or here.

    Without the transport gate, the slot is claimed here, just before the call. With it, a call
    that got a response although no request of it passed a gated transport (a client LiteLLM built
    before the gate was installed) is counted now, so the window still holds every request sent.
    """
    if not _send_gate_installed:
        slot = await claim_send_slot(model)
        try:
            yield
        finally:
            slot.sent()  # the call is over: its requests left before now
        return
    with request_leaving(model) as leaving:
        try:
            yield
        except Exception as exc:
            if getattr(exc, "status_code", None) is not None:  # the provider answered: the request left
                await _count_unclaimed(leaving)
            raise
        await _count_unclaimed(leaving)


async def _count_unclaimed(leaving: LeavingRequest) -> None:
    if leaving.claims == 0 and claims_active():
        _unclaimed_logger.warning(
            "a request to %s left through an HTTP client without the send gate; counted after it was sent",
            leaving.model,
        )
        (await claim_send_slot(leaving.model)).sent()  # it already arrived: the interval holds it


class _Aborted(Exception):
    """The run's abort signal fired between two stream chunks."""


class LiteLLMAdapter:
    """:class:`LLMAdapter` over ``litellm.acompletion``; see :mod:`helix_dbos.llm.litellm` for the contract.

    ``sleep`` is the backoff sleep (inject a fake in tests); ``strict_tool_providers`` overrides the
    providers that receive strict tool schemas. Callbacks may observe a failed attempt's partial
    output: ``on_error`` fires before each retry, and the next attempt streams from the start.
    """

    claims_send_slots: ClassVar[bool] = True
    """Each HTTP request claims its own send slot of a rate limit, at the transport (see ``_sending``)."""

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
        """Call the model chain: each model with its retries, then the next; failures return ``ErrorStepResult``.

        Every attempt is recorded on the result (``model_attempts``), and the usage of attempts
        that were billed but bought nothing is kept apart (``failed_attempts_usage``).
        """
        litellm = import_litellm()
        callbacks = input.callbacks or LLMStreamCallbacks()
        chain = input.config.model_chain()
        run = _ChainRun()
        for index, config in enumerate(chain):
            has_next = index < len(chain) - 1
            ended = await self._call_model(
                litellm,
                replace(input, config=config),
                callbacks,
                run,
                has_next=has_next,
                fallback_on=input.config.fallback_on,
            )
            if ended is not None:
                return ended
        raise AssertionError("unreachable: the last model of a chain never falls back")

    async def _call_model(
        self,
        litellm: Any,
        input: LLMGenerateInput,
        callbacks: LLMStreamCallbacks,
        run: _ChainRun,
        *,
        has_next: bool,
        fallback_on: frozenset[str],
    ) -> StepResult | None:
        """One model of the chain, retried by its policy; ``None`` means: fall back to the next model.

        ``fallback_on`` is the chain's (the primary config's), whatever a full-config fallback says.
        """
        config = input.config
        request = build_request(litellm, input, stream=self.stream, strict_providers=self._strict_providers)
        policy = config.retry_policy()
        attempt = 0
        while True:
            if _aborted(input):
                return run.cancelled(input)
            spent: list[TokenUsage] = []
            started_ms, started = time.time() * 1000, time.perf_counter()
            try:
                result = await self._attempt(litellm, request, input, callbacks, spent)
            except CallbackFailed as failed:
                raise failed.error from None
            except _Aborted:
                run.record(config.model, "aborted", started_ms, started, spent)
                return run.cancelled(input)
            except Exception as exc:
                error = classify_provider_error(exc, provider=request.provider)
            else:
                run.record(config.model, "answered", started_ms, started, spent)
                return run.answered(result)
            attempt += 1
            move = next_move(
                error,
                attempts_on_model=attempt,
                policy=policy,
                has_next_model=has_next,
                fallback_on=fallback_on,
            )
            delay = retry_delay_seconds(attempt - 1, error, policy) if move == "retry" else 0.0
            run.record(config.model, _OUTCOME_OF[move], started_ms, started, spent, error=error, wait_seconds=delay)
            if move == "fail":
                run.failures.append((config.model, error.code, error.status_code, attempt))
                self._log_failure(config.model, attempt, error, "failed")
                return run.failed(error)
            await notify(callbacks.error(error))
            if move == "fall_back":
                run.failures.append((config.model, error.code, error.status_code, attempt))
                self._log_failure(config.model, attempt, error, "falling back to the next model")
                return None
            self._logger.info(
                "LLM call to %s failed (attempt %d of %d): [%s] %s; retrying in %.2fs",
                config.model,
                attempt,
                policy.max_attempts,
                error.code,
                error.message,
                delay,
            )
            await self._sleep(delay)

    def _log_failure(self, model: str, attempts: int, error: HelixError, then: str) -> None:
        self._logger.warning(
            "LLM call to %s failed after %d attempt(s): [%s] %s; %s", model, attempts, error.code, error.message, then
        )

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
        return step_result(
            raw,
            calls,
            usage,
            structured_output=request.structured_output,
            strict_output_schema=request.strict_output_schema,
        )

    async def _complete(self, litellm: Any, request: LiteLLMRequest, callbacks: LLMStreamCallbacks) -> RawResponse:
        async with _sending(str(request.kwargs.get("model", ""))):
            completion = await litellm.acompletion(**request.kwargs)
        raw = raw_response_from_completion(completion)
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
        async with _sending(str(request.kwargs.get("model", ""))):
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


class _ChainRun:
    """What one step has gathered over its attempts: their records, billed failures, and per-model failures."""

    def __init__(self) -> None:
        self.attempts: list[ModelAttempt] = []
        self.billed: list[TokenUsage] = []
        """Usage of attempts that got a response (so were billed) and then failed; kept apart."""
        self.failures: list[tuple[str, str, int | None, int]] = []
        """``(model, code, status, attempts)`` of each model that failed for good, in order."""

    def record(
        self,
        model: str,
        outcome: AttemptOutcome,
        started_ms: float,
        started: float,
        spent: list[TokenUsage],
        *,
        error: HelixError | None = None,
        wait_seconds: float = 0.0,
    ) -> None:
        usage = spent[-1] if spent else None
        if outcome != "answered":
            self.billed.extend(spent)
        self.attempts.append(
            ModelAttempt(
                model=model,
                outcome=outcome,
                error_code=error.code if error is not None else None,
                status_code=error.status_code if error is not None else None,
                wait_seconds=round(wait_seconds, 6),
                started_at_ms=round(started_ms, 3),
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                usage=usage,
            )
        )

    def answered(self, result: StepResult) -> StepResult:
        return result.model_copy(update={"failed_attempts_usage": list(self.billed), "model_attempts": self.attempts})

    def failed(self, error: HelixError) -> ErrorStepResult:
        if len(self.failures) > 1:
            error = ModelFallbacksExhaustedError(self.failures, retryable=error.retryable)
        return ErrorStepResult(
            error=error,
            should_stop=True,
            stop_reason="error",
            failed_attempts_usage=list(self.billed),
            model_attempts=self.attempts,
        )

    def cancelled(self, input: LLMGenerateInput) -> ErrorStepResult:
        reason = input.abort_signal.reason if input.abort_signal is not None else None
        error = HelixError(
            f"LLM call aborted: {reason or 'no reason given'}", code="framework_cancelled", retryable=False
        )
        return ErrorStepResult(
            error=error,
            should_stop=True,
            stop_reason="error",
            failed_attempts_usage=list(self.billed),
            model_attempts=self.attempts,
        )
