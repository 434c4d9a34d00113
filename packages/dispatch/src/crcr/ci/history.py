"""The run history: every combination's result per run, in one SQLite file, so attribution can find the last green
run of a combination (its three candidates and per-test outcomes) and the report can say what regressed.

Stdlib `sqlite3` only. Several pipelines may record into the same file at once: the database runs in WAL mode and
each run is written in one `BEGIN IMMEDIATE` transaction, so a reader never sees half a run. A file that is not a
database, or a database that is not a Tributary history, is refused with one line naming it (`HistoryError`), never
silently overwritten.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from crcr.ci.model import Candidate, Combination, RunRecord, from_json

SCHEMA = "tributary-ci-history/1"
#: How long a writer waits for another writer's transaction before giving up (seconds).
BUSY_TIMEOUT = 60.0

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT NOT NULL, verdict TEXT NOT NULL,
    device TEXT NOT NULL, run_dir TEXT NOT NULL, seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    combination TEXT NOT NULL, matrix TEXT NOT NULL, status TEXT NOT NULL, started TEXT NOT NULL,
    backend_name TEXT NOT NULL, backend_version TEXT NOT NULL, backend_sha TEXT NOT NULL,
    core_name TEXT NOT NULL, core_version TEXT NOT NULL, core_sha TEXT NOT NULL,
    suite_name TEXT NOT NULL, suite_version TEXT NOT NULL, suite_sha TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (run_id, combination)
);
CREATE INDEX IF NOT EXISTS results_by_combination ON results (combination, seq);
CREATE TABLE IF NOT EXISTS outcomes (
    run_id TEXT NOT NULL, combination TEXT NOT NULL, nodeid TEXT NOT NULL, outcome TEXT NOT NULL,
    PRIMARY KEY (run_id, combination, nodeid),
    FOREIGN KEY (run_id, combination) REFERENCES results(run_id, combination) ON DELETE CASCADE
);
"""


class HistoryError(Exception):
    """The history file cannot be used (not a database, another program's database, a newer schema)."""


@dataclass(frozen=True)
class Entry:
    """One combination's result in one recorded run."""

    run_id: str
    started: str
    status: str
    combination: Combination
    outcomes: dict[str, str]  # nodeid -> final outcome
    run_dir: str


def record_run(db: Path, run: RunRecord, run_dir: Path) -> None:
    """Store every combination of `run` (status, candidates, per-test outcomes) in one transaction; recording the
    same run id again replaces it, so a rerun of the recorder is harmless."""
    with _connect(db) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM outcomes WHERE run_id = ?", (run.run_id,))
            conn.execute("DELETE FROM results WHERE run_id = ?", (run.run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run.run_id,))
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs").fetchone()[0]
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run.run_id, run.started, run.finished, run.verdict, run.device, str(run_dir), seq),
            )
            for result in run.combinations:
                combo = result.combination
                conn.execute(
                    "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run.run_id,
                        combo.name,
                        combo.matrix,
                        result.status,
                        run.started,
                        *_candidate_columns(combo.backend),
                        *_candidate_columns(combo.core),
                        *_candidate_columns(combo.suite),
                        seq,
                    ),
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?, ?)",
                    [(run.run_id, combo.name, t.nodeid, t.outcome) for t in result.tests],
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


@dataclass(frozen=True)
class Scope:
    """Which runs count as the same job: one device and one suite root. One device's last green `primary` says
    nothing about another device's, nor an embedded-suite run about a PyTorch checkout's. `None` matches any."""

    device: str | None = None
    suite: str | None = None  # the suite candidate's name: "embedded" or a checkout's path


ANY = Scope()


def last_green(
    db: Path, combination_name: str, before: str | None = None, scope: Scope = ANY
) -> tuple[str, Combination, dict[str, str]] | None:
    """The latest run in which `combination_name` passed: (run id, its combination, nodeid -> outcome), or None.

    `before` (a run id) only looks at runs recorded before that one, so a run can ask after recording itself."""
    entry = _latest(db, combination_name, before, scope, green_only=True)
    return None if entry is None else (entry.run_id, entry.combination, entry.outcomes)


def previous(db: Path, combination_name: str, before: str | None = None, scope: Scope = ANY) -> Entry | None:
    """The latest recorded result of `combination_name`, whatever its status (None if it never ran)."""
    return _latest(db, combination_name, before, scope, green_only=False)


#: Outcomes that say nothing of whether a test passes: it was not run.
_UNRUN = ("not_run", "deselected")


def last_outcomes(db: Path, combination_name: str, before: str | None = None, scope: Scope = ANY) -> dict[str, str]:
    """Each test's outcome the last time it ran in `combination_name` (nodeid -> outcome), whatever the status of
    that run: a test that failed in a red run and passes now is a fix, which a comparison with the last green run,
    holding no failure, can never show."""
    with _connect(db) as conn:
        query = (
            "SELECT nodeid, outcome FROM ("
            " SELECT o.nodeid, o.outcome, ROW_NUMBER() OVER (PARTITION BY o.nodeid ORDER BY r.seq DESC) AS n"
            " FROM outcomes o JOIN results r USING (run_id, combination) JOIN runs USING (run_id)"
            f" WHERE o.combination = ? AND r.seq < ? AND o.outcome NOT IN ({', '.join('?' for _ in _UNRUN)})"
        )
        where, scoped = _scoped(scope, "r")
        params = [combination_name, _seq_limit(conn, before), *_UNRUN, *scoped]
        rows = conn.execute(f"{query}{where}) WHERE n = 1", params).fetchall()
    return {row[0]: row[1] for row in rows}


def runs(db: Path) -> list[tuple[str, str, str]]:
    """Every recorded run, oldest first: (run id, started, verdict)."""
    with _connect(db) as conn:
        rows = conn.execute("SELECT run_id, started, verdict FROM runs ORDER BY seq").fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _latest(db: Path, name: str, before: str | None, scope: Scope, green_only: bool) -> Entry | None:
    with _connect(db) as conn:
        limit = _seq_limit(conn, before)
        where, scoped = _scoped(scope, "results")
        query = (
            f"SELECT results.* FROM results JOIN runs USING (run_id) WHERE combination = ? AND results.seq < ?{where}"
        )
        params = [name, limit, *scoped]
        if green_only:
            query += " AND status = 'passed'"
        row = conn.execute(query + " ORDER BY results.seq DESC LIMIT 1", params).fetchone()
        if row is None:
            return None
        outcomes = dict(
            conn.execute(
                "SELECT nodeid, outcome FROM outcomes WHERE run_id = ? AND combination = ?", (row["run_id"], name)
            ).fetchall()
        )
        run_dir = conn.execute("SELECT run_dir FROM runs WHERE run_id = ?", (row["run_id"],)).fetchone()[0]
    combination = Combination(
        name=row["combination"],
        matrix=row["matrix"],
        backend=_candidate(row, "backend"),
        core=_candidate(row, "core"),
        suite=_candidate(row, "suite"),
    )
    return Entry(row["run_id"], row["started"], row["status"], combination, outcomes, run_dir)


def _scoped(scope: Scope, results: str) -> tuple[str, list[object]]:
    """The SQL conditions (joined with AND) and parameters that keep rows of `scope`; `results` is the alias of the
    results table, joined with runs."""
    where, params = "", list[object]()
    if scope.device is not None:
        where += " AND runs.device = ?"
        params.append(scope.device)
    if scope.suite is not None:
        where += f" AND {results}.suite_name = ?"
        params.append(scope.suite)
    return where, params


def _seq_limit(conn: sqlite3.Connection, before: str | None) -> int:
    if before is None:
        return 2**62
    row = conn.execute("SELECT seq FROM runs WHERE run_id = ?", (before,)).fetchone()
    return 2**62 if row is None else int(row[0])


def _candidate_columns(candidate: Candidate) -> tuple[str, str, str]:
    return (candidate.name, candidate.version, candidate.sha)


def _candidate(row: sqlite3.Row, kind: str) -> Candidate:
    return from_json(
        Candidate,
        {"kind": kind, "name": row[f"{kind}_name"], "version": row[f"{kind}_version"], "sha": row[f"{kind}_sha"]},
    )


@contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    """An open, checked connection; every sqlite3 failure that means "not our file" becomes one HistoryError line."""
    db = Path(db)
    if db.exists() and not db.is_file():
        raise HistoryError(f"{db}: run history is not a file")
    db.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error as exc:
        raise HistoryError(f"{db}: cannot open the run history: {exc}") from None
    conn.row_factory = sqlite3.Row
    try:
        try:
            _prepare(conn, db)
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{db}: not a Tributary run history ({exc})") from None
        yield conn
    finally:
        conn.close()


def _prepare(conn: sqlite3.Connection, db: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "meta" not in tables:
        raise HistoryError(f"{db}: not a Tributary run history (a SQLite database with other tables)")
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != SCHEMA:
            found = "no schema" if row is None else json.dumps(row[0])
            raise HistoryError(f"{db}: not a Tributary run history of schema {SCHEMA} ({found})")
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    if "meta" not in tables:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _TABLES.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


__all__ = ["ANY", "Entry", "HistoryError", "Scope", "last_green", "previous", "record_run", "runs"]
