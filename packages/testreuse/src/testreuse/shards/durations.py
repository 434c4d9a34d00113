"""The durations store: PyTorch's `test-times.json` shape, one level deeper, filled and merged from runs.

A store is `{job: {config: {file: {class: {test: seconds}}}}}`, the shape of PyTorch's `test-class-times.json` with a
test level below the class. Any level may be a leaf (a number), so PyTorch's own files (file or class leaves) load
unchanged. File keys are the node id's path as written (`test/test_ops.py`); module-level tests sit under class `""`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from testreuse import results

TestPath = tuple[str, ...]
"""(file,), (file, class) or (file, class, test): where a duration sits."""
Table = dict[TestPath, float]
"""The leaves of one job/config: no key is a prefix of another."""
Store = dict[str, dict[str, Table]]
"""job -> config -> table."""

MAX_DEPTH = 3
NOT_RUN = frozenset({"deselected"})
"""Outcomes whose duration says nothing about the test's cost."""


class DurationsError(ValueError):
    """Malformed durations or results: the one-line message names the file and the field."""


def _name(key: str) -> str:
    """A key as an error message can show it on one line."""
    return key if key.isprintable() else repr(key)


def _leaves(node: object, path: TestPath, source: str, field: str, out: Table) -> None:
    if isinstance(node, bool) or not isinstance(node, int | float | dict):
        raise DurationsError(f"{source}: {field}: expected seconds or an object, got {type(node).__name__}")
    if isinstance(node, dict):
        if len(path) == MAX_DEPTH:
            raise DurationsError(f"{source}: {field}: nested deeper than file/class/test")
        for key, child in node.items():
            _leaves(child, (*path, key), source, f"{field}.{_name(key)}", out)
        return
    if not path or not math.isfinite(node) or node < 0:
        raise DurationsError(f"{source}: {field}: seconds must be a finite number >= 0, got {node!r}")
    out[path] = float(node)


def parse_store(data: object, source: str) -> Store:
    """Validate a decoded store; every problem is a DurationsError naming `source` and the dotted field."""
    if not isinstance(data, dict):
        raise DurationsError(f"{source}: top level: expected an object of jobs, got {type(data).__name__}")
    store: Store = {}
    for job, configs in data.items():
        if not isinstance(configs, dict):
            got = type(configs).__name__
            raise DurationsError(f"{source}: {_name(job)}: expected an object of test configs, got {got}")
        store[job] = {}
        for config, files in configs.items():
            if not isinstance(files, dict):
                raise DurationsError(f"{source}: {_name(job)}.{_name(config)}: expected an object of files")
            table: Table = {}
            for file, node in files.items():
                _leaves(node, (file,), source, f"{_name(job)}.{_name(config)}.{_name(file)}", table)
            store[job][config] = table
    return store


def load_store(path: Path) -> Store:
    """Read and validate a store file; unreadable or malformed files raise DurationsError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DurationsError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DurationsError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return parse_store(data, str(path))


def _nest(table: Table) -> dict[str, object]:
    tree: dict[str, object] = {}
    for path, seconds in table.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})  # type: ignore[assignment]
        node[path[-1]] = round(seconds, 3)  # type: ignore[index]
    return tree


def dump_store(store: Store) -> str:
    """Deterministic text (sorted keys, millisecond seconds) so a store diffs cleanly between runs."""
    nested = {job: {config: _nest(table) for config, table in configs.items()} for job, configs in store.items()}
    return json.dumps(nested, indent=1, sort_keys=True) + "\n"


def split_nodeid(nodeid: str) -> TestPath:
    """`file::Class::test` -> (file, Class, test); `file::test` -> (file, "", test); nested classes join with ::."""
    parts = nodeid.split("::")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"not a test node id: {nodeid!r}")
    if len(parts) == 2:
        return (parts[0], "", parts[1])
    return (parts[0], "::".join(parts[1:-1]), parts[-1])


def _record_path(record: Mapping[str, object], where: str) -> TestPath:
    if isinstance(record.get("nodeid"), str):
        try:
            return split_nodeid(record["nodeid"])  # type: ignore[arg-type]
        except ValueError as exc:
            raise DurationsError(f"{where}: nodeid: {exc}") from None
    names = [record.get(key, "") for key in ("file", "class", "test")]
    if not all(isinstance(name, str) for name in names) or not names[0] or not names[2]:
        raise DurationsError(f"{where}: nodeid: expected a node id, or file/class/test strings")
    return tuple(names)  # type: ignore[return-value]


def table_from_records(records: Iterable[Mapping[str, object]], source: str) -> Table:
    """One run's table from its result records; a test recorded twice (a retry, a rerun shard) keeps its longest."""
    table: Table = {}
    for index, record in enumerate(records, 1):
        where = f"{source}:{index}"
        if not isinstance(record, Mapping):
            raise DurationsError(f"{where}: record: expected an object, got {type(record).__name__}")
        outcome = record.get("outcome")
        if not isinstance(outcome, str):
            raise DurationsError(f"{where}: outcome: expected a string, got {outcome!r}")
        if outcome in NOT_RUN:
            continue
        seconds = record.get("duration")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise DurationsError(f"{where}: duration: expected seconds, got {seconds!r}")
        if seconds < 0:
            raise DurationsError(f"{where}: duration: must be >= 0, got {seconds!r}")
        path = _record_path(record, where)
        table[path] = max(table.get(path, 0.0), float(seconds))
    return table


def read_results(path: Path) -> Table:
    """A table from a testreuse results file (JSON lines, one record per test)."""
    try:
        records = results.read_results(path)
    except results.ResultsError as exc:
        raise DurationsError(str(exc)) from None
    return table_from_records(records, str(path))


def merge_shards(tables: Iterable[Table]) -> Table:
    """The shards of one run into one table: a union; a test in two shards keeps its longest (order-independent)."""
    merged: Table = {}
    for table in tables:
        for path, seconds in table.items():
            merged[path] = max(merged.get(path, 0.0), seconds)
    return merged


def _overlaps(a: TestPath, b: TestPath) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def merge_runs(old: Table, new: Table, alpha: float = 0.5) -> Table:
    """A newer run into the store: exponential moving average `alpha * new + (1 - alpha) * old` per test.

    Tests the new run did not time keep their old value (another job or shard may not have run them). Where the two
    disagree on granularity (the store holds a class total, the run times its tests), the newer run's keys win.
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    by_file: dict[str, list[TestPath]] = {}
    for path in new:
        by_file.setdefault(path[0], []).append(path)
    merged: Table = {}
    for path, seconds in old.items():
        if path in new:
            merged[path] = alpha * new[path] + (1 - alpha) * seconds
        elif not any(_overlaps(path, other) for other in by_file.get(path[0], ())):
            merged[path] = seconds
    for path, seconds in new.items():
        merged.setdefault(path, seconds)
    return merged
