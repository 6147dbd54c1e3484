"""Chaos run: many sessions on several worker processes, SIGKILLs and PostgreSQL restarts, then invariants.

What it does, in one run on one PostgreSQL database:

1. Starts a throw-away PostgreSQL cluster (it restarts that server, so it never uses yours), a
   scripted OpenAI-compatible model server in this process (real HTTP, real LiteLLM in the
   workers), and ``--workers`` worker processes (``scripts/chaos_worker.py``) that start
   ``--sessions`` sessions between them. Each session calls the ``work`` tool
   ``--tools-per-session`` times and then finishes with a structured answer.
2. Chaos while the load runs: ``--kills`` SIGKILLs of random live workers (each restarted with the
   same executor id after a random pause; a pause longer than the takeover delay lets a live
   worker take the runs over) and ``--pg-restarts`` immediate stops of PostgreSQL, each down for
   ``--pg-down`` seconds.
3. Waits for every session to end, stops the workers, and checks from the database and from the
   side-effect files the tools wrote outside the engine:

   - every session completed;
   - every completed tool step's side effect happened, and none ran again after its step was
     recorded (exactly once from the engine's point of view; an attempt killed before its step
     was recorded may have run too: at-least-once for in-flight steps, as documented);
   - no effect of a call that is not in a transcript (a phantom);
   - transcripts: the expected messages, no duplicate, no dangling tool call; turns contiguous;
   - streams: ended, every tool call's ``tool_start``/``tool_end`` exactly once, the output once;
   - usage: counted once per LLM step.

It prints a table and exits 1 when an invariant fails. ``tests/chaos/test_chaos.py`` runs a bounded
version in the default test suite; ``python scripts/chaos.py`` runs the full one (50 sessions,
3 workers, 50 kills, 3 PostgreSQL restarts by default).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from helix_dbos import SqlSessionStore, upgrade  # noqa: E402
from helix_dbos.messages import AssistantMessage, ToolResultMessage, UserMessage  # noqa: E402
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids  # noqa: E402
from helix_dbos.stream.sql import SqlStreamManager  # noqa: E402
from helix_dbos.testing import ScriptedOpenAIServer  # noqa: E402
from scripts.chaos_worker import AGENT_NAME  # noqa: E402

WORKER = REPO / "scripts" / "chaos_worker.py"
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


@dataclass
class ChaosConfig:
    """The knobs of one chaos run (the command-line flags)."""

    sessions: int = 50
    workers: int = 3
    kills: int = 50
    pg_restarts: int = 3
    pg_down: float = 3.0
    tools_per_session: int = 6
    tool_seconds: float = 0.4
    llm_delay: float = 0.02
    takeover_after: float = 5.0
    min_uptime: tuple[float, float] = (1.0, 6.0)
    """A worker is killed only after it has been up this long (a random pick in the range, seconds)."""
    max_down: float = 7.0
    timeout: float = 900.0
    seed: int = 0
    workdir: Path | None = None
    quiet: bool = False


@dataclass
class Check:
    """One invariant: its name, whether it held, and what was seen."""

    name: str
    ok: bool
    detail: str


@dataclass
class ChaosReport:
    """What the run did and what held."""

    config: ChaosConfig
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every invariant held."""
        return all(check.ok for check in self.checks)

    def table(self) -> str:
        """The report as a plain-text table."""
        lines = ["figure                          value", "-" * 60]
        lines += [f"{name:<31} {value}" for name, value in self.figures.items()]
        lines += ["", "invariant                       held  detail", "-" * 60]
        lines += [f"{c.name:<31} {'yes' if c.ok else 'NO':<5} {c.detail}" for c in self.checks]
        return "\n".join(lines)


class ChaosModel:
    """The scripted model: ``work`` until the session's quota is done, then ``__finish__``.

    It answers from the request alone (the session id in the first user message and the number of
    tool results so far), so a re-executed LLM step gets the same answer, with the same call id.
    """

    def __init__(self, tools_per_session: int, delay: float) -> None:
        self.tools_per_session = tools_per_session
        self.delay = delay
        self.calls: collections.Counter[tuple[str, int]] = collections.Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        session = _session_of(body["messages"])
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        with self._lock:
            self.calls[(session, done)] += 1
        if done < self.tools_per_session:
            call = {"id": f"{session}-w{done}", "name": "work", "arguments": {"step": done}}
            return {"text": f"step {done}", "tool_calls": [call], "usage": USAGE, "delay_seconds": self.delay}
        finish = {"id": f"{session}-finish", "name": "__finish__", "arguments": {"answer": session}}
        return {"tool_calls": [finish], "usage": USAGE, "delay_seconds": self.delay}


def _session_of(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message["role"] == "user":
            content = message["content"]
            text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            return text.rsplit(" ", 1)[-1]
    raise ValueError("no user message")


class Worker:
    """One worker slot: an executor id and the process currently running it (if any).

    Sessions are started by writing ``start SESSION_ID`` to the process's standard input; its
    ``started``/``failed`` answers are read on a thread.
    """

    def __init__(self, executor_id: str, args: list[str], log: Path) -> None:
        self.executor_id = executor_id
        self.args = args
        self.log = log
        self.proc: subprocess.Popen[str] | None = None
        self.ready_at: float | None = None
        self.restart_at: float | None = None
        self.uptime_before_kill = 0.0
        self.acked: set[str] = set()
        self.refused: set[str] = set()
        self.sent: dict[str, subprocess.Popen[str]] = {}

    def spawn(self) -> None:
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(WORKER), *self.args],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
        self.ready_at = None
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "started":
                self.acked.add(rest)
            elif word == "failed":
                self.refused.add(rest.split(" ", 1)[0])
            elif word == "ready" and proc is self.proc:
                self.ready_at = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ready(self) -> bool:
        return self.alive and self.ready_at is not None

    def start_session(self, session_id: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.sent[session_id] = self.proc
        self.refused.discard(session_id)
        try:
            self.proc.stdin.write(f"start {session_id}\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # it died: the session is sent again elsewhere

    def lost(self) -> list[str]:
        """Sessions sent here that were neither acknowledged nor will be (refused, or the process died)."""
        gone = [
            sid
            for sid, proc in self.sent.items()
            if sid not in self.acked and (sid in self.refused or proc.poll() is not None)
        ]
        for sid in gone:
            del self.sent[sid]
        return gone

    def kill(self) -> int:
        assert self.proc is not None
        pid = self.proc.pid
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        return pid

    def stop(self) -> None:
        if self.alive:
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def restart_postgres(cluster: Any, down_seconds: float) -> None:
    """Crash the test cluster (``pg_ctl stop -m immediate``: every connection drops), wait, start it again."""
    cluster.crash()
    time.sleep(down_seconds)
    cluster.start()


def run_chaos(config: ChaosConfig) -> ChaosReport:
    """Run the whole chaos experiment and return its report (see the module docstring)."""
    from tests.pg import create_database, start_local_cluster, unique_name

    rng = random.Random(config.seed)
    workdir = config.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / unique_name("helix-chaos")
    effects_dir = workdir / "effects"
    effects_dir.mkdir(parents=True, exist_ok=True)
    report = ChaosReport(config)
    say = (lambda *_: None) if config.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))

    cluster = start_local_cluster(crash_safe=True)  # a crash must not lose acknowledged commits
    model = ChaosModel(config.tools_per_session, config.llm_delay)
    server = ScriptedOpenAIServer(handler=model)
    workers: list[Worker] = []
    try:
        url = create_database(cluster.url, unique_name("chaos"))
        upgrade(url)
        base_url = server.start()
        for i in range(config.workers):
            args = [url, base_url, str(effects_dir), f"chaos-worker-{i}", f"--tool-seconds={config.tool_seconds}"]
            args.append(f"--takeover-after={config.takeover_after}")
            worker = Worker(f"chaos-worker-{i}", args, workdir / f"chaos-worker-{i}.log")
            worker.spawn()
            workers.append(worker)
        started = time.monotonic()
        _wait(lambda: all(w.ready for w in workers), 180, "the workers to launch", workers)
        say(f"chaos: {config.workers} workers up ({time.monotonic() - started:.1f}s)")

        store = SqlSessionStore(url)
        sessions: list[str] = []
        backlog: list[str] = []  # sessions to (re)send to a worker
        kills: list[tuple[int, float]] = []  # (pid, epoch ms)
        restarts = 0
        restart_every = max(1, config.kills // (config.pg_restarts + 1)) if config.pg_restarts else 0
        deadline = time.monotonic() + config.timeout
        finished = 0
        exits: list[str] = []
        while time.monotonic() < deadline:
            now = time.monotonic()
            for worker in workers:
                if worker.alive:
                    continue
                if worker.restart_at is None:  # it exited by itself: restart it, as a supervisor would
                    exits.append(f"{worker.executor_id}: {_last_error(worker.log)}")
                    say(f"chaos: {exits[-1]}")
                    worker.restart_at = now + 1.0
                elif now >= worker.restart_at:
                    worker.spawn()
                    worker.restart_at = None
            chaos_done = len(kills) >= config.kills and restarts >= config.pg_restarts
            finished = _count_finished(store, sessions, default=finished)
            ready = [w for w in workers if w.ready]
            # Starts that were not acknowledged go to another worker: execute() is idempotent.
            backlog += [sid for w in workers for sid in w.lost()]
            if not chaos_done:  # keep `sessions` runs in flight while the chaos lasts
                backlog += [_new_session(sessions) for _ in range(config.sessions - (len(sessions) - finished))]
            while backlog and ready:
                rng.choice(ready).start_session(backlog.pop())
            unacked = len(backlog) + sum(len(w.sent.keys() - w.acked) for w in workers)
            if chaos_done and finished == len(sessions) and not unacked:
                break
            if not chaos_done:
                if restart_every and restarts < config.pg_restarts and len(kills) >= restart_every * (restarts + 1):
                    say(f"chaos: PostgreSQL stop -m immediate #{restarts + 1} ({config.pg_down}s down)")
                    restart_postgres(cluster, config.pg_down)
                    restarts += 1
                    continue
                eligible = [w for w in ready if now - (w.ready_at or now) >= w.uptime_before_kill]
                if eligible and len(kills) < config.kills:
                    victim = rng.choice(eligible)
                    kills.append((victim.kill(), time.time() * 1000))
                    victim.restart_at = time.monotonic() + rng.uniform(0.0, config.max_down)
                    victim.uptime_before_kill = rng.uniform(*config.min_uptime)
                    if len(kills) % 10 == 0:
                        say(f"chaos: {len(kills)} kills, {finished}/{len(sessions)} sessions finished")
            time.sleep(rng.uniform(0.2, 0.8))
        else:
            say("chaos: timed out waiting for the sessions")
        total_seconds = time.monotonic() - started
        for worker in workers:
            worker.stop()

        report.figures.update(
            {
                "sessions (total)": len(sessions),
                "sessions in flight": config.sessions,
                "workers": config.workers,
                "tool calls per session": config.tools_per_session,
                "worker SIGKILLs": len(kills),
                "PostgreSQL restarts": restarts,
                "worker exits (not killed)": len(exits),
                "wall time (s)": round(total_seconds, 1),
                "LLM requests": sum(model.calls.values()),
                "LLM requests repeated": sum(n - 1 for n in model.calls.values()),
            }
        )
        _check(report, store, url, sessions, effects_dir, kills, config)
        as_configured = len(kills) >= config.kills and restarts >= config.pg_restarts
        what = f"{len(kills)} kills, {restarts} PostgreSQL restarts during the load"
        report.checks.insert(0, Check("chaos as configured", as_configured, what))
        exited = f"{len(exits)} exited by themselves {exits}"
        report.checks.insert(1, Check("workers rode out outages", not exits, exited))
        store.close()
    finally:
        for worker in workers:
            if worker.alive and worker.proc is not None:
                worker.proc.kill()
        server.stop()
        cluster.stop()
    return report


def _new_session(sessions: list[str]) -> str:
    sessions.append(f"chaos{len(sessions):05d}")
    return sessions[-1]


def _wait(condition: Any, timeout: float, what: str, workers: list[Worker], *, fail: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    if fail:
        logs = "\n".join(f"--- {w.executor_id}\n{_tail(w.log)}" for w in workers)
        raise RuntimeError(f"timed out waiting for {what}\n{logs}")


def _last_error(log: Path) -> str:
    """The last traceback in a worker's log, as its innermost project frame and its exception line."""
    lines = _tail(log, 400).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    if not starts:
        return "no traceback logged"
    trace = lines[starts[-1] :]
    frames = [line.strip() for line in trace if line.startswith('  File "') and "site-packages" not in line]
    ends = [line for line in trace[1:] if line and not line.startswith(" ")]
    return f"{frames[-1] if frames else '?'}: {ends[0] if ends else '?'}"[:400]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _count_finished(store: SqlSessionStore, sessions: list[str], *, default: int) -> int:
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT count(*) FROM helix_sessions"
                    " WHERE session_id = ANY(:ids) AND status IN ('completed', 'failed')"
                ),
                {"ids": sessions},
            )
            return int(rows.scalar_one())
    except sa.exc.OperationalError:
        return default  # PostgreSQL is down for a moment


def _read_effects(effects_dir: Path) -> dict[str, list[tuple[int, int]]]:
    """Call id -> [(pid, epoch ms)] of every time the tool's side effect happened."""
    effects: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for path in effects_dir.glob("*.log"):
        pid = int(path.stem.rsplit("-", 1)[1])
        for line in path.read_text().splitlines():
            call_id, at = line.split()
            effects[call_id].append((pid, int(at)))
    return effects


def _decode_output(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return pickle.loads(base64.b64decode(raw))  # DBOS's default serializer: pickle, base64 text


def _tool_step_completions(url: str) -> dict[str, int]:
    """Tool call id -> when DBOS recorded its tool step's output (epoch ms)."""
    completions: dict[str, int] = {}
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT output, completed_at_epoch_ms FROM dbos.operation_outputs "
                    "WHERE function_name = :name AND output IS NOT NULL"
                ),
                {"name": f"{AGENT_NAME}.tool.work"},
            )
            for raw, completed_at in rows:
                output = _decode_output(raw)
                if isinstance(output, dict) and completed_at is not None:
                    completions[output["tool_call_id"]] = int(completed_at)
    finally:
        engine.dispose()
    return completions


def _held(name: str, total: int, bad: list[str]) -> Check:
    """An invariant over ``total`` items, of which ``bad`` (named, first three shown) broke it."""
    return Check(name, not bad, f"{total - len(bad)}/{total} {bad[:3] if bad else ''}".rstrip())


def _check(
    report: ChaosReport,
    store: SqlSessionStore,
    url: str,
    sessions: list[str],
    effects_dir: Path,
    kills: list[tuple[int, float]],
    config: ChaosConfig,
) -> None:
    checks = report.checks
    records = {sid: store.load_session(sid) for sid in sessions}
    statuses = collections.Counter(r.status if r else "missing" for r in records.values())
    checks.append(Check("every session completed", statuses["completed"] == len(sessions), repr(dict(statuses))))

    # transcripts and turns ------------------------------------------------------------------------
    expected_calls = config.tools_per_session + 1
    bad_transcripts: list[str] = []
    bad_turns: list[str] = []
    completed_calls: set[str] = set()
    for sid in sessions:
        messages = store.get_messages(sid, limit=100_000).messages
        call_ids = [c.id for m in messages if isinstance(m, AssistantMessage) for c in (m.tool_calls or [])]
        result_ids = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
        completed_calls.update(call_ids)
        if (
            len(call_ids) != expected_calls
            or len(set(call_ids)) != len(call_ids)
            or sorted(result_ids) != sorted(call_ids)
            or find_unpaired_tool_call_ids(messages)
            or sum(1 for m in messages if isinstance(m, UserMessage)) != 1
        ):
            bad_transcripts.append(sid)
        turns = [run.turn for run in store.list_runs(sid)]
        if turns != list(range(1, len(turns) + 1)):
            bad_turns.append(sid)
    checks.append(_held("transcripts paired, no dup/loss", len(sessions), bad_transcripts))
    checks.append(_held("turns contiguous", len(sessions), bad_turns))

    # side effects, counted outside the engine ---------------------------------------------------------
    effects = _read_effects(effects_dir)
    recorded_at = _tool_step_completions(url)
    killed = {pid for pid, _ in kills}
    work_calls = {c for c in completed_calls if not c.endswith("-finish")}
    missing = sorted(c for c in work_calls if not effects.get(c))
    phantom = sorted(c for c in effects if c not in work_calls)
    # A step recorded by DBOS never runs again; an earlier attempt only ran if its worker was killed.
    after_record = sorted(c for c, hits in effects.items() if any(at > recorded_at.get(c, at) for _, at in hits))
    repeated_by_live = sorted(
        c for c, hits in effects.items() if any(pid not in killed for pid, _ in sorted(hits, key=lambda h: h[1])[:-1])
    )
    checks.append(_held("each tool effect happened", len(work_calls), missing))
    checks.append(_held("no effect after its step", len(effects), sorted({*after_record, *repeated_by_live})))
    checks.append(_held("no phantom effect", len(effects), phantom))
    report.figures["tool effects repeated (killed mid-step)"] = sum(len(h) - 1 for h in effects.values())

    # streams and usage ---------------------------------------------------------------------------------
    checks.append(_check_streams(url, records, config))
    expected_usage = (USAGE["prompt_tokens"] * expected_calls, USAGE["completion_tokens"] * expected_calls)
    bad_usage = []
    for sid in sessions:
        llm = [u for u in store.get_usage(sid) if u.kind == "llm"]
        seen = (sum(u.input_tokens for u in llm), sum(u.output_tokens for u in llm))
        if seen != expected_usage:
            bad_usage.append(f"{sid}:{seen}")
    checks.append(_held("usage counted once", len(sessions), bad_usage))


def _check_streams(url: str, records: dict[str, Any], config: ChaosConfig) -> Check:
    async def check() -> list[str]:
        manager = SqlStreamManager(url)
        bad: list[str] = []
        try:
            for sid, record in records.items():
                if record is None:
                    bad.append(f"{sid}:no session")
                    continue
                info = await manager.get_stream_info(record.stream_id)
                chunks = [r.chunk for r in await manager.read_records(record.stream_id)]
                starts = collections.Counter(c.tool_call_id for c in chunks if c.type == "tool_start")
                ends = collections.Counter(c.tool_call_id for c in chunks if c.type == "tool_end")
                outputs = sum(1 for c in chunks if c.type == "output")
                calls = {f"{sid}-w{n}" for n in range(config.tools_per_session)}
                problems = []
                if info is None or info.status != "ended":
                    problems.append(f"status={info.status if info else None}")
                if any(starts[c] != 1 or ends[c] != 1 for c in calls):
                    problems.append("tool chunks not exactly once")
                if outputs != 1:
                    problems.append(f"{outputs} outputs")
                if problems:
                    bad.append(f"{sid}:{','.join(problems)}")
        finally:
            await manager.aclose()
        return bad

    bad = asyncio.run(check())
    return Check("streams complete and ended", not bad, f"{len(records) - len(bad)}/{len(records)} {bad[:3]}")


def main() -> None:
    defaults = ChaosConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--kills", type=int, default=defaults.kills)
    parser.add_argument("--pg-restarts", type=int, default=defaults.pg_restarts)
    parser.add_argument("--pg-down", type=float, default=defaults.pg_down, help="seconds PostgreSQL stays down")
    parser.add_argument("--tools-per-session", type=int, default=defaults.tools_per_session)
    parser.add_argument("--tool-seconds", type=float, default=defaults.tool_seconds)
    parser.add_argument("--takeover-after", type=float, default=defaults.takeover_after)
    parser.add_argument("--timeout", type=float, default=defaults.timeout)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    ns = parser.parse_args()
    config = ChaosConfig(
        sessions=ns.sessions,
        workers=ns.workers,
        kills=ns.kills,
        pg_restarts=ns.pg_restarts,
        pg_down=ns.pg_down,
        tools_per_session=ns.tools_per_session,
        tool_seconds=ns.tool_seconds,
        takeover_after=ns.takeover_after,
        timeout=ns.timeout,
        seed=ns.seed,
    )
    report = run_chaos(config)
    if ns.json:
        print(json.dumps({"figures": report.figures, "checks": [c.__dict__ for c in report.checks]}, indent=2))
    else:
        print(report.table())
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
