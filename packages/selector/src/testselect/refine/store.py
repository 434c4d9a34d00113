"""The device outcomes table, in the index's own SQLite file next to the CPU evidence: one row per device and case,
the last observation wins, and a row whose content hash is not its test's current one is ignored, as evidence is.
Created on first use; the index's format is unchanged.
"""

from __future__ import annotations

import json
from collections import defaultdict

from testselect.index.store import Store, current_join
from testselect.select.reasoner import DeviceCase

SCHEMA = """
CREATE TABLE IF NOT EXISTS device_cases (
    id INTEGER PRIMARY KEY,
    device TEXT NOT NULL,           -- the profile's device: ring
    node_id TEXT NOT NULL,          -- the pytest id under test/: file::TestFooRING::test_bar_ring_float32
    test_node_id TEXT NOT NULL,     -- the generic test's: file::TestFoo::test_bar (tests.node_id)
    op TEXT,                        -- the OpInfo's full name, as the testreuse plugin parametrized the case
    module TEXT,                    -- the ModuleInfo's name
    dtypes TEXT NOT NULL,           -- JSON list: the case's dtypes
    outcome TEXT NOT NULL,          -- passed xpassed failed error xfailed skipped crashed timeout
    category TEXT,                  -- NULL: passed; else testreuse triage's cause category, or flaky
    reason TEXT NOT NULL,           -- triage's one-line reason ('' for a pass)
    evidence TEXT NOT NULL,         -- JSON: triage's figures for the cause
    params TEXT NOT NULL DEFAULT '[]',  -- JSON [[name, value text], ...]: its other @parametrize arguments
    content_hash TEXT NOT NULL,     -- as the evidence's cases.content_hash: an edit makes it stale
    run TEXT NOT NULL,              -- the run id (a crcr run's, or the results file's name)
    UNIQUE (device, node_id)
);
CREATE INDEX IF NOT EXISTS device_cases_test ON device_cases(test_node_id);
"""


def ensure(store: Store) -> None:
    """Add the device outcomes table to an index that has none yet (and `params` to one recorded before it)."""
    store.db.executescript(SCHEMA)
    if "params" not in {row[1] for row in store.db.execute("PRAGMA table_info(device_cases)")}:
        store.db.execute("ALTER TABLE device_cases ADD COLUMN params TEXT NOT NULL DEFAULT '[]'")


def exists(store: Store) -> bool:
    return store.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'device_cases'").fetchone() is not None


def record(store: Store, test_node_id: str, case: DeviceCase) -> None:
    """Replace the case's previous observation on its device; the content hash is its indexed test's as of now."""
    store.db.execute("DELETE FROM device_cases WHERE device = ? AND node_id = ?", (case.device, case.node_id))
    store.db.execute(
        "INSERT INTO device_cases (device, node_id, test_node_id, op, module, dtypes, outcome, category, reason, "
        "evidence, content_hash, run, params) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            case.device,
            case.node_id,
            test_node_id,
            case.op,
            case.module,
            json.dumps(list(case.dtypes)),
            case.outcome,
            case.category,
            case.reason,
            json.dumps(case.evidence, sort_keys=True),
            store.content_hash(test_node_id),
            case.run,
            json.dumps([list(p) for p in case.params]),
        ),
    )


def device_facts(store: Store) -> dict[str, list[DeviceCase]]:
    """generic test node id -> its current device cases (every device), by node id; {} when none were recorded."""
    if not exists(store):
        return {}
    ensure(store)  # a store recorded before the `params` column gets it
    query = (
        "SELECT d.test_node_id, d.node_id, d.device, d.run, d.outcome, d.op, d.module, d.dtypes, d.category, "
        f"d.reason, d.evidence, d.params FROM device_cases d {current_join('d')} ORDER BY d.node_id, d.device"
    )  # stale rows: unknown
    found: dict[str, list[DeviceCase]] = defaultdict(list)
    for row in store.db.execute(query):
        test, node, device, run, outcome, op, module, dtypes, category, reason, evidence, params = row
        shape, cell = tuple(json.loads(dtypes)), tuple((name, value) for name, value in json.loads(params))
        found[test].append(
            DeviceCase(node, device, run, outcome, op, module, shape, category, reason, json.loads(evidence), cell)
        )
    return dict(found)


def totals(store: Store, device: str) -> dict[str, int]:
    """Rows recorded for `device`, and how many of them are current (their test's content hash unchanged)."""
    if not exists(store):
        return {"device_cases": 0, "current": 0}
    rows = store.db.execute("SELECT COUNT(*) FROM device_cases WHERE device = ?", (device,)).fetchone()[0]
    current = store.db.execute(
        f"SELECT COUNT(*) FROM device_cases d {current_join('d')} AND d.device = ?",
        (device,),
    ).fetchone()[0]
    return {"device_cases": rows, "current": current}
