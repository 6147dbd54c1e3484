"""The exact gate of a provider rate limit: at most ``requests`` sends in any window, claimed at the send.

A limit's DBOS queue admits calls at the limit's rate (durably, across workers, without a thread
per waiting run), but it counts *admissions*, and a call reaches the provider some time after its
admission. So the ``exact`` mode of :class:`~helix_dbos.ProviderRateLimit` adds this
gate at the moment of sending: as the request leaves (the HTTP client's transport awaits
:func:`helix_dbos.llm.send_slot.claim_at_send`), the call claims a send slot. A claim succeeds
when fewer than ``requests`` claims fall in the window ending now; otherwise the call sleeps until
the oldest of them leaves the window (computed, not polled) and claims again.

The window is ``period_s + send_margin_s``: a send that leaves up to ``send_margin_s`` after its
stamp still cannot meet ``requests`` others in one ``period_s`` at the provider (the stamps of any
``period_s`` of sends fall in one window of ``period_s + send_margin_s``). The margin costs that
fraction of the rate: ``requests`` per ``period_s + send_margin_s``. The stamp is taken inside the
claim's round trip (a thread hop, a transaction, the event loop's wake-up), so a claim whose round
trip took longer than half the margin (``SendWindow.fresh_s``; a loaded machine) gives its slot
back and is stamped again at once (:func:`claim_fresh`): the send then leaves within the margin
of its stamp.

- **PostgreSQL** (every worker on one database): one short transaction per claim in
  ``helix_rate_sends``, serialised per limit by a transaction-level advisory lock, stamped with the
  database's ``clock_timestamp()`` so the workers' own clocks do not matter. Claims past the window
  are pruned by the next claim.
- **SQLite** (one process): the same rule in memory, under a lock, on the process's clock.

The gate records nothing in the run: it runs inside the model step, whose recorded result is what
a replay returns, so a replay neither waits nor claims.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from helix_dbos.store.schema import rate_sends

_CLAIM_LOCK = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_NOW = sa.text("SELECT extract(epoch FROM clock_timestamp())::float8")
_IN_WINDOW = sa.text(
    "SELECT claimed_at FROM helix_rate_sends WHERE limit_name = :name AND claimed_at > :since ORDER BY claimed_at"
)


@dataclass(frozen=True)
class SendWindow:
    """What one limit allows: ``requests`` claims in any ``window_s`` (its period plus the send margin)."""

    limit_name: str
    requests: int
    window_s: float
    fresh_s: float = 0.0
    """How long a claim may take, from asking to having, and still be sent as claimed (0: any time).

    The stamp is taken somewhere inside that time, so a claim that took longer may leave more
    than the send margin after its stamp: it is stamped again (:func:`claim_fresh`)."""


@dataclass(frozen=True)
class ClaimTry:
    """One try at a claim: a slot (``stamp``, in the gate's clock), or how long to wait first."""

    wait_s: float
    stamp: float | None = None


def wait_before_claim(claimed: list[float], now: float, window: SendWindow) -> float:
    """Seconds until a claim at ``now`` may succeed, given the sorted claim times in the window (0: now).

    The claim needs fewer than ``requests`` claims in ``(now - window_s, now]``; when the window is
    full, the ``len - requests + 1``-th oldest must leave it first.
    """
    live = [t for t in claimed if t > now - window.window_s]
    if len(live) < window.requests:
        return 0.0
    return max(live[len(live) - window.requests] + window.window_s - now, 1e-3)


RESTAMPS = 2
"""How many times a slow claim is stamped again before it is sent as it is (a machine that slow
sends late whatever we do; the provider's ``429`` and its ``Retry-After`` are the last word)."""


async def claim_fresh(try_claim: Callable[[SendWindow, float | None], Awaitable[ClaimTry]], window: SendWindow) -> None:
    """Claim a slot whose stamp is at most ``window.fresh_s`` old when this returns.

    Waits (computed, not polled) while the window is full. A claim that took longer than
    ``fresh_s`` (the database, a thread hop, a busy event loop) gives its slot back and is
    stamped now instead, in one transaction: that always succeeds at once, since the window
    held the slot it frees, and it keeps the send within the margin of its stamp.
    """
    replacing: float | None = None
    restamps = 0
    while True:
        asked = time.monotonic()
        got = await try_claim(window, replacing)
        if got.stamp is None:
            await asyncio.sleep(got.wait_s)
            continue
        if window.fresh_s <= 0 or time.monotonic() - asked <= window.fresh_s or restamps >= RESTAMPS:
            return
        replacing, restamps = got.stamp, restamps + 1


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


def _turn(limit_name: str) -> asyncio.Lock:
    """Whose turn it is to claim a slot of ``limit_name`` in this process (one lock per event loop)."""
    locks = _turns.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(limit_name, asyncio.Lock())


class PostgresSendGate:
    """Claims send slots in ``helix_rate_sends``, shared by every process on the database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def try_claim(self, window: SendWindow, replacing: float | None = None) -> ClaimTry:
        """Claim a slot now, or say how long to wait (one transaction); ``replacing``: a slot to give back first."""
        with self._engine.begin() as conn:
            conn.execute(_CLAIM_LOCK, {"key": f"helix-rate-send:{window.limit_name}"})
            if replacing is not None:
                conn.execute(
                    sa.delete(rate_sends).where(
                        rate_sends.c.limit_name == window.limit_name, rate_sends.c.claimed_at == replacing
                    )
                )
            now = float(conn.execute(_NOW).scalar_one())
            since = now - window.window_s
            rows = conn.execute(_IN_WINDOW, {"name": window.limit_name, "since": since}).scalars()
            claimed = [float(t) for t in rows]
            wait = wait_before_claim(claimed, now, window)
            if wait > 0.0:
                return ClaimTry(wait)
            conn.execute(sa.insert(rate_sends).values(limit_name=window.limit_name, claimed_at=now))
            conn.execute(
                sa.delete(rate_sends).where(
                    rate_sends.c.limit_name == window.limit_name, rate_sends.c.claimed_at <= since
                )
            )
            return ClaimTry(0.0, now)

    async def claim(self, window: SendWindow) -> None:
        """Wait until a slot is free and claim it (each transaction runs off the event loop).

        One claim of a limit at a time per process (the others queue behind it, in order): calls
        waiting for a full window would otherwise all wake when its oldest claim leaves it and
        all try, one transaction each under the limit's lock, for the one slot that freed.
        """

        async def try_claim(w: SendWindow, replacing: float | None) -> ClaimTry:
            return await asyncio.to_thread(self.try_claim, w, replacing)

        async with _turn(window.limit_name):
            await claim_fresh(try_claim, window)


class LocalSendGate:
    """The same rule in one process's memory (SQLite: a single process owns the database)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, deque[float]] = {}

    def try_claim(self, window: SendWindow, replacing: float | None = None) -> ClaimTry:
        """Claim a slot now, or say how long to wait; ``replacing``: a slot to give back first."""
        with self._lock:
            now = time.monotonic()
            claims = self._claims.setdefault(window.limit_name, deque())
            if replacing is not None and replacing in claims:
                claims.remove(replacing)
            while claims and claims[0] <= now - window.window_s:
                claims.popleft()
            wait = wait_before_claim(list(claims), now, window)
            if wait > 0.0:
                return ClaimTry(wait)
            claims.append(now)
            return ClaimTry(0.0, now)

    async def claim(self, window: SendWindow) -> None:
        """Wait until a slot is free and claim it."""

        async def try_claim(w: SendWindow, replacing: float | None) -> ClaimTry:
            return self.try_claim(w, replacing)

        await claim_fresh(try_claim, window)


SendGate = PostgresSendGate | LocalSendGate

_local = LocalSendGate()


def send_gate_for(engine: Engine | None) -> SendGate:
    """The gate of a store's engine: shared in PostgreSQL, this process's own otherwise."""
    if engine is None or engine.dialect.name != "postgresql":
        return _local
    return PostgresSendGate(engine)


__all__ = [
    "RESTAMPS",
    "ClaimTry",
    "LocalSendGate",
    "PostgresSendGate",
    "SendGate",
    "SendWindow",
    "claim_fresh",
    "send_gate_for",
    "wait_before_claim",
]
