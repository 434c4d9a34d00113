"""The relay's SQLite store: deliveries sent, jobs with their state and results, and every accepted callback body.

Each thread gets its own connection (sqlite3 connections are not shared across threads) to one WAL database, and
every read-check-write of a job's state is one `BEGIN IMMEDIATE` transaction (writers in this process also take a
lock), so two concurrent callbacks for the same job cannot both pass the state machine. A delivery id is recorded
once: a redelivery of the same event and webhook adds nothing, and its reuse for other content is refused.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crcr.relay import state
from crcr.relay.validate import Callback

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    delivery_id TEXT NOT NULL, repo TEXT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
    dispatched_at REAL NOT NULL, self_reported INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (delivery_id, repo));
CREATE TABLE IF NOT EXISTS jobs (
    delivery_id TEXT NOT NULL, repo TEXT NOT NULL, run_id TEXT NOT NULL, run_attempt TEXT NOT NULL,
    job_name TEXT NOT NULL, status TEXT NOT NULL, conclusion TEXT, workflow_name TEXT, url TEXT, check_run_id TEXT,
    started_at TEXT, completed_at TEXT, test_results TEXT, artifact_url TEXT, verdict TEXT, failed_tests TEXT,
    notes TEXT NOT NULL DEFAULT '[]', in_progress_since REAL, updated_at REAL NOT NULL, swept_at REAL,
    PRIMARY KEY (delivery_id, repo, run_id, run_attempt, job_name));
CREATE TABLE IF NOT EXISTS callbacks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, received_at REAL NOT NULL, repo TEXT NOT NULL, delivery_id TEXT NOT NULL,
    status TEXT NOT NULL, body TEXT NOT NULL, notes TEXT NOT NULL);
"""
JSON_COLUMNS = ("test_results", "verdict", "failed_tests", "notes")
#: Columns added since the first schema: (table, column, type), added to a database made before them.
ADDED_COLUMNS = (("jobs", "swept_at", "REAL"),)


class DeliveryConflict(Exception):
    """A delivery id already recorded for another event or webhook (a 409): ids are never reused for new content."""


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


class Store:
    """One relay database file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._writing = threading.Lock()
        self._connection().executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns a database from an older relay lacks (a `--db` or `crcr ci` cache outlives the code)."""
        with self._transaction() as db:
            for table, column, kind in ADDED_COLUMNS:
                if column not in {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Writers in this process queue on a lock rather than on SQLite's busy handler,
        which sleeps in steps of up to 100 ms; the busy timeout still covers another process on the same file."""
        db = self._connection()
        with self._writing:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def record_dispatch(self, delivery_id: str, repos: list[str], event_type: str, payload: Mapping[str, Any]) -> bool:
        """The delivery was sent to each repo: their callbacks for it are now expected. False when the id was already
        recorded for this event and webhook (a redelivery): only repos it was not recorded for are added.
        DeliveryConflict when it was recorded for another event or webhook."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT repo, event_type, payload FROM deliveries WHERE delivery_id = ?", (delivery_id,)
            ).fetchall()
            if any(row["event_type"] != event_type or json.loads(row["payload"]) != payload for row in rows):
                raise DeliveryConflict(f"delivery {delivery_id} was already dispatched for another event or webhook")
            known = {row["repo"] for row in rows}
            db.executemany(
                "INSERT INTO deliveries (delivery_id, repo, event_type, payload, dispatched_at) VALUES (?, ?, ?, ?, ?)",
                [(delivery_id, repo.lower(), event_type, json.dumps(payload), time.time())
                 for repo in repos if repo.lower() not in known],
            )  # fmt: skip
        return not rows

    def forget_dispatch(self, delivery_id: str) -> None:
        """Undo the record of a delivery that never reached its consumer, so the webhook's redelivery is dispatched
        afresh; a repo that already reported a job for it keeps its record."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM deliveries WHERE delivery_id = ? AND NOT EXISTS (SELECT 1 FROM jobs "
                "WHERE jobs.delivery_id = deliveries.delivery_id AND jobs.repo = deliveries.repo)",
                (delivery_id,),
            )

    def apply(self, repo: str, callback: Callback, body: Mapping[str, Any], now: float | None = None) -> str:
        """Run the callback through the state machine and store it: the new state, or Rejected (stores nothing)."""
        now = time.time() if now is None else now
        repo = repo.lower()
        key = (callback.delivery_id, repo, callback.field("run_id"), callback.field("run_attempt", "1"),
               callback.field("job_name"))  # fmt: skip
        with self._transaction() as db:
            dispatched = db.execute(
                "SELECT 1 FROM deliveries WHERE delivery_id = ? AND repo = ? AND event_type = ?",
                (callback.delivery_id, repo, callback.event_type),
            ).fetchone()
            row = db.execute(
                "SELECT status, swept_at FROM jobs WHERE delivery_id = ? AND repo = ? AND run_id = ? "
                "AND run_attempt = ? AND job_name = ?",
                key,
            ).fetchone()
            new = state.transition(
                row["status"] if row else None,
                callback.status,
                dispatched=dispatched is not None,
                self_reported=callback.self_reported,
                swept_at=row["swept_at"] if row else None,
            )
            if callback.self_reported and dispatched is None:
                db.execute(
                    "INSERT OR IGNORE INTO deliveries (delivery_id, repo, event_type, payload, dispatched_at, "
                    "self_reported) VALUES (?, ?, ?, ?, ?, 1)",
                    (callback.delivery_id, repo, callback.event_type, json.dumps(callback.payload), now),
                )
            self._write_job(db, key, new, callback, row is None, now)
            db.execute(
                "INSERT INTO callbacks (received_at, repo, delivery_id, status, body, notes) VALUES (?, ?, ?, ?, ?, ?)",
                (now, repo, callback.delivery_id, callback.status, json.dumps(body), json.dumps(callback.notes)),
            )
        return new

    @staticmethod
    def _write_job(
        db: sqlite3.Connection, key: tuple[str, ...], new: str, cb: Callback, fresh: bool, now: float
    ) -> None:
        fields = {
            "status": new,
            "conclusion": cb.workflow.get("conclusion"),
            "workflow_name": cb.workflow.get("name"),
            "url": cb.workflow.get("url"),
            "check_run_id": cb.workflow.get("check_run_id"),
            "completed_at": cb.workflow.get("completed_at"),
            "test_results": _dumps(cb.workflow.get("test_results")),
            "artifact_url": cb.workflow.get("artifact_url"),
            "verdict": _dumps(cb.verdict),
            "failed_tests": _dumps(cb.failed_tests),
            "notes": json.dumps(list(cb.notes)),
            "updated_at": now,
        }
        if new == state.STATE_IN_PROGRESS:
            fields |= {"started_at": cb.workflow.get("started_at"), "in_progress_since": now}
        if fresh:
            names = ["delivery_id", "repo", "run_id", "run_attempt", "job_name", *fields]
            db.execute(
                f"INSERT INTO jobs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                (*key, *fields.values()),
            )
        else:
            db.execute(
                f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in fields)} WHERE delivery_id = ? AND repo = ? "
                "AND run_id = ? AND run_attempt = ? AND job_name = ?",
                (*fields.values(), *key),
            )

    def sweep(self, max_age: float, now: float | None = None) -> int:
        """Close every job IN_PROGRESS for longer than `max_age` seconds as timed_out; how many were closed. The
        close is marked (`swept_at`), so a late completed is told apart from a repeat of a real one."""
        now = time.time() if now is None else now
        note = json.dumps([f"closed by the sweeper: no completed within {max_age:g} s"])
        with self._transaction() as db:
            return db.execute(
                "UPDATE jobs SET status = ?, conclusion = 'timed_out', notes = ?, updated_at = ?, swept_at = ? "
                "WHERE status = ? AND in_progress_since < ?",
                (state.STATE_COMPLETED, note, now, now, state.STATE_IN_PROGRESS, now - max_age),
            ).rowcount

    def jobs(self, repo: str | None = None) -> list[dict[str, Any]]:
        """Every job (of one repo, if given), its JSON columns decoded, oldest first."""
        where, args = ("WHERE repo = ?", (repo.lower(),)) if repo else ("", ())
        rows = self._connection().execute(f"SELECT * FROM jobs {where} ORDER BY rowid", args).fetchall()
        return [_decoded(row) for row in rows]

    def deliveries(self, repo: str | None = None) -> list[dict[str, Any]]:
        """Every delivery (to one repo, if given), newest first, each with its jobs in the order they started."""
        where, args = ("WHERE repo = ?", (repo.lower(),)) if repo else ("", ())
        db = self._connection()
        rows = db.execute(f"SELECT * FROM deliveries {where} ORDER BY dispatched_at DESC, rowid DESC", args).fetchall()
        jobs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for job in self.jobs(repo):
            jobs.setdefault((job["delivery_id"], job["repo"]), []).append(job)
        return [
            {**dict(row), "payload": json.loads(row["payload"]), "self_reported": bool(row["self_reported"]),
             "jobs": jobs.get((row["delivery_id"], row["repo"]), [])}
            for row in rows
        ]  # fmt: skip

    def callbacks(self) -> list[dict[str, Any]]:
        """Every accepted callback, in arrival order, body decoded."""
        rows = self._connection().execute("SELECT * FROM callbacks ORDER BY id").fetchall()
        return [{**dict(row), "body": json.loads(row["body"]), "notes": json.loads(row["notes"])} for row in rows]


def _decoded(row: sqlite3.Row) -> dict[str, Any]:
    job = dict(row)
    for name in JSON_COLUMNS:
        if job[name] is not None:
            job[name] = json.loads(job[name])
    return job
