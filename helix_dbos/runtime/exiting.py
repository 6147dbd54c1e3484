"""A process that is exiting must not record, as a run's outcome, the failures its own exit causes.

When a process's main thread finishes (a script returns, an app exits on an error) while DBOS is
running agent workflows on its threads, Python starts shutting down: thread pools refuse new work
("cannot schedule new futures after interpreter shutdown"), and a model call or tool that needs one
fails. Recorded as a step's output, that failure would fail the run for good, although nothing was
wrong with it: the process simply left, as a killed one does.

So a step or the loop that fails while the process is exiting raises :class:`ProcessExiting`
instead. It is a ``BaseException``, which DBOS records neither as a step's nor as a workflow's
outcome (it catches ``Exception``): the workflow stays ``PENDING`` and is recovered at the next
start, exactly as after a crash. ``shutdown()`` is still the clean way out: it waits for runs in
flight first, and marks the process as stopping before it destroys DBOS (:func:`mark_stopping`), so
that a run it left in flight fails at its next DBOS call as an exiting process's run does, not as a
failed run ("No DBOS was created yet" is the stop, not the run's fault).
"""

from __future__ import annotations

import sys
import threading

from helix_dbos.errors import ProcessExiting

_exiting = threading.Event()
_stopping = threading.Event()

# Python announces its shutdown to threading's exit hooks (the ones that stop thread pools) before
# it marks the main thread finished, and runs them last-registered first: registered here, ours
# runs before the pools refuse work. ``_register_atexit`` is private to threading (it is how
# concurrent.futures itself learns of the shutdown); without it, the main thread's end still tells.
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_exiting.set)


def mark_stopping(stopping: bool = True) -> None:
    """``shutdown()`` is stopping DBOS under the runs it left in flight (``False``: ``launch()`` again)."""
    if stopping:
        _stopping.set()
    else:
        _stopping.clear()


def process_exiting() -> bool:
    """Whether the interpreter is shutting down (its main thread has finished), or ``shutdown()`` stopped DBOS."""
    return _exiting.is_set() or _stopping.is_set() or sys.is_finalizing() or not threading.main_thread().is_alive()


def raise_if_exiting(cause: BaseException) -> None:
    """Raise :class:`ProcessExiting` from ``cause`` when the process is exiting; return otherwise."""
    if process_exiting():
        raise ProcessExiting(f"process exiting; not recording {type(cause).__name__}: {cause}") from cause
