"""The flusher's batching policy, on a fake commit: at once after a quiet spell, coalesced under load.

Margins are wide (the machine may be loaded): what is checked is the order of magnitude, a commit
that starts at once against one that waits for the window.
"""

from __future__ import annotations

import threading
import time

from helix_dbos.stream.sql.flusher import Flusher, PendingChunk


def chunk(n: int) -> PendingChunk:
    return PendingChunk(f"s{n}", None, "text_delta", None, "{}", None, None, None)


class Recorder:
    def __init__(self, hold: float = 0.0) -> None:
        self.hold = hold
        self.batches: list[tuple[float, int]] = []
        self.done = threading.Event()

    def __call__(self, batch: list[PendingChunk]) -> None:
        self.batches.append((time.monotonic(), len(batch)))
        time.sleep(self.hold)
        self.done.set()


def test_a_chunk_after_a_quiet_spell_commits_at_once_and_the_next_ones_wait_for_the_window() -> None:
    recorder = Recorder()
    flusher = Flusher(recorder, max_chunks=64, max_delay=1.0, name="test-flusher")
    try:
        started = time.monotonic()
        flusher.submit(chunk(0))
        assert recorder.done.wait(5)
        assert recorder.batches[0][0] - started < 0.5  # no window to wait for: the flusher was idle
        recorder.done.clear()
        second = time.monotonic()
        for n in range(1, 6):
            flusher.submit(chunk(n))
        assert recorder.done.wait(5)
        at, size = recorder.batches[1]
        assert size == 5  # coalesced
        assert at - second > 0.5  # waited for the window that the first commit opened
    finally:
        flusher.stop()


def test_chunks_written_while_a_commit_is_in_flight_go_in_one_batch() -> None:
    recorder = Recorder(hold=0.3)
    flusher = Flusher(recorder, max_chunks=64, max_delay=0.05, name="test-flusher")
    try:
        flusher.submit(chunk(0))
        time.sleep(0.1)  # the first commit is in flight for 0.3 s
        for n in range(1, 11):
            flusher.submit(chunk(n))
        flusher.barrier().result(5)
        assert [size for _, size in recorder.batches] == [1, 10]
    finally:
        flusher.stop()


def test_a_barrier_for_a_stream_with_nothing_queued_does_not_force_a_commit() -> None:
    """A run's start asks about its own stream; other runs' queued chunks keep their batching window."""
    recorder = Recorder()
    flusher = Flusher(recorder, max_chunks=64, max_delay=1.0, name="test-flusher")
    try:
        flusher.submit(chunk(0))
        assert recorder.done.wait(5)  # opens the window
        flusher.submit(chunk(1))  # stream "s1", waiting for the window
        assert flusher.barrier("s-other").done()
        assert len(recorder.batches) == 1
        waiting = flusher.barrier("s1")
        assert not waiting.done() or len(recorder.batches) == 2
        waiting.result(5)  # a barrier for a stream with queued chunks cuts the window short
        assert len(recorder.batches) == 2
        assert flusher.barrier("s1").done()
    finally:
        flusher.stop()


# --- takes: a caller storing a stream's chunks in its own transaction --------------------------------


def keyed(stream: str, n: int) -> PendingChunk:
    return PendingChunk(stream, None, "tool_end", 1, f'{{"n":{n}}}', f"r:{n}", None, None)


def test_a_take_hands_over_the_streams_queued_chunks_in_order_and_leaves_the_others() -> None:
    recorder = Recorder()
    flusher = Flusher(recorder, max_chunks=64, max_delay=1.0, name="test-flusher")
    try:
        flusher.submit(chunk(0))
        assert recorder.done.wait(5)  # opens the window: what follows waits
        for n in range(3):
            flusher.submit(keyed("run", n))
            flusher.submit(chunk(10 + n))
        hold = flusher.take("run")
        assert hold is not None
        assert [item.body for item in hold.items] == ['{"n":0}', '{"n":1}', '{"n":2}']
        flusher.release(hold, stored=True)
        flusher.barrier().result(5)
        assert [size for _, size in recorder.batches] == [1, 3]  # only the other streams' chunks
    finally:
        flusher.stop()


def test_chunks_written_during_a_take_wait_for_its_release_and_a_failed_one_gives_all_back_in_order() -> None:
    committed: list[str] = []
    # The stream is made patient first (an empty take), so chunk 0 waits the window for the take below
    # instead of racing the idle flusher thread (which commits a quiet stream's chunk at once: under
    # parallel test workers it won now and then). The wait below passes the window, so chunk 1 would
    # be committed by then if the hold did not stop it.
    flusher = Flusher(lambda batch: committed.extend(i.body for i in batch), max_chunks=64, max_delay=0.5, name="f")
    try:
        first = flusher.take("run")
        assert first is not None and first.items == []
        flusher.release(first, stored=True)
        flusher.submit(keyed("run", 0))
        hold = flusher.take("run")
        assert hold is not None and [item.body for item in hold.items] == ['{"n":0}']
        flusher.submit(keyed("run", 1))  # written while the hold is out
        time.sleep(0.8)
        assert committed == []  # never ahead of the held chunk
        barrier = flusher.barrier("run")
        assert not barrier.done()  # a flush waits for the hold too
        flusher.release(hold, stored=False)  # the caller's transaction failed
        barrier.result(5)
        assert committed == ['{"n":0}', '{"n":1}']
    finally:
        flusher.stop()


def test_a_taken_stream_is_patient_its_chunks_wait_the_window_for_the_next_take() -> None:
    recorder = Recorder()
    flusher = Flusher(recorder, max_chunks=64, max_delay=0.5, name="test-flusher")
    try:
        hold = flusher.take("run")
        assert hold is not None and hold.items == []
        flusher.release(hold, stored=True)
        flusher.submit(keyed("run", 0))  # after a quiet spell, but its stream's commits take chunks
        time.sleep(0.2)
        assert recorder.batches == []
        hold = flusher.take("run")
        assert hold is not None and len(hold.items) == 1
        flusher.release(hold, stored=True)
        started = time.monotonic()
        flusher.submit(keyed("run", 1))  # no take comes: the flusher commits it after the window
        assert recorder.done.wait(5)
        assert 0.3 < recorder.batches[0][0] - started < 3
    finally:
        flusher.stop()


def test_no_take_while_the_streams_chunks_are_being_committed_or_a_barrier_waits() -> None:
    recorder = Recorder(hold=0.3)
    flusher = Flusher(recorder, max_chunks=64, max_delay=0.01, name="test-flusher")
    try:
        flusher.submit(keyed("run", 0))
        time.sleep(0.1)  # that chunk's commit is in flight
        assert flusher.take("run") is None  # later chunks must not get lower sequences
        flusher.submit(keyed("run", 1))
        barrier = flusher.barrier()
        assert flusher.take("run") is None
        barrier.result(5)
        hold = flusher.take("run")
        assert hold is not None and hold.items == []
        flusher.release(hold, stored=True)
    finally:
        flusher.stop()
