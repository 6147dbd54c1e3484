"""``helix-dbos tail SESSION``: follow a session's stream live, like ``tail -f``, until it ends.

It reads the durable stream (``helix_stream_chunks``) directly, so it works from any machine that
reaches the database, whichever process runs the session. Every chunk has a sequence number;
``--from-sequence N`` starts after chunk ``N`` (the SSE ``Last-Event-ID`` rule), and tail itself
resumes from the last chunk it printed when the database connection drops, for as long as
``HELIX_DB_RETRY_SECONDS`` allows (default 120 s of continuous failure). It ends with exit code 0
when the stream ends, 1 when it failed.

Text output prints text deltas inline and tool calls, results and status changes on lines of their
own; ``--json`` prints every chunk raw, one JSON object a line (``{"sequence", "chunk"}``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from helix_dbos.cli.common import DatabaseUrl, app, cli_settings, compact_json, console, existing_url, friendly
from helix_dbos.cli.render import chunk_markup
from helix_dbos.errors import DatabaseUnavailableError, HelixError, SessionNotFoundError
from helix_dbos.store.retry import RetryPolicy, is_transient

if TYPE_CHECKING:
    from helix_dbos.stream.base import ChunkRecord

__all__ = ["tail"]

_MAX_BACKOFF_SECONDS = 2.0


@app.command()
@friendly
def tail(
    session_id: Annotated[str, typer.Argument(help="The session whose stream to follow.")],
    database_url: DatabaseUrl = None,
    from_sequence: Annotated[
        int,
        typer.Option("--from-sequence", min=0, help="Start after the chunk with this sequence (0: from the start)."),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print every chunk raw: one JSON object a line.")] = False,
) -> None:
    """Follow a session's stream live (text inline, tool calls and status on their own lines) until it ends."""
    from helix_dbos.store import SqlSessionStore

    url = existing_url(database_url)
    policy = cli_settings().retry_policy
    with SqlSessionStore(url, retry=policy) as store:
        session = store.load_session(session_id)
    if session is None:
        raise SessionNotFoundError(session_id)
    follower = _Follower(url, session.stream_id, from_sequence, as_json=as_json, policy=policy)
    try:
        ended_ok = asyncio.run(follower.run())
    except KeyboardInterrupt:
        typer.echo(f"\nstopped after sequence {follower.last}: resume with --from-sequence {follower.last}", err=True)
        raise typer.Exit(130) from None
    if not ended_ok:
        raise typer.Exit(1)


class _Follower:
    """Prints a stream from a sequence on, reconnecting from the last printed chunk after a drop."""

    def __init__(self, url: str, stream_id: str, after: int, *, as_json: bool, policy: RetryPolicy) -> None:
        self.url = url
        self.stream_id = stream_id
        self.last = after
        self.as_json = as_json
        self.policy = policy
        self.inline = False

    async def run(self) -> bool:
        """Follow until the stream ends (True) or fails (False); raise after a long outage."""
        failing_since: float | None = None
        backoff = 0.1
        while True:
            try:
                outcome = await self._follow_once()
            except Exception as exc:
                if not (isinstance(exc, DatabaseUnavailableError) or is_transient(exc)):
                    raise
                now = time.monotonic()
                failing_since = failing_since if failing_since is not None else now
                if now - failing_since > self.policy.max_seconds:
                    raise
                self._status(f"database connection lost; resuming after sequence {self.last}", style="yellow")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_SECONDS)
                continue
            return outcome

    async def _follow_once(self) -> bool:
        from helix_dbos.stream.sql import SqlStreamManager

        manager = SqlStreamManager(self.url, check_schema=False, retry=self.policy)
        try:
            reader = await manager.create_resumable_reader(self.stream_id, from_sequence=self.last)
            if reader is None:
                self._status("this session has no stream yet", style="yellow")
                return True
            try:
                while True:
                    try:
                        record = await reader.next_record()
                    except StopAsyncIteration:
                        self._status("stream ended", style="green")
                        return True
                    except HelixError as exc:
                        if isinstance(exc, DatabaseUnavailableError):
                            raise
                        self._status(f"stream failed: {exc.message}", style="red")
                        return False
                    self._print(record)
                    self.last = record.sequence
            finally:
                await reader.close()
        finally:
            await manager.aclose()

    def _print(self, record: ChunkRecord) -> None:
        if self.as_json:
            typer.echo(compact_json({"sequence": record.sequence, "chunk": record.chunk.model_dump(mode="json")}))
            return
        shown = chunk_markup(record.chunk)
        if shown is None:
            return
        markup, ends_line = shown
        if ends_line and not self.inline:  # already at the start of a line
            markup = markup.removeprefix("\n")
        console.print(markup, end="\n" if ends_line else "", soft_wrap=True, highlight=False)
        self.inline = not ends_line

    def _status(self, text: str, *, style: str) -> None:
        if self.as_json:
            typer.echo(text, err=True)
            return
        if self.inline:
            console.print()
            self.inline = False
        console.print(f"[{style}]{escape(text)}[/{style}]", soft_wrap=True, highlight=False)
