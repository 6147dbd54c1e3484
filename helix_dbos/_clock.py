"""The wall clock, in the unit every ``*_at`` column uses, and its ISO form: a leaf module.

The runtime, the store, the streams and the views all need the time; none of them should import
another for it (the runtime once imported the store's engine module just for :func:`now_ms`).
``helix_dbos.store.engine.now_ms`` re-exports it where it used to live.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the unit of every ``*_at`` column."""
    return time.time_ns() // 1_000_000


def iso_utc(ms: int | None) -> str | None:
    """``ms`` since the epoch as UTC ISO 8601 with milliseconds (``...Z``), for JSON output."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["iso_utc", "now_ms"]
