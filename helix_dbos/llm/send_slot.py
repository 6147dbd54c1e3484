"""The point just before a model request leaves the process, where a send slot may be claimed.

A provider's rate limit counts requests as they *arrive*, so a limit counted anywhere earlier (at
a queue's admission, at the start of the model step) lets the time between that count and the send
(a loaded process's scheduling, the previous iteration's commit, the client's own work) push calls
counted in one window into the next one at the provider. An adapter therefore awaits
:func:`claim_send_slot` immediately before each request it sends (every attempt of every model of
a chain): the runtime sets, for the duration of one model step, what that claim does
(:func:`send_slots`; :mod:`helix_dbos.runtime.send_gate` claims a slot of the matching
:class:`~helix_dbos.ProviderRateLimit`). Outside such a step it does nothing.

The claim lives in the LLM layer as a context variable, not as an adapter argument, so an adapter
needs no knowledge of limits, databases or runs; the variable travels with the step's coroutine to
the loop that runs it (``asyncio.run_coroutine_threadsafe`` copies the caller's context).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SendSlotClaim = Callable[[str], Awaitable[None]]
"""Waits until a request to the given model may be sent now, and counts it as sent."""

_claim: ContextVar[SendSlotClaim | None] = ContextVar("helix_send_slot_claim", default=None)


async def claim_send_slot(model: str) -> None:
    """Wait for a send slot of ``model``'s limit, if the current model step has one (else return at once)."""
    claim = _claim.get()
    if claim is not None:
        await claim(model)


@contextmanager
def send_slots(claim: SendSlotClaim | None) -> Iterator[None]:
    """Within the block, :func:`claim_send_slot` awaits ``claim`` (``None``: claims nothing)."""
    token = _claim.set(claim)
    try:
        yield
    finally:
        _claim.reset(token)


__all__ = ["SendSlotClaim", "claim_send_slot", "send_slots"]
