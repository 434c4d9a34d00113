"""Incremental re-indexing: by file hash, then per test by content hash, keeping unchanged rows' identity."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from testselect.index.build import index_tree
from testselect.index.store import Store, StoreError

from .conftest import REAL


def _index(root: Path, store_path: Path):
    store = Store.open(store_path)
    try:
        return index_tree(root, store), {t["node_id"]: (t["id"], t["content_hash"]) for t in store.tests()}
    finally:
        store.close()


def test_full_then_unchanged(tree: Path, tmp_path: Path) -> None:
    counts, rows = _index(tree, tmp_path / "s.sqlite")
    assert (counts.files_scanned, counts.files_added, counts.tests_added) == (9, 9, len(rows))
    assert len(rows) == 119
    again, same = _index(tree, tmp_path / "s.sqlite")
    assert (again.files_unchanged, again.files_changed, again.tests_added, again.tests_changed) == (9, 0, 0, 0)
    assert same == rows


def test_editing_one_test_changes_only_its_hash(tree: Path, tmp_path: Path) -> None:
    _, before = _index(tree, tmp_path / "s.sqlite")
    path = tree / "test" / "test_view_ops.py"
    text = path.read_text(encoding="utf-8")
    # One test edited, and a line added above everything, which moves every test in the file.
    edited = text.replace("        v = torch.view_as_real(t)\n", "        v = torch.view_as_real(t.clone())\n", 1)
    path.write_text("# moved\n" + edited, encoding="utf-8")
    counts, after = _index(tree, tmp_path / "s.sqlite")
    assert (counts.files_changed, counts.files_unchanged) == (1, 8)
    assert (counts.tests_changed, counts.tests_added, counts.tests_removed) == (1, 0, 0)
    assert counts.tests_unchanged == sum(1 for node in before if node.startswith("test_view_ops.py::")) - 1
    node = "test_view_ops.py::TestViewOps::test_view_as_real"
    assert {n for n in before if before[n][1] != after[n][1]} == {node}
    assert {n: r[0] for n, r in before.items()} == {n: r[0] for n, r in after.items()}  # identities kept
    store = Store.open(tmp_path / "s.sqlite")
    try:
        moved = store.test("test_view_ops.py::TestViewOps::test_view_dtype_new")
    finally:
        store.close()
    assert moved is not None
    assert text.splitlines()[moved["lineno"] - 2].lstrip().startswith("def test_view_dtype_new")


def test_added_and_removed_tests_and_files(tree: Path, tmp_path: Path) -> None:
    _, before = _index(tree, tmp_path / "s.sqlite")
    (tree / "test" / "test_modules.py").unlink()
    path = tree / "test" / "test_ops.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("    def test_noncontiguous_samples(", "    def test_renamed_noncontiguous(", 1), encoding="utf-8"
    )
    counts, after = _index(tree, tmp_path / "s.sqlite")
    removed_modules = sum(1 for node in before if node.startswith("test_modules.py::"))
    assert counts.files_removed == 1
    assert counts.tests_added == 1
    assert counts.tests_removed == removed_modules + 1
    assert not any(node.startswith("test_modules.py::") for node in after)
    assert "test_ops.py::TestCommon::test_renamed_noncontiguous" in after


def test_unparsable_file_reported_and_skipped(tree: Path, tmp_path: Path) -> None:
    _, before = _index(tree, tmp_path / "s.sqlite")
    (tree / "test" / "test_broken.py").write_text("class T(TestCase):\n    def test_x(self)\n", encoding="utf-8")
    (tree / "test" / "test_bytes.py").write_bytes(b"x = '\xff'\n")
    path = tree / "test" / "test_shape_ops.py"
    path.write_text(path.read_text(encoding="utf-8") + "\ndef broken(:\n", encoding="utf-8")
    counts, after = _index(tree, tmp_path / "s.sqlite")
    assert counts.files_unparsable == 3
    assert sorted(e.split(":", 2)[0] + ":" + e.split(":", 2)[1] for e in counts.errors) == [
        "test_broken.py:2",
        "test_bytes.py:1",
        f"test_shape_ops.py:{len(path.read_text(encoding='utf-8').splitlines())}",
    ]
    assert not any(node.startswith("test_shape_ops.py::") for node in after)
    assert len(after) == len(before) - sum(1 for n in before if n.startswith("test_shape_ops.py::"))
    again, _ = _index(tree, tmp_path / "s.sqlite")  # unchanged broken files are not re-read but still reported
    assert (again.files_changed, again.files_unparsable, len(again.errors)) == (0, 3, 3)


def test_store_that_is_not_ours(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not a testselect index"):
        Store.open(other)
    text = tmp_path / "text.sqlite"
    text.write_text("hello, not a database\n" * 100, encoding="utf-8")
    with pytest.raises(StoreError, match="not a testselect index"):
        Store.open(text)


@pytest.mark.skipif(not (REAL / "test").is_dir(), reason="the real upstream copies are not beside the repository")
def test_real_files(tmp_path: Path) -> None:
    counts, rows = _index(REAL, tmp_path / "s.sqlite")
    assert counts.files_unparsable == 0
    assert counts.files_scanned == 4
    assert len(rows) > 400
    assert "test_indexing.py::NumpyTests::test_boolean_indexing_onedim" in rows
