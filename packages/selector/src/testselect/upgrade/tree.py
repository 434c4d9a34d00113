"""The test-tree move: index OLD, index NEW into a copy of OLD's store, and compare the tests by node id and hash.

NEW's store starts as a copy of OLD's so the recorded cases come along: a test whose content hash is unchanged keeps
its evidence, and an edited test's evidence goes stale by the same hash check every reader applies.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from testselect.index.build import index_tree
from testselect.index.store import Store


@dataclass(frozen=True)
class TreeDelta:
    """Tests (node ids) added, removed and modified from OLD to NEW; files of NEW that could not be parsed."""

    added: list[str]
    removed: list[str]
    modified: list[str]
    unchanged: int
    stale_cases: int  # OLD's current recorded cases of removed or modified tests
    left_out: set[str] = field(default_factory=set)  # files unparsable in NEW only: compared as if unchanged
    skipped: list[str] = field(default_factory=list)  # their `path:line: message`


def index_both(old_root: Path, new_root: Path, old_store: Store, new_path: Path) -> Store:
    """Bring OLD's store up to date, copy it to `new_path` and index NEW there; the NEW store, open."""
    index_tree(old_root, old_store)
    new_path.parent.mkdir(parents=True, exist_ok=True)
    new_path.unlink(missing_ok=True)
    target = sqlite3.connect(new_path)
    try:
        old_store.db.backup(target)
    finally:
        target.close()
    new_store = Store.open(new_path, create=False)
    index_tree(new_root, new_store)
    return new_store


def _hashes(store: Store) -> dict[str, str]:
    return dict(store.db.execute("SELECT node_id, content_hash FROM tests"))


def _errors(store: Store) -> dict[str, str]:
    return dict(store.db.execute("SELECT path, error FROM files WHERE error IS NOT NULL"))


def tree_delta(old: Store, new: Store) -> TreeDelta:
    """Compare the two stores' tests; a file unparsable in NEW (but not in OLD) is reported and left out."""
    broken_new = _errors(new)
    broken_old = _errors(old)
    left_out = {path for path in broken_new if path not in broken_old}
    before = {n: h for n, h in _hashes(old).items() if n.split("::")[0] not in left_out}
    after = _hashes(new)
    modified = sorted(n for n in set(before) & set(after) if before[n] != after[n])
    removed = sorted(set(before) - set(after))
    stale = 0
    if old.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'cases'").fetchone():
        gone = set(removed) | set(modified)
        current = "SELECT c.test_node_id FROM cases c JOIN tests t ON t.node_id = c.test_node_id"
        current += " AND t.content_hash = c.content_hash"
        stale = sum(1 for (test,) in old.db.execute(current) if test in gone)
    return TreeDelta(
        added=sorted(set(after) - set(before)),
        removed=removed,
        modified=modified,
        unchanged=len(set(before) & set(after)) - len(modified),
        stale_cases=stale,
        left_out=left_out,
        skipped=sorted(broken_new[path] for path in left_out),
    )
