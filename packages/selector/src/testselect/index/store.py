"""The SQLite store: schema, the file-hash check, and the per-test upsert that keeps unchanged rows' identity."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testselect.index.records import FileRecord, TestRecord

FORMAT = "testselect-index/1"
DEFAULT_STORE = Path(".tributary") / "testselect.sqlite"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,      -- relative to the tree's test/ folder
    sha256 TEXT NOT NULL,
    error TEXT                      -- set when the file could not be parsed (then it has no classes or tests)
);
CREATE TABLE classes (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    lineno INTEGER NOT NULL,
    bases TEXT NOT NULL,            -- JSON list of base expressions
    device_generic INTEGER NOT NULL,
    instantiations TEXT NOT NULL,   -- JSON list of {function, kwargs, line}
    UNIQUE (file_id, name)
);
CREATE TABLE tests (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    node_id TEXT NOT NULL UNIQUE,   -- file::Class::test, the generic (not device-instantiated) name
    class_name TEXT NOT NULL,
    name TEXT NOT NULL,
    lineno INTEGER NOT NULL,
    end_lineno INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    summary TEXT NOT NULL,
    docstring TEXT NOT NULL,
    decorators TEXT NOT NULL,       -- JSON list of decorator names
    params TEXT NOT NULL,           -- JSON object: ops, modules, dtypes, dtypes_if, parametrize, restrictions
    features TEXT NOT NULL,         -- JSON sorted list
    calls TEXT NOT NULL             -- JSON sorted list
);
CREATE INDEX tests_file ON tests(file_id);
"""


def current_join(alias: str) -> str:
    """Joins and a WHERE clause keeping the rows of table `alias` (cases or device cases, by `test_node_id`) that
    are current: recorded against their indexed test's content hash, or, for a test made at import time that the
    index cannot see, against its file's (`file:` and the sha256)."""
    return (
        f"LEFT JOIN tests t ON t.node_id = {alias}.test_node_id "
        f"LEFT JOIN files f ON f.path = substr({alias}.test_node_id, 1, instr({alias}.test_node_id, '::') - 1) "
        f"WHERE {alias}.content_hash = coalesce(t.content_hash, 'file:' || f.sha256, '')"
    )


class StoreError(Exception):
    """A store path that is not a testselect index (another SQLite file, not SQLite at all, unreadable)."""


@dataclass
class Counts:
    """What one index run did, for the one-line report."""

    files_scanned: int = 0
    files_added: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_unparsable: int = 0
    tests_added: int = 0
    tests_changed: int = 0
    tests_removed: int = 0
    tests_unchanged: int = 0
    errors: list[str] = field(default_factory=list)


class Store:
    """An open index; `Store.open` creates it or checks it is ours before anything is written."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.db = connection
        self.path = path

    @classmethod
    def open(cls, path: Path, create: bool = True) -> Store:
        """Open (or, with `create`, create) the store at `path`; StoreError if it is not a testselect index."""
        exists = path.exists()
        if not exists and not create:
            raise StoreError(f"{path}: no index here (run `testselect index` first)")
        if exists and not path.is_file():
            raise StoreError(f"{path}: not a file")
        if not exists:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(path)
            db.execute("PRAGMA foreign_keys = ON")
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                db.executescript(SCHEMA)
                db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
                db.commit()
            else:
                row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() if "meta" in tables else None
                if row is None or row[0] != FORMAT:
                    db.close()
                    raise StoreError(f"{path}: an SQLite file but not a testselect index ({FORMAT})")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a testselect index ({exc})") from None
        return cls(db, path)

    def close(self) -> None:
        self.db.close()

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def file_hashes(self) -> dict[str, tuple[str, str | None]]:
        """path -> (sha256, error) for every file indexed so far."""
        return {p: (h, e) for p, h, e in self.db.execute("SELECT path, sha256, error FROM files")}

    def remove_file(self, path: str, counts: Counts) -> None:
        row = self.db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        counts.tests_removed += self.db.execute("SELECT COUNT(*) FROM tests WHERE file_id = ?", row).fetchone()[0]
        self.db.execute("DELETE FROM files WHERE id = ?", row)
        counts.files_removed += 1

    def record_error(self, path: str, sha256: str, error: str, counts: Counts) -> None:
        """An unparsable file keeps its row (so an unchanged broken file is not re-read) but loses its tests."""
        file_id = self._file_id(path, sha256, error)
        counts.tests_removed += self.db.execute("DELETE FROM tests WHERE file_id = ?", (file_id,)).rowcount
        self.db.execute("DELETE FROM classes WHERE file_id = ?", (file_id,))

    def upsert_file(self, record: FileRecord, sha256: str, counts: Counts) -> None:
        """Replace a file's classes; per test: keep an unchanged row, update a changed one in place, add, remove."""
        file_id = self._file_id(record.path, sha256, None)
        self.db.execute("DELETE FROM classes WHERE file_id = ?", (file_id,))
        self.db.executemany(
            "INSERT INTO classes (file_id, name, lineno, bases, device_generic, instantiations) VALUES (?,?,?,?,?,?)",
            [
                (file_id, c.name, c.lineno, _json(c.bases), int(c.device_generic), _json(c.instantiations))
                for c in record.classes
            ],
        )
        old = {
            node: (row_id, digest)
            for row_id, node, digest in self.db.execute(
                "SELECT id, node_id, content_hash FROM tests WHERE file_id = ?", (file_id,)
            )
        }
        inserts, updates, moves = [], [], []
        for test in record.tests:
            previous = old.pop(test.node_id, None)
            if previous is None:
                inserts.append((file_id, *_row(test)))
                counts.tests_added += 1
            elif previous[1] != test.content_hash:
                updates.append((*_row(test), previous[0]))
                counts.tests_changed += 1
            else:
                moves.append((test.lineno, test.end_lineno, previous[0]))  # an edit above it moved it
                counts.tests_unchanged += 1
        self.db.executemany(f"INSERT INTO tests (file_id, {_COLUMNS}) VALUES (?, {_MARKS})", inserts)
        self.db.executemany(f"UPDATE tests SET {_ASSIGN} WHERE id = ?", updates)
        self.db.executemany("UPDATE tests SET lineno = ?, end_lineno = ? WHERE id = ?", moves)
        self.db.executemany("DELETE FROM tests WHERE id = ?", [(row_id,) for row_id, _ in old.values()])
        counts.tests_removed += len(old)

    def _file_id(self, path: str, sha256: str, error: str | None) -> int:
        self.db.execute(
            "INSERT INTO files (path, sha256, error) VALUES (?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256, error = excluded.error",
            (path, sha256, error),
        )
        return self.db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()[0]

    def commit(self) -> None:
        self.db.commit()

    def tests(self) -> Iterator[dict]:
        """Every test row as a dict with JSON columns decoded, in node-id order (deterministic queries)."""
        cursor = self.db.execute(f"SELECT id, {_COLUMNS} FROM tests ORDER BY node_id")
        names = [d[0] for d in cursor.description]
        for row in cursor:
            yield _decode(dict(zip(names, row, strict=True)))

    def test(self, node_id: str) -> dict | None:
        cursor = self.db.execute(f"SELECT id, {_COLUMNS} FROM tests WHERE node_id = ?", (node_id,))
        row = cursor.fetchone()
        return _decode(dict(zip([d[0] for d in cursor.description], row, strict=True))) if row else None

    def content_hash(self, test_node_id: str) -> str:
        """What an observation of the test is current against (see `current_join`): its content hash, its file's
        for a test the index does not hold, '' when the file is not indexed either."""
        row = self.db.execute(
            "SELECT content_hash FROM tests WHERE node_id = ? "
            "UNION ALL SELECT 'file:' || sha256 FROM files WHERE path = ?",
            (test_node_id, test_node_id.split("::", 1)[0]),
        ).fetchone()
        return row[0] if row else ""

    def totals(self) -> dict[str, int]:
        query = {
            "files": "SELECT COUNT(*) FROM files",
            "classes": "SELECT COUNT(*) FROM classes",
            "tests": "SELECT COUNT(*) FROM tests",
        }
        return {key: self.db.execute(sql).fetchone()[0] for key, sql in query.items()}


_FIELDS = (
    "node_id",
    "class_name",
    "name",
    "lineno",
    "end_lineno",
    "content_hash",
    "summary",
    "docstring",
    "decorators",
    "params",
    "features",
    "calls",
)
_JSON_FIELDS = ("decorators", "params", "features", "calls")
_COLUMNS = ", ".join(_FIELDS)
_MARKS = ", ".join("?" for _ in _FIELDS)
_ASSIGN = ", ".join(f"{name} = ?" for name in _FIELDS)


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def _row(test: TestRecord) -> tuple:
    return tuple(_json(getattr(test, name)) if name in _JSON_FIELDS else getattr(test, name) for name in _FIELDS)


def _decode(row: dict) -> dict:
    for name in _JSON_FIELDS:
        row[name] = json.loads(row[name])
    return row
