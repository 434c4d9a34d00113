"""The test-tree move: index OLD, index NEW into a copy of OLD's store, and compare the tests by node id and hash.

NEW's store starts as a copy of OLD's so the recorded cases come along: a test whose content hash is unchanged keeps
its evidence, and an edited test's evidence goes stale by the same hash check every reader applies.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from testselect.index.build import index_tree
from testselect.index.store import Counts, Store


@dataclass(frozen=True)
class TreeDelta:
    """Tests (node ids) added, removed and modified from OLD to NEW; files of NEW that could not be parsed."""

    added: list[str]
    removed: list[str]
    modified: list[str]
    unchanged: int
    stale_cases: int  # OLD's current recorded cases of removed or modified tests
    skipped: list[str] = field(default_factory=list)  # `path:line: message` of NEW's unparsable files

    @property
    def skipped_paths(self) -> set[str]:
        return {line.split(":", 1)[0] for line in self.skipped}


def index_both(old_root: Path, new_root: Path, old_store: Store, new_path: Path) -> tuple[Store, Counts]:
    """Bring OLD's store up to date, copy it to `new_path` and index NEW there; the NEW store and its counts."""
    index_tree(old_root, old_store)
    new_path.parent.mkdir(parents=True, exist_ok=True)
    new_path.unlink(missing_ok=True)
    target = sqlite3.connect(new_path)
    try:
        old_store.db.backup(target)
    finally:
        target.close()
    new_store = Store.open(new_path, create=False)
    return new_store, index_tree(new_root, new_store)


def _hashes(store: Store) -> dict[str, str]:
    return dict(store.db.execute("SELECT node_id, content_hash FROM tests"))


def _errors(store: Store) -> dict[str, str]:
    return dict(store.db.execute("SELECT path, error FROM files WHERE error IS NOT NULL"))


def tree_delta(old: Store, new: Store) -> TreeDelta:
    """Compare the two stores' tests; a file unparsable in NEW (but not in OLD) is reported and left out."""
    broken_new = _errors(new)
    skipped = sorted(error for path, error in broken_new.items() if path not in _errors(old))
    left_out = {line.split(":", 1)[0] for line in skipped}
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
        skipped=skipped,
    )
