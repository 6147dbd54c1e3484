"""The point where a model request leaves the process, where a send slot may be claimed.

A provider's rate limit counts requests as they *arrive*, so a limit counted anywhere earlier (at
a queue's admission, at the start of the model step, even just before ``litellm.acompletion``) lets
the time between that count and the send push calls counted in one window into the next one at
the provider. On a loaded machine that time is not small: LiteLLM hops through a thread pool and
builds the request before the first byte is written (measured 0.2-0.4 s).

So the claim is made by the HTTP client itself, immediately before it writes a request: an
adapter wraps each call in :func:`request_leaving` (which model the request is for), and the
transport of the HTTP client awaits :func:`claim_at_send` before it sends (for LiteLLM,
:mod:`helix_dbos.llm.litellm.send_gate_transport`). Every HTTP request counts, an SDK's own retry
included. An adapter whose client has no such transport awaits :func:`claim_send_slot` instead,
just before its call; and a call whose request left without a claim (a client built before the
transport was installed) is counted as soon as the adapter sees that (:attr:`LeavingRequest.claims`
is 0), so the slots already used stay counted.

What a claim does is set by the runtime for the duration of one model step (:func:`send_slots`;
:mod:`helix_dbos.runtime.send_gate` claims a slot of the matching
:class:`~helix_dbos.ProviderRateLimit`). Outside such a step nothing is claimed.

Both live in the LLM layer as context variables, not as adapter arguments, so an adapter and its
HTTP client need no knowledge of limits, databases or runs; the variables travel with the step's
coroutine to the loop that runs it (``asyncio.run_coroutine_threadsafe`` copies the caller's
context) and into LiteLLM's worker thread (it copies the context too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

SendSlotClaim = Callable[[str], Awaitable[None]]
"""Waits until a request to the given model may be sent now, and counts it as sent."""

_claim: ContextVar[SendSlotClaim | None] = ContextVar("helix_send_slot_claim", default=None)


@dataclass
class LeavingRequest:
    """The request an adapter is making (:func:`request_leaving`): its model and the claims its sends made."""

    model: str
    claims: int = 0
    """How many HTTP requests of this call claimed a slot at the send (0: none reached a gated transport)."""


_leaving: ContextVar[LeavingRequest | None] = ContextVar("helix_leaving_request", default=None)


async def claim_send_slot(model: str) -> None:
    """Wait for a send slot of ``model``'s limit, if the current model step has one (else return at once)."""
    claim = _claim.get()
    if claim is not None:
        await claim(model)


def claims_active() -> bool:
    """Whether the current model step claims send slots (a limit gated at the send matches its model)."""
    return _claim.get() is not None


@contextmanager
def request_leaving(model: str) -> Iterator[LeavingRequest]:
    """Within the block, HTTP requests that reach a gated transport claim a slot of ``model``'s limit."""
    leaving = LeavingRequest(model)
    token = _leaving.set(leaving)
    try:
        yield leaving
    finally:
        _leaving.reset(token)


async def claim_at_send() -> None:
    """Called by an HTTP transport right before it writes a request: claim the slot of the request's model.

    Returns at once outside :func:`request_leaving` or outside a model step that claims.
    """
    leaving = _leaving.get()
    if leaving is None:
        return
    await claim_send_slot(leaving.model)
    leaving.claims += 1


@contextmanager
def send_slots(claim: SendSlotClaim | None) -> Iterator[None]:
    """Within the block, :func:`claim_send_slot` awaits ``claim`` (``None``: claims nothing)."""
    token = _claim.set(claim)
    try:
        yield
    finally:
        _claim.reset(token)


__all__ = [
    "LeavingRequest",
    "SendSlotClaim",
    "claim_at_send",
    "claim_send_slot",
    "claims_active",
    "request_leaving",
    "send_slots",
]
