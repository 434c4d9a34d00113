"""Which command-line arguments name upstream modules: node ids, file paths, and folders holding them."""

from __future__ import annotations

from pathlib import Path

from testreuse.loader import expand_path
from testreuse.selection import claim_node_ids


def _tree(tmp_path: Path) -> dict[str, Path]:
    test = tmp_path / "torch" / "test"
    (test / "nested").mkdir(parents=True)
    modules = {"test/test_a.py": test / "test_a.py", "test/nested/test_b.py": test / "nested" / "test_b.py"}
    for path in modules.values():
        path.write_text("", encoding="utf-8")
    return modules


def test_a_folder_names_every_upstream_module_below_it(tmp_path: Path) -> None:
    modules = _tree(tmp_path)
    test = tmp_path / "torch" / "test"
    assert claim_node_ids([str(test)], modules, tmp_path / "torch") == (["test/nested/test_b.py", "test/test_a.py"], [])
    assert claim_node_ids([str(test / "nested")], modules, tmp_path) == (["test/nested/test_b.py"], [])


def test_a_folder_without_upstream_modules_and_options_stay_with_pytest(tmp_path: Path) -> None:
    modules = _tree(tmp_path)
    (tmp_path / "mine").mkdir()
    args = [str(tmp_path / "mine"), "-k", "x", str(tmp_path / "absent")]
    assert claim_node_ids(args, modules, tmp_path) == ([], args)


def test_node_ids_and_paths_are_claimed_as_before(tmp_path: Path) -> None:
    modules = _tree(tmp_path)
    path = str(tmp_path / "torch" / "test" / "test_a.py")
    claimed, rest = claim_node_ids([f"{path}::TestA::test_x", "test/nested/test_b.py"], modules, tmp_path)
    assert claimed == ["test/test_a.py::TestA::test_x", "test/nested/test_b.py"]
    assert rest == []


def test_a_file_linked_into_the_tree_keeps_its_node_id_under_the_tree(tmp_path: Path) -> None:
    # a checkout whose test files are symlinks (a stand-in tree): resolved, the file left TORCH_ROOT and
    # `test/test_a.py` named nothing pytest could find
    elsewhere = tmp_path / "elsewhere" / "test_a.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("", encoding="utf-8")
    test = tmp_path / "torch" / "test"
    test.mkdir(parents=True)
    (test / "test_a.py").symlink_to(elsewhere)
    (found,) = expand_path("${TORCH_ROOT}/test/test_*.py", tmp_path / "torch", tmp_path)
    assert found == test / "test_a.py"
    modules = {"test/test_a.py": found}
    assert claim_node_ids(["test/test_a.py::TestA"], modules, tmp_path / "torch") == (["test/test_a.py::TestA"], [])
