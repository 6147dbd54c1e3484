"""Durable, resumable streams in PostgreSQL or SQLite: :class:`SqlStreamManager`.

The in-memory manager loses every chunk with its process and cannot serve a reader in another
process. This one stores chunks in ``helix_stream_chunks`` (one row per chunk, keyed by
``(stream_id, sequence)``) and the stream's state in one ``helix_streams`` row, so a client can
reconnect to any server process with its last sequence (SSE ``Last-Event-ID``) and read on.

Writes
    ``StreamWriter.write`` only serialises the chunk and queues it; a flusher thread commits the
    queue in batches. A batch takes up to ``batch_max_chunks`` chunks, and a commit starts at most
    once per ``batch_max_delay`` seconds (default 50 ms) unless the batch is full or someone
    flushes. So a chunk written after a quiet spell commits at once (no added latency for a lone
    event), chunks arriving while a commit is in flight or within the window coalesce into the next
    one, and a chunk waits at most ``batch_max_delay``: a busy run costs a transaction per window,
    not per chunk, and a burst of deltas one per ``batch_max_chunks``. That batching is where the
    throughput comes from: a transaction costs the same for one chunk as for sixty-four.
    Cheaper still is no transaction at all: a run's step commit takes the chunks its workflow
    queued since the previous commit and stores them in the commit's own transaction
    (:meth:`SqlStreamManager.hold_for_transaction`, when the store shares the manager's engine, as
    ``launch`` builds them), and the stream's end takes its last ones. Such a stream's chunks
    wait up to ``batch_max_delay`` for that next commit before the flusher stores them itself.
    ``flush()``, ``close()``, ``end_stream``, ``fail_stream``, ``cleanup_to_step``,
    ``reset_stream``, ``get_stream_info`` and reader creation wait for the queue first, so they
    observe every chunk written before them.

    Sequences come from the stream row in the chunk inserts' transaction: an upsert adds the
    batch's size to ``latest_sequence`` and returns it, and the row lock it takes orders writers in
    every process, so a stream's sequences commit in increasing order and a reader that saw N never
    later finds a chunk below N. A write that fails to commit is reported by the writer's next
    ``write``/``flush``/``close``, not by the ``write`` that queued it.

Faults (``helix_dbos.stream.sql.flusher``, ``helix_dbos.store.retry``)
    Every read and write retries transient database errors (a restart, a dropped connection) for
    the retry bound, so a database restart delays chunks but never drops them, and ``end_stream``
    still lands. A batch the database refuses is written again stream by stream, so one stream's
    bad chunk never costs another stream its chunks; a chunk refused on its own becomes an
    ``error`` chunk with ``code="stream_gap"`` at its position. Chunks lost to an outage longer than
    the bound are counted and reported by such a marker on the stream's next write or end. Text is
    stored through the reversible escape of ``helix_dbos.store.codec`` (NUL, lone surrogates).

Idempotent chunks
    ``write(chunk, dedupe_key=...)`` (or :meth:`SqlStreamManager.write_keyed`) stores a chunk once
    per ``(stream_id, dedupe_key)``: a replayed DBOS workflow re-emitting its deterministic chunks
    (keys like ``f"{run_id}:{ordinal}"``) adds nothing. The insert is ``ON CONFLICT (stream_id,
    dedupe_key) DO NOTHING``; when it dropped some rows, the batch's surviving rows are renumbered
    down and the unused numbers handed back, all under the stream's row lock, so sequences stay
    contiguous. (Readers never rely on that: they ask for ``sequence > cursor``, so a gap, say one
    left by a chunk a cleanup removed, cannot stall them.) A key removed by ``cleanup_to_step`` or
    ``reset_stream`` can be written again, which is what a re-executed step needs.

Readers
    A reader runs one query per wake-up: the stream row joined with the next page of chunks after
    its cursor, one statement and so one snapshot, so the truncation marker, the end marker and the
    chunks it sees agree. It then waits for a change. On PostgreSQL (``notify=True``) every write
    transaction sends ``NOTIFY helix_streams`` with ``c:<stream_id>`` (``x:<stream_id>`` when chunks
    were removed) and one ``LISTEN`` connection per manager wakes the matching readers; while that
    connection is down, and always on SQLite, readers poll every ``poll_interval``. Writes made
    through the same manager wake its readers directly, without a round trip.

Ends, reactivation, truncation
    ``end_stream`` / ``fail_stream`` record ``end_sequence`` (and the error) on the row. A new
    ``create_writer`` reactivates an ended stream and bumps ``activation``, so a reader attached
    before that end still finishes there: it takes ``end_sequence`` as its end when it sees the
    activation move. ``reset_stream`` deletes the chunks, moves ``activation`` too (attached readers
    stop) and keeps counting sequences. ``cleanup_to_step`` deletes chunks of later steps and writes
    the truncation marker; a reader notices it on its next query and raises
    :class:`~helix_dbos.errors.StreamTruncatedError` when a removed chunk was still ahead of its
    cursor (exact for one cleanup between two of its queries; after several it raises whenever its
    cursor is below the last cleanup's high-water mark, which errs towards a reconnect).

Event loops and threads
    No asyncio object outlives a call: database work runs in ``asyncio.to_thread`` and readers wait
    on a future of whichever loop they run on, woken thread-safely. One manager therefore serves the
    runtime's background loop and FastAPI handlers on other loops at once. It owns two daemon
    threads, started on first use: the flusher and, on PostgreSQL, the listener. Call
    :meth:`SqlStreamManager.close` (or ``aclose``) at shutdown: chunks still queued are committed
    then, and lost if the process exits without it.

Caveats
    - ``create_writer`` on a stream this manager itself activated (and has not ended since) skips
      the database. A stream ended by *another* process is then not reactivated: its writes fail
      with ``transport_error``. One process should own a stream's turns (the runtime's does).
    - A reader that does not iterate through two whole turns (end, reactivate, end) finishes at the
      later end. A reader in another process on SQLite may yield chunks it fetched just before a
      cleanup removed them (it fetches pages of ``queries.READ_PAGE`` chunks).
    - Every manager on a database should use the same ``notify`` setting: ``notify=False`` also
      stops sending ``NOTIFY``, and readers elsewhere then learn of its writes by polling.

Modules
    ``manager`` the :class:`SqlStreamManager` facade; ``writer`` and ``reader`` its writers and
    readers; ``storage`` every database operation, retried; ``queries`` the shared SQL;
    ``dialect`` with ``postgres`` and ``sqlite`` what differs between the two databases;
    ``flusher`` batching, retry and per-stream isolation of writes; ``signals`` reader wake-ups
    across threads and loops; ``listen`` PostgreSQL ``LISTEN`` / ``NOTIFY``.
"""

from helix_dbos.stream.sql.flusher import GAP_CODE
from helix_dbos.stream.sql.listen import NOTIFY_CHANNEL
from helix_dbos.stream.sql.manager import SqlStreamManager
from helix_dbos.stream.sql.reader import SqlStreamReader
from helix_dbos.stream.sql.writer import SqlStreamWriter

__all__ = ["GAP_CODE", "NOTIFY_CHANNEL", "SqlStreamManager", "SqlStreamReader", "SqlStreamWriter"]
