"""`testselect index`: walk a tree's test/ folder and bring the store up to date, re-parsing only changed files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from testselect.index.parse import parse_source
from testselect.index.records import ParseError
from testselect.index.store import Counts, Store


class TreeError(Exception):
    """A --torch-root that has no test/ folder."""


def test_files(test_dir: Path) -> list[Path]:
    """The files pytest would collect by its default names (test_*.py, *_test.py), sorted, caches skipped."""
    found = {p for pattern in ("test_*.py", "*_test.py") for p in test_dir.rglob(pattern)}
    return sorted(p for p in found if p.is_file() and "__pycache__" not in p.parts)


def tree_test_dir(torch_root: Path) -> Path:
    test_dir = torch_root / "test"
    if not test_dir.is_dir():
        raise TreeError(f"{torch_root}: no test/ folder (pass a PyTorch checkout's root as --torch-root)")
    return test_dir


def index_tree(torch_root: Path, store: Store) -> Counts:
    """Index `torch_root`/test into `store`: unchanged files (by sha256) skipped, removed files dropped."""
    test_dir = tree_test_dir(torch_root)
    counts = Counts()
    known = store.file_hashes()
    seen: set[str] = set()
    for path in test_files(test_dir):
        relative = path.relative_to(test_dir).as_posix()
        seen.add(relative)
        counts.files_scanned += 1
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        previous = known.get(relative)
        if previous is not None and previous[0] == digest:
            counts.files_unchanged += 1
            if previous[1]:
                counts.files_unparsable += 1
                counts.errors.append(previous[1])
            continue
        if previous is None:
            counts.files_added += 1
        else:
            counts.files_changed += 1
        try:
            record = parse_source(relative, data)
        except ParseError as exc:
            counts.files_unparsable += 1
            counts.errors.append(str(exc))
            store.record_error(relative, digest, str(exc), counts)
            continue
        store.upsert_file(record, digest, counts)
    for relative in sorted(set(known) - seen):
        store.remove_file(relative, counts)
    store.set_meta("torch_root", str(torch_root.resolve()))
    store.commit()
    return counts
