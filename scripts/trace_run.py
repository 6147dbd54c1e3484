"""The SQL one helix-dbos run and one bare DBOS run send, in order, from the server's statement log.

Runs bench_overhead's workload on a private throw-away cluster with ``log_statement = all``, once
for each system after a warm-up, and prints every statement (per backend, with its transaction
number) between two markers, plus a tally of transactions by source. It answers "where does each
transaction of a run come from" without touching the library.

Usage:  python scripts/trace_run.py [--full]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa
from dbos import DBOS

from helix_dbos import upgrade
from scripts._bench_setup import configure_dbos
from scripts.bench_overhead import make_executor, run_bare, run_helix
from tests.pg import create_database, start_local_cluster, unique_name

LINE = re.compile(r"^\S+ \S+ \S+ \[(?P<pid>\d+)\] (?P<msg>.*)$")


def mark(engine: sa.Engine, label: str) -> None:
    with engine.connect() as conn:
        conn.exec_driver_sql(f"SELECT 'MARK {label}'")


def source(statement: str) -> str:
    """A coarse label for where a statement comes from."""
    s = statement.lower()
    for needle, label in (
        ("operation_outputs", "dbos step checkpoint"),
        ("owner_xid", "dbos step ownership check"),
        ("dbos.workflow_status.status from", "dbos step status check"),
        ("workflow_events", "dbos set_event"),
        ("notifications", "dbos send/recv"),
        ("dbos.streams", "dbos stream"),
        ("workflow_status", "dbos workflow status"),
        ("workflow_input", "dbos workflow input"),
        ("helix_stream", "helix stream"),
        ("pg_notify($1, p)", "dbos notify"),
        ("pg_notify", "helix stream notify"),
        ("helix_stream", "helix stream"),
        ("with s as", "helix store step commit"),
        ("helix_", "helix store"),
    ):
        if needle in s:
            return label
    return s.split()[0] if s.split() else "(empty)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="print every statement, not just the tally")
    parser.add_argument("--stream", choices=("sql", "memory"), default="sql")
    args = parser.parse_args()
    cluster = start_local_cluster()
    cluster.extra_options = "-c log_statement=all -c log_min_duration_statement=-1 -c log_line_prefix='%m [%p] '"
    cluster.crash()
    cluster.start()
    try:
        url = create_database(cluster.url, unique_name("trace"))
        upgrade(url)
        configure_dbos(url)
        executor = make_executor(url, args.stream)
        DBOS.launch()
        marker = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        for _ in range(3):
            run_helix(executor)
            run_bare()
        time.sleep(0.5)
        tag = uuid.uuid4().hex[:6]
        mark(marker, f"helix-start-{tag}")
        run_helix(executor)
        time.sleep(0.3)  # let the stream flusher finish
        mark(marker, f"helix-end-{tag}")
        mark(marker, f"bare-start-{tag}")
        run_bare()
        time.sleep(0.3)
        mark(marker, f"bare-end-{tag}")
        executor.close()
        DBOS.destroy()
        log = (cluster.root / "server.log").read_text(errors="replace").splitlines()
        for name in ("helix", "bare"):
            lines = _between(log, f"MARK {name}-start-{tag}", f"MARK {name}-end-{tag}")
            _report(name, lines, args.full)
    finally:
        cluster.stop()


def _between(log: list[str], start: str, end: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    inside = False
    for line in log:
        if start in line:
            inside = True
            continue
        if end in line:
            break
        if not inside:
            continue
        m = LINE.match(line)
        if m is None:  # a continuation line of a multi-line statement
            if out and not out[-1][1].strip():
                out[-1] = (out[-1][0], line.strip())
            continue
        if "statement: " in m["msg"] or "execute " in m["msg"]:
            msg = m["msg"].split(": ", 2)[-1] if "execute " in m["msg"] else m["msg"].split("statement: ", 1)[1]
            out.append((m["pid"], msg))
    return out


def _report(name: str, lines: list[tuple[str, str]], full: bool) -> None:
    print(f"\n=== {name}: {len(lines)} statements")
    # Transactions: BEGIN..COMMIT groups per backend, and statements outside one (autocommit).
    # A ";" outside a transaction is SQLAlchemy's pool_pre_ping (psycopg sends an empty query): a
    # transaction of its own, charged here to the transaction that follows it on that connection.
    open_tx: dict[str, list[str]] = {}
    pinged: dict[str, bool] = {}
    transactions: Counter[str] = Counter()
    pings: Counter[str] = Counter()

    def count(label: str, pid: str) -> None:
        transactions[label] += 1
        if pinged.pop(pid, False):
            pings[label] += 1

    for pid, stmt in lines:
        if full:
            print(f"  [{pid}] {' '.join(stmt.split())[:160]}")
        word = stmt.strip().split()[0].upper() if stmt.strip() else ""
        if stmt.strip() == ";" and pid not in open_tx:
            pinged[pid] = True
        elif word == "BEGIN":
            open_tx[pid] = []
        elif word in ("COMMIT", "ROLLBACK"):
            body = open_tx.pop(pid, [])
            labels = sorted({source(s) for s in body}) or ["(empty)"]
            count(f"{word.lower()}: " + " + ".join(labels), pid)
        elif pid in open_tx:
            open_tx[pid].append(stmt)
        else:
            count(f"autocommit: {source(stmt)}", pid)
    total = sum(transactions.values()) + sum(pings.values())
    print(f"  transactions by content ({total}, of which {sum(pings.values())} pings): count (+ pings before them)")
    for label, n in transactions.most_common():
        print(f"    {n:4d} (+{pings[label]:3d})  {label}")


if __name__ == "__main__":
    main()
