"""The evidence tables, in the index's own SQLite file: a case joins its test row by node id, and its content hash
decides whether a recorded case is still current. Created on first use; the index's format is unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from testselect.index.store import Store, current_join

SCHEMA = """
CREATE TABLE IF NOT EXISTS cases (
    id INTEGER PRIMARY KEY,
    node_id TEXT NOT NULL UNIQUE,   -- the pytest node id under test/, e.g. file::TestFooCPU::test_bar_cpu_float32
    test_node_id TEXT NOT NULL,     -- the generic test's node id (tests.node_id when the index has it)
    content_hash TEXT NOT NULL,     -- tests.content_hash when observed; for a test made at import time (not in
                                    -- the index) 'file:' and its file's sha256; '' if the file is not indexed
    outcome TEXT NOT NULL,          -- passed failed error skipped xfailed xpassed crashed timeout
    duration REAL NOT NULL,
    recorder TEXT NOT NULL DEFAULT 'eager', -- eager / compiled: on CPU; device: what reached the recording device
    opinfo TEXT,                    -- the case's OpInfo full name (@ops tests), from torch's parametrization record
    module TEXT,                    -- the case's ModuleInfo name (@modules tests)
    case_dtypes TEXT NOT NULL DEFAULT '[]',  -- JSON: the dtypes torch parametrized the case with
    case_params TEXT NOT NULL DEFAULT '{}'  -- JSON: its other @parametrize arguments, name -> value as text
);
CREATE INDEX IF NOT EXISTS cases_test ON cases(test_node_id);
CREATE TABLE IF NOT EXISTS case_ops (
    case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    op TEXT NOT NULL,               -- aten::add.Tensor (schema name and overload)
    count INTEGER NOT NULL,
    PRIMARY KEY (op, case_id)
);
CREATE TABLE IF NOT EXISTS case_op_dtypes (
    case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    op TEXT NOT NULL,
    dtype TEXT NOT NULL,            -- a tensor argument's (or `dtype=`) dtype: float64
    PRIMARY KEY (op, dtype, case_id)
);
CREATE TABLE IF NOT EXISTS case_raised (
    case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    op TEXT NOT NULL,               -- an op whose kernel raised: the test asked for the error, or failed on it
    dtype TEXT NOT NULL,            -- a dtype of those calls ('' for a call without one)
    PRIMARY KEY (op, dtype, case_id)
);
"""


@dataclass(frozen=True)
class Case:
    """One observed (or crashed) test case, as the plugin's JSON line gives it."""

    node_id: str
    test_node_id: str
    outcome: str
    duration: float
    ops: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, list[str]] = field(default_factory=dict)
    recorder: str = "eager"
    opinfo: str | None = None
    module: str | None = None
    case_dtypes: tuple[str, ...] = ()
    raised: dict[str, list[str]] = field(default_factory=dict)  # the calls that raised, apart from `ops`
    case_params: dict[str, str] = field(default_factory=dict)  # its other @parametrize arguments, values as text


#: Columns added to `cases` after its first release: a store recorded before them gets them on first use.
_ADDED = {
    "recorder": "TEXT NOT NULL DEFAULT 'eager'",
    "opinfo": "TEXT",
    "module": "TEXT",
    "case_dtypes": "TEXT NOT NULL DEFAULT '[]'",
    "case_params": "TEXT NOT NULL DEFAULT '{}'",
}


def ensure(store: Store) -> None:
    """Add the evidence tables to an index that has none yet (and the later columns to one recorded before them)."""
    store.db.executescript(SCHEMA)
    columns = {row[1] for row in store.db.execute("PRAGMA table_info(cases)")}
    for name, kind in _ADDED.items():
        if name not in columns:
            store.db.execute(f"ALTER TABLE cases ADD COLUMN {name} {kind}")


def record(store: Store, case: Case) -> None:
    """Replace the case's previous observation; its content hash is the indexed test's (or file's) as of now."""
    store.db.execute("DELETE FROM cases WHERE node_id = ?", (case.node_id,))
    case_id = store.db.execute(
        "INSERT INTO cases (node_id, test_node_id, content_hash, outcome, duration, recorder, opinfo, module, "
        "case_dtypes, case_params) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            case.node_id,
            case.test_node_id,
            store.content_hash(case.test_node_id),
            case.outcome,
            case.duration,
            case.recorder,
            case.opinfo,
            case.module,
            json.dumps(list(case.case_dtypes)),
            json.dumps(case.case_params, sort_keys=True),
        ),
    ).lastrowid
    store.db.executemany("INSERT INTO case_ops VALUES (?, ?, ?)", [(case_id, o, n) for o, n in case.ops.items()])
    store.db.executemany(
        "INSERT INTO case_op_dtypes VALUES (?, ?, ?)",
        [(case_id, op, dtype) for op, dtypes in case.dtypes.items() for dtype in dtypes],
    )
    store.db.executemany(
        "INSERT INTO case_raised VALUES (?, ?, ?)",
        [(case_id, op, dtype) for op, dtypes in case.raised.items() for dtype in dtypes or [""]],
    )


def current(store: Store) -> set[str]:
    """Node ids of cases recorded against their test's current content hash: the ones a rerun skips."""
    query = f"SELECT c.node_id FROM cases c {current_join('c')}"
    return {row[0] for row in store.db.execute(query)}


def totals(store: Store) -> dict[str, int]:
    """Cases recorded and distinct ops seen, for the run's report."""
    cases = store.db.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
    ops = store.db.execute("SELECT COUNT(DISTINCT op) FROM case_ops").fetchone()[0]
    return {"cases": cases, "distinct_ops": ops}


def ops_of(store: Store, node_id: str) -> list[dict] | None:
    """The cases of `node_id` (a case's id, or a generic test's: all its cases) with their ops; None if unknown."""
    cases = store.db.execute(
        "SELECT id, node_id, outcome, duration, recorder FROM cases WHERE node_id = ? OR test_node_id = ? "
        "ORDER BY node_id",
        (node_id, node_id),
    ).fetchall()
    if not cases:
        return None
    shown = []
    for case_id, case_node, outcome, duration, recorder in cases:
        dtypes: dict[str, list[str]] = {}
        for op, dtype in store.db.execute(
            "SELECT op, dtype FROM case_op_dtypes WHERE case_id = ? ORDER BY op, dtype", (case_id,)
        ):
            dtypes.setdefault(op, []).append(dtype)
        counts = store.db.execute("SELECT op, count FROM case_ops WHERE case_id = ? ORDER BY op", (case_id,))
        ops = [{"op": op, "count": count, "dtypes": dtypes.get(op, [])} for op, count in counts]
        raised: dict[str, list[str]] = {}
        for op, dtype in store.db.execute(
            "SELECT op, dtype FROM case_raised WHERE case_id = ? ORDER BY op, dtype", (case_id,)
        ):
            raised.setdefault(op, []).extend([dtype] if dtype else [])
        ops += [{"op": op, "raised": True, "dtypes": kinds} for op, kinds in raised.items()]
        shown.append({"node_id": case_node, "outcome": outcome, "duration": duration, "recorder": recorder, "ops": ops})
    return shown


def tests_of(store: Store, op: str, dtype: str | None) -> list[dict]:
    """The cases that ran `op` (with a `dtype` argument, if given), by node id, with the call count and the case's
    parametrization (OpInfo, ModuleInfo, dtypes, other arguments)."""
    columns = "c.node_id, c.test_node_id, c.outcome, o.count, c.opinfo, c.module, c.case_dtypes, c.case_params"
    if dtype is None:
        sql = f"SELECT {columns} FROM case_ops o JOIN cases c ON c.id = o.case_id WHERE o.op = ? ORDER BY c.node_id"
        rows = store.db.execute(sql, (op,))
    else:
        sql = (
            f"SELECT {columns} FROM case_op_dtypes d JOIN case_ops o ON o.case_id = d.case_id AND o.op = d.op "
            "JOIN cases c ON c.id = d.case_id WHERE d.op = ? AND d.dtype = ? ORDER BY c.node_id"
        )
        rows = store.db.execute(sql, (op, dtype))
    return [
        {"node_id": n, "test": t, "outcome": o, "count": k, "opinfo": op_, "module": m, "dtypes": json.loads(d)}
        | {"params": json.loads(p)}
        for n, t, o, k, op_, m, d, p in rows
    ]
