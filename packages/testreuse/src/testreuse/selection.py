"""Node ids given on the command line: upstream files live outside the invocation folder, so pytest cannot resolve
`test/test_ops.py::TestCommonRING::test_out_add_ring_float32` itself. These are claimed here, so every node id the
plugin prints (results, JUnit, `-r`, `--lf`'s cache) can be passed back to pytest to rerun exactly that test."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


def claim_node_ids(args: Iterable[str], modules: Mapping[str, Path], rootdir: Path) -> tuple[list[str], list[str]]:
    """Split pytest's arguments into selections of upstream node ids and the rest. `modules` maps each upstream
    module's node id to its file; an argument names one by that node id, by the file's own path, or by the node id
    as pytest prints it when the invocation folder is not the rootdir (`../test/test_ops.py::...`). A folder holding
    upstream modules (`test/`, from any invocation folder) names each of them: left to pytest, it would collect
    them a second time as plain modules that no config decides."""
    by_path = {path.resolve(): nodeid for nodeid, path in modules.items()}
    by_path.update({(rootdir / nodeid).resolve(): nodeid for nodeid in modules})
    claimed, rest = [], []
    for arg in args:
        head, sep, tail = arg.partition("::")
        module = head if head in modules else by_path.get(Path(head).resolve())
        inside = [] if sep or module else _modules_in(Path(head).resolve(), by_path)
        if inside:
            claimed.extend(inside)
        elif module is None:
            rest.append(arg)
        else:
            claimed.append(module + sep + tail)
    return claimed, rest


def _modules_in(folder: Path, by_path: Mapping[Path, str]) -> list[str]:
    """The upstream modules below `folder`, by node id; none when it is not a folder."""
    if not folder.is_dir():
        return []
    return sorted({nodeid for path, nodeid in by_path.items() if path.is_relative_to(folder)})


def is_selected(nodeid: str, selections: Iterable[str]) -> bool:
    """A selection names a module, a class or a test: it keeps itself and everything below it."""
    return any(nodeid == s or nodeid.startswith(s + "::") or nodeid.startswith(s + "[") for s in selections)


def selected_modules(selections: Iterable[str]) -> set[str]:
    """The module node ids the selections reach: only these files are imported."""
    return {s.partition("::")[0] for s in selections}
