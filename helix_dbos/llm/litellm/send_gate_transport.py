"""LiteLLM's HTTP transports claim a send slot right before they send (the one place this reaches into LiteLLM).

A provider counts a rate limit at the arrival of each request, so the closest count we can make is
at the transport, the last step of the HTTP client before the bytes are written: everything
LiteLLM does between ``acompletion`` and the send (a hop through its thread pool, building the
request and the SDK client) then happens *before* the claim, not between the claim and the
send. On a loaded machine that work took 0.2-0.4 s, long enough to push a request claimed in one
window into the next at the provider.

Every asynchronous HTTP client LiteLLM builds, the openai SDK's (``openai/``, ``azure/``...) and
its own handler's (``anthropic/``, ``hosted_vllm/``...), gets its transport from one factory,
``AsyncHTTPHandler.create_async_transport`` (LiteLLM 1.106). :func:`install_send_gate` wraps that
factory once: each transport it makes awaits :func:`helix_dbos.llm.send_slot.claim_at_send`
before handling a request. The transport object stays the one LiteLLM made (only its
``handle_async_request`` is wrapped, on the instance), so LiteLLM's own checks of its type, its
session recycling and its close still see it. A request that reaches no gated transport
(a client built before the install, an environment proxy's transport, a provider with its own
client) is counted by the adapter after the call instead (:class:`~helix_dbos.llm.send_slot.LeavingRequest`).

After the claim, the transport reports when the request left (:meth:`~helix_dbos.llm.send_slot.SendSlot.sent`),
so the gate counts a late send where it arrived: an httpx transport (httpcore underneath) through
the request's ``trace`` extension, at ``http11.send_request_headers.complete`` (or the ``http2``
one), while the request is under way; any other transport (LiteLLM's aiohttp one, its default)
when its response began, which is later than the send and so still a bound of it.

This depends on a private factory of LiteLLM; ``tests/unit/test_litellm_send_gate.py`` pins it to
the installed version, so an upgrade that moves it fails there and not silently in production.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from helix_dbos.llm.send_slot import NO_SLOT, SendSlot, claim_at_send

_logger = logging.getLogger("helix_dbos.llm.litellm")

CHECKED_LITELLM_VERSION = "1.106.2"
"""The LiteLLM version whose transport factory this module was checked against (a test pins it)."""

_GATED = "_helix_send_gate"
"""Marks a wrapped factory and a gated transport, so installing twice wraps nothing twice."""


def gate_transport(transport: Any) -> Any:
    """Make ``transport`` (an httpx async transport) claim a send slot before each request; returns it."""
    if transport is None or getattr(transport, _GATED, False):
        return transport
    handle: Callable[[Any], Awaitable[Any]] = transport.handle_async_request

    @functools.wraps(handle)
    async def handle_async_request(request: Any) -> Any:
        slot = await claim_at_send()
        if slot is not NO_SLOT:  # a request nothing counts keeps its extensions as they were
            _report_headers_written(request, slot)
        try:
            return await handle(request)
        finally:
            slot.sent()  # the response began (or the request failed): it left by now, if ever

    transport.handle_async_request = handle_async_request
    setattr(transport, _GATED, True)
    return transport


_HEADERS_WRITTEN = ("http11.send_request_headers.complete", "http2.send_request_headers.complete")
"""httpcore's trace events for "this request's headers are written": the send, as near as it can be seen."""


def _report_headers_written(request: Any, slot: SendSlot) -> None:
    """Report ``slot`` sent as soon as httpcore has written the request's headers (before any response).

    Chains to a ``trace`` callback the request already had; transports that do not call it
    (aiohttp's) leave the report to the end of ``handle_async_request``.
    """
    extensions = getattr(request, "extensions", None)
    if not isinstance(extensions, dict):
        return
    previous = extensions.get("trace")

    async def trace(event_name: str, info: dict[str, Any]) -> None:
        if event_name in _HEADERS_WRITTEN:
            slot.sent()
        if previous is not None:
            await previous(event_name, info)

    extensions["trace"] = trace


def install_send_gate(litellm: Any) -> bool:
    """Wrap LiteLLM's async transport factory so every transport it makes is gated (idempotent).

    Returns whether the gate is installed; ``False`` (logged) when this LiteLLM has no such
    factory, and the adapter then claims before each call instead.
    """
    del litellm  # imported: the factory's module is importable now
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler
    except ImportError:  # pragma: no cover - depends on the LiteLLM version
        _logger.warning("LiteLLM has no AsyncHTTPHandler: rate limits are claimed before each call, not at the send")
        return False
    factory = AsyncHTTPHandler.__dict__.get("create_async_transport")
    if not isinstance(factory, staticmethod):  # pragma: no cover - depends on the LiteLLM version
        _logger.warning("LiteLLM's transport factory moved: rate limits are claimed before each call, not at the send")
        return False
    make = factory.__func__
    if getattr(make, _GATED, False):
        return True

    @functools.wraps(make)
    def create_async_transport(*args: Any, **kwargs: Any) -> Any:
        return gate_transport(make(*args, **kwargs))

    setattr(create_async_transport, _GATED, True)
    gated = staticmethod(create_async_transport)
    for name in ("create_async_transport", "_create_async_transport"):  # the factory and its alias
        setattr(AsyncHTTPHandler, name, gated)
    return True


__all__ = ["CHECKED_LITELLM_VERSION", "gate_transport", "install_send_gate"]
