"""The exact gate of a provider rate limit: at most ``requests`` sends in any window, claimed at the send.

A limit's DBOS queue admits calls at the limit's rate (durably, across workers, without a thread
per waiting run), but it counts *admissions*, and a call reaches the provider some time after its
admission. So the ``exact`` mode of :class:`~helix_dbos.ProviderRateLimit` adds this gate at the
moment of sending: immediately before the request leaves (the adapter awaits
:func:`helix_dbos.llm.send_slot.claim_send_slot`), the call claims a send slot. A claim succeeds
when fewer than ``requests`` claims fall in the window ending now; otherwise the call sleeps until
the oldest of them leaves the window (computed, not polled) and claims again.

The window is ``period_s + send_margin_s``: a send that leaves up to ``send_margin_s`` after its
claim still cannot meet ``requests`` others in one ``period_s`` at the provider (the claims of any
``period_s`` of sends fall in one window of ``period_s + send_margin_s``). The margin costs that
fraction of the rate: ``requests`` per ``period_s + send_margin_s``.

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
from collections import deque
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


def wait_before_claim(claimed: list[float], now: float, window: SendWindow) -> float:
    """Seconds until a claim at ``now`` may succeed, given the sorted claim times in the window (0: now).

    The claim needs fewer than ``requests`` claims in ``(now - window_s, now]``; when the window is
    full, the ``len - requests + 1``-th oldest must leave it first.
    """
    live = [t for t in claimed if t > now - window.window_s]
    if len(live) < window.requests:
        return 0.0
    return max(live[len(live) - window.requests] + window.window_s - now, 1e-3)


class PostgresSendGate:
    """Claims send slots in ``helix_rate_sends``, shared by every process on the database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def try_claim(self, window: SendWindow) -> float:
        """Claim a slot now (returns 0) or say how long to wait before trying again (one transaction)."""
        with self._engine.begin() as conn:
            conn.execute(_CLAIM_LOCK, {"key": f"helix-rate-send:{window.limit_name}"})
            now = float(conn.execute(_NOW).scalar_one())
            since = now - window.window_s
            rows = conn.execute(_IN_WINDOW, {"name": window.limit_name, "since": since}).scalars()
            claimed = [float(t) for t in rows]
            wait = wait_before_claim(claimed, now, window)
            if wait == 0.0:
                conn.execute(sa.insert(rate_sends).values(limit_name=window.limit_name, claimed_at=now))
                conn.execute(
                    sa.delete(rate_sends).where(
                        rate_sends.c.limit_name == window.limit_name, rate_sends.c.claimed_at <= since
                    )
                )
            return wait

    async def claim(self, window: SendWindow) -> None:
        """Wait until a slot is free and claim it (the transaction runs off the event loop)."""
        while (wait := await asyncio.to_thread(self.try_claim, window)) > 0:
            await asyncio.sleep(wait)


class LocalSendGate:
    """The same rule in one process's memory (SQLite: a single process owns the database)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, deque[float]] = {}

    def try_claim(self, window: SendWindow) -> float:
        """Claim a slot now (returns 0) or say how long to wait before trying again."""
        with self._lock:
            now = time.monotonic()
            claims = self._claims.setdefault(window.limit_name, deque())
            while claims and claims[0] <= now - window.window_s:
                claims.popleft()
            wait = wait_before_claim(list(claims), now, window)
            if wait == 0.0:
                claims.append(now)
            return wait

    async def claim(self, window: SendWindow) -> None:
        """Wait until a slot is free and claim it."""
        while (wait := self.try_claim(window)) > 0:
            await asyncio.sleep(wait)


SendGate = PostgresSendGate | LocalSendGate

_local = LocalSendGate()


def send_gate_for(engine: Engine | None) -> SendGate:
    """The gate of a store's engine: shared in PostgreSQL, this process's own otherwise."""
    if engine is None or engine.dialect.name != "postgresql":
        return _local
    return PostgresSendGate(engine)


__all__ = [
    "LocalSendGate",
    "PostgresSendGate",
    "SendGate",
    "SendWindow",
    "send_gate_for",
    "wait_before_claim",
]
