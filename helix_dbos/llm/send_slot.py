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

A claim is an interval that holds the request's arrival at the provider: it opens when the slot
is claimed and closes when the sender reports that the request's bytes left
(:meth:`SendSlot.sent`): the transport reports when the request's headers were written (or, for a
transport that cannot say, when the response began), an adapter without such a transport when its
call returned. The gate counts a claim until a period after that report, so a send that left late
is counted where it arrived (:mod:`helix_dbos.runtime.send_gate` has the argument). An adapter
whose requests claim at the send says so with ``claims_send_slots = True``; the runtime claims
around any other adapter's call (:func:`counted_call`), so every adapter is gated.

Both live in the LLM layer as context variables, not as adapter arguments, so an adapter and its
HTTP client need no knowledge of limits, databases or runs; the variables travel with the step's
coroutine to the loop that runs it (``asyncio.run_coroutine_threadsafe`` copies the caller's
context) and into LiteLLM's worker thread (it copies the context too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol


class SendSlot(Protocol):
    """A claimed send slot; :meth:`sent` reports (once; later calls do nothing) that the request left."""

    def sent(self) -> None:
        """The request's bytes have left, or it can leave no more: the slot's interval closes now."""
        ...


class _NoSlot:
    """The slot of a request that claims nothing (no limit matches, or outside a model step)."""

    def sent(self) -> None:
        """Nothing to report."""


NO_SLOT: SendSlot = _NoSlot()
"""What :func:`claim_send_slot` returns when nothing was claimed."""

SendSlotClaim = Callable[[str], Awaitable[SendSlot]]
"""Waits until a request to the given model may be sent now, and claims its slot."""

_claim: ContextVar[SendSlotClaim | None] = ContextVar("helix_send_slot_claim", default=None)


@dataclass
class LeavingRequest:
    """The request an adapter is making (:func:`request_leaving`): its model and the claims its sends made."""

    model: str
    claims: int = 0
    """How many HTTP requests of this call claimed a slot at the send (0: none reached a gated transport)."""


_leaving: ContextVar[LeavingRequest | None] = ContextVar("helix_leaving_request", default=None)


async def claim_send_slot(model: str) -> SendSlot:
    """Wait for a send slot of ``model``'s limit, if the current model step has one (else :data:`NO_SLOT` at once).

    The caller reports the send on the slot it gets, as soon as the request has left.
    """
    claim = _claim.get()
    if claim is None:
        return NO_SLOT
    return await claim(model)


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


async def claim_at_send() -> SendSlot:
    """Called by an HTTP transport right before it writes a request: claim the slot of the request's model.

    Returns :data:`NO_SLOT` at once outside :func:`request_leaving` or outside a model step that claims.
    """
    leaving = _leaving.get()
    if leaving is None:
        return NO_SLOT
    slot = await claim_send_slot(leaving.model)
    leaving.claims += 1
    return slot


def adapter_claims_sends(adapter: object, model: str) -> bool:
    """Whether ``adapter``'s requests for ``model`` claim their own send slots (``claims_send_slots``).

    A router (an adapter with ``adapter_for(model)``) answers for the adapter it routes ``model`` to.
    """
    route = getattr(adapter, "adapter_for", None)
    if callable(route):
        adapter = route(model)
    return bool(getattr(adapter, "claims_send_slots", False))


@asynccontextmanager
async def counted_call(adapter: object, model: str) -> AsyncIterator[None]:
    """Around an adapter's call in a model step: claim before it and report after it, unless it claims itself.

    An adapter that does not claim at the send (a scripted one, a custom client) is counted from
    before its call to its end: its request left somewhere in between, so the interval holds it.
    """
    if not claims_active() or adapter_claims_sends(adapter, model):
        yield
        return
    slot = await claim_send_slot(model)
    try:
        yield
    finally:
        slot.sent()


@contextmanager
def send_slots(claim: SendSlotClaim | None) -> Iterator[None]:
    """Within the block, :func:`claim_send_slot` awaits ``claim`` (``None``: claims nothing)."""
    token = _claim.set(claim)
    try:
        yield
    finally:
        _claim.reset(token)


__all__ = [
    "NO_SLOT",
    "LeavingRequest",
    "SendSlot",
    "SendSlotClaim",
    "adapter_claims_sends",
    "claim_at_send",
    "claim_send_slot",
    "claims_active",
    "counted_call",
    "request_leaving",
    "send_slots",
]
