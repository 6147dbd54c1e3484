"""The exact gate of a provider rate limit: at most ``requests`` arrivals in any period, claimed at the send.

A limit's DBOS queue admits calls at the limit's rate (durably, across workers, without a thread
per waiting run), but it counts *admissions*, and a call reaches the provider some time after its
admission. So the ``exact`` mode of :class:`~helix_dbos.ProviderRateLimit` (the default) adds this
gate at the moment of sending: as the request leaves (the HTTP client's transport awaits
:func:`helix_dbos.llm.send_slot.claim_at_send`), the call claims a send slot, and once its bytes
are written it says so (:meth:`ClaimedSlot.sent`).

**Each claim is an interval** ``[claimed_at, sent_by]`` that surely holds the request's arrival at
the provider. ``claimed_at`` is the gate's clock when the claim succeeded. ``sent_by`` is
unknown (``NULL``) until the sender reports the send; it is then ``claimed_at + max(send_margin_s,
elapsed + SEND_SLACK_S)``, where ``elapsed`` runs on the sender's monotonic clock from just before
the gate's clock was read to the moment the request's headers were written. So however late a
loaded process sends after its claim, ``sent_by`` bounds the arrival; and a claim whose sender has
not reported yet counts as if its request could still arrive, for up to :data:`UNSENT_BOUND_S`
(a process that died between its claim and its report frees the slot then).

**The rule**: a claim at ``now`` succeeds when fewer than ``requests`` claims may still have an
arrival in ``(now - period_s, now]``: those with ``sent_by > now - period_s``, and those not yet
reported. With every send on time (``sent_by = claimed_at + send_margin_s``) that is the rule of a
rolling window of ``period_s + send_margin_s`` over the stamps, as before.

**Why ``requests + 1`` arrivals never share one period** ``[t, t + period_s)``. Suppose they did;
take ``k``, the one of them claimed last. Claims of a limit are serialised (an advisory lock on
PostgreSQL, a lock in memory) and each is stamped inside its turn, so every other claim ``i`` of
the ``requests + 1`` was committed before ``k`` looked, with ``claimed_at_i <= claimed_at_k``. When
``k`` looked, ``i`` was either not yet reported (so it counted), or reported with ``sent_by_i >=
a_i`` (its arrival) ``> a_k - period_s >= claimed_at_k - period_s`` (both arrivals are in one
period, and ``k`` cannot arrive before its claim), so it counted too. ``k`` then saw ``requests``
claims that count and could not succeed. The bound ``sent_by_i >= a_i`` holds because ``elapsed``
started before the stamp was taken and ended when the bytes left (the provider's arrival is that
plus the network's delay, which ``SEND_SLACK_S`` and the margin's floor cover); a transport that
cannot say when its headers were written reports when its response began (later still: sound,
at some cost in rate).

- **PostgreSQL** (every worker on one database): one short transaction per claim in
  ``helix_rate_sends``, serialised per limit by a transaction-level advisory lock, stamped with the
  database's ``clock_timestamp()`` so the workers' own clocks do not matter; the report is one
  ``UPDATE`` of the claim's row, committed from a thread at once, while the request is under way.
  Claims that no longer count are pruned by the next claim.
- **SQLite** (one process): the same rule in memory, under a lock, on the process's clock.

There is no restamping: a claim whose own round trip was slow costs nothing more than its real
lateness, which ``sent_by`` now measures (stamping it again would only move the same interval).

The gate records nothing in the run: it runs inside the model step, whose recorded result is what
a replay returns, so a replay neither waits nor claims.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from helix_dbos.store.schema import rate_sends

_logger = logging.getLogger("helix_dbos.rate_limits")

UNSENT_BOUND_S = 30.0
"""How long after its stamp a claim whose send was never reported still counts (its process died,
or hung that long between the claim and the send)."""
SEND_SLACK_S = 0.005
"""Added to a reported send's elapsed time: the bytes reach the provider a little after they left."""
REPORT_POLL_S = 0.02
"""How soon a claim waiting on a not-yet-reported claim looks again (reports come milliseconds after a send)."""

_CLAIM_LOCK = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_NOW = sa.text("SELECT extract(epoch FROM clock_timestamp())::float8")
_COUNTED_UNTIL = sa.func.coalesce(rate_sends.c.sent_by, rate_sends.c.claimed_at + UNSENT_BOUND_S)
"""Until when (minus the period) a row may hold an arrival: its reported ``sent_by``, else the unsent bound."""


@dataclass(frozen=True)
class SendWindow:
    """What one limit allows: ``requests`` arrivals in any ``period_s``, each claim counted ``margin_s`` or more."""

    limit_name: str
    requests: int
    period_s: float
    margin_s: float = 0.0
    """The least ``sent_by - claimed_at`` of a claim (its send reported on time, or not at all yet)."""

    @property
    def window_s(self) -> float:
        """``period_s + margin_s``: the window over the stamps when every send is on time."""
        return self.period_s + self.margin_s


Claim = tuple[float, float | None]
"""One claim as the gate stores it: ``(claimed_at, sent_by)``; ``sent_by`` ``None`` until reported."""


def counted_until(claim: Claim, now: float, window: SendWindow) -> float:
    """When ``claim`` stops counting against new claims, as far as is known at ``now``.

    Reported: ``sent_by + period_s``. Not reported: it counts for as long as its request could
    arrive; its report is expected soon, with ``sent_by`` at least ``claimed_at + margin_s``, so a
    wait for it is that (or a short poll, when that has passed), at most the unsent bound.
    """
    claimed_at, sent_by = claim
    if sent_by is not None:
        return sent_by + window.period_s
    latest = claimed_at + UNSENT_BOUND_S + window.period_s
    return min(latest, max(claimed_at + window.margin_s + window.period_s, now + REPORT_POLL_S))


def wait_before_claim(claims: Iterable[Claim], now: float, window: SendWindow) -> float:
    """Seconds until a claim at ``now`` may succeed (0: now), given the limit's claims.

    It needs fewer than ``requests`` claims still counting (:func:`counted_until` after ``now``);
    when there are more, the ``len - requests + 1``-th to stop counting must stop first.
    """
    ends = sorted(end for end in (counted_until(c, now, window) for c in claims) if end > now)
    if len(ends) < window.requests:
        return 0.0
    return max(ends[len(ends) - window.requests] - now, 1e-3)


def sent_by(claimed_at: float, elapsed_s: float, window: SendWindow) -> float:
    """The reported bound of a claim whose request left ``elapsed_s`` after the gate's clock was read."""
    return claimed_at + max(window.margin_s, elapsed_s + SEND_SLACK_S)


@dataclass(frozen=True)
class ClaimTry:
    """One try at a claim: a slot (``stamp``, in the gate's clock), or how long to wait first.

    ``asked``: this process's monotonic clock just before the gate's clock was read.
    """

    wait_s: float
    stamp: float | None = None
    asked: float = 0.0


class ClaimedSlot:
    """A claim made: :meth:`sent` reports, once, that its request has left (or never will)."""

    def __init__(
        self, window: SendWindow, stamp: float, asked: float, record: Callable[[SendWindow, float, float], None]
    ) -> None:
        self.window = window
        self.stamp = stamp
        """When the claim succeeded, in the gate's clock."""
        self._asked = asked
        self._record = record
        self.reported: float | None = None
        """The ``sent_by`` reported (``None``: not yet)."""

    def sent(self) -> None:
        """The request's bytes have left (or it failed before they could): record ``sent_by`` now.

        Called as soon as that is known, while the request is still under way; later calls do
        nothing, so a transport may also call it when the request ends, to be sure.
        """
        if self.reported is not None:
            return
        self.reported = sent_by(self.stamp, time.monotonic() - self._asked, self.window)
        self._record(self.window, self.stamp, self.reported)


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


def _turn(limit_name: str) -> asyncio.Lock:
    """Whose turn it is to claim a slot of ``limit_name`` in this process (one lock per event loop)."""
    locks = _turns.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(limit_name, asyncio.Lock())


_reporter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="helix-send-report")
"""Commits sends' reports off the event loop and off the request's path (each is one ``UPDATE``)."""


class PostgresSendGate:
    """Claims send slots in ``helix_rate_sends``, shared by every process on the database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def try_claim(self, window: SendWindow) -> ClaimTry:
        """Claim a slot now, or say how long to wait (one transaction)."""
        with self._engine.begin() as conn:
            conn.execute(_CLAIM_LOCK, {"key": f"helix-rate-send:{window.limit_name}"})
            asked = time.monotonic()  # before the stamp: elapsed from here bounds the send's lateness
            now = float(conn.execute(_NOW).scalar_one())
            since = now - window.period_s
            mine = rate_sends.c.limit_name == window.limit_name
            counting = sa.select(rate_sends.c.claimed_at, rate_sends.c.sent_by).where(mine, since < _COUNTED_UNTIL)
            rows = conn.execute(counting)
            claims = [(float(at), None if by is None else float(by)) for at, by in rows]
            wait = wait_before_claim(claims, now, window)
            if wait > 0.0:
                return ClaimTry(wait)
            conn.execute(sa.insert(rate_sends).values(limit_name=window.limit_name, claimed_at=now, sent_by=None))
            conn.execute(sa.delete(rate_sends).where(mine, since >= _COUNTED_UNTIL))
            return ClaimTry(0.0, now, asked)

    def report(self, window: SendWindow, stamp: float, sent_by: float) -> None:
        """Record a claim's ``sent_by`` (one committed ``UPDATE``; no lock: either value is safe to read)."""
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(rate_sends)
                .where(rate_sends.c.limit_name == window.limit_name, rate_sends.c.claimed_at == stamp)
                .values(sent_by=sent_by)
            )

    def _report_soon(self, window: SendWindow, stamp: float, bound: float) -> None:
        def report() -> None:
            try:
                self.report(window, stamp, bound)
            except Exception:  # the claim then counts until the unsent bound: safe, only slower
                _logger.warning("could not record a send of rate limit %s", window.limit_name, exc_info=True)

        _reporter.submit(report)

    async def claim(self, window: SendWindow) -> ClaimedSlot:
        """Wait until a slot is free and claim it (each transaction runs off the event loop).

        One claim of a limit at a time per process (the others queue behind it, in order): calls
        waiting for a full window would otherwise all wake when its oldest claim leaves it and
        all try, one transaction each under the limit's lock, for the one slot that freed.
        """
        async with _turn(window.limit_name):
            while True:
                got = await asyncio.to_thread(self.try_claim, window)
                if got.stamp is not None:
                    return ClaimedSlot(window, got.stamp, got.asked, self._report_soon)
                await asyncio.sleep(got.wait_s)


class LocalSendGate:
    """The same rule in one process's memory (SQLite: a single process owns the database)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, dict[float, float | None]] = {}

    def try_claim(self, window: SendWindow) -> ClaimTry:
        """Claim a slot now, or say how long to wait."""
        with self._lock:
            now = time.monotonic()
            claims = self._claims.setdefault(window.limit_name, {})
            for stamp in [s for s, by in claims.items() if counted_until((s, by), now, window) <= now]:
                del claims[stamp]
            wait = wait_before_claim(claims.items(), now, window)
            if wait > 0.0:
                return ClaimTry(wait)
            claims[now] = None
            return ClaimTry(0.0, now, now)

    def report(self, window: SendWindow, stamp: float, sent_by: float) -> None:
        """Record a claim's ``sent_by``."""
        with self._lock:
            claims = self._claims.get(window.limit_name, {})
            if stamp in claims:
                claims[stamp] = sent_by

    async def claim(self, window: SendWindow) -> ClaimedSlot:
        """Wait until a slot is free and claim it."""
        while True:
            got = self.try_claim(window)
            if got.stamp is not None:
                return ClaimedSlot(window, got.stamp, got.asked, self.report)
            await asyncio.sleep(got.wait_s)


SendGate = PostgresSendGate | LocalSendGate

_local = LocalSendGate()


def send_gate_for(engine: Engine | None) -> SendGate:
    """The gate of a store's engine: shared in PostgreSQL, this process's own otherwise."""
    if engine is None or engine.dialect.name != "postgresql":
        return _local
    return PostgresSendGate(engine)


__all__ = [
    "REPORT_POLL_S",
    "SEND_SLACK_S",
    "UNSENT_BOUND_S",
    "Claim",
    "ClaimTry",
    "ClaimedSlot",
    "LocalSendGate",
    "PostgresSendGate",
    "SendGate",
    "SendWindow",
    "counted_until",
    "send_gate_for",
    "sent_by",
    "wait_before_claim",
]
