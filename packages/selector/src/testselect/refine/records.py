"""testreuse results records (`--testreuse-results` JSON lines) and crcr run directories, read as data and checked.

Every problem is one `FILE:LINE: message` (`RecordsError`), never a traceback. A record's fields are the ones
packages/testreuse/README.md documents ("Results records"); a torn last line (the writer was killed mid-write, no
newline at the end) is dropped as testreuse drops it, any other malformed line is an error.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected", "crashed", "timeout"})
PASSING = frozenset({"passed", "xpassed"})
FAILING = frozenset({"failed", "error", "xfailed", "crashed", "timeout"})  # `skipped` depends on the mode
MODES = frozenset({"mandatory_success", "xfail", "xfail_strict", "skip"})
_STRINGS = ("generic", "file", "op", "module", "mode", "reason", "rule", "signal")


class RecordsError(Exception):
    """A results file or run directory that cannot be used: one line, naming the file (and line)."""


@dataclass(frozen=True)
class Record:
    """One checked results record; `raw` is the line's object as written (what triage is given)."""

    nodeid: str  # as written: test/test_x.py::TestXRING::test_y_ring_float32
    outcome: str
    mode: str | None
    generic: str | None  # Class::test
    op: str | None
    module: str | None
    dtypes: tuple[str, ...]
    where: str  # FILE:LINE
    params: tuple[tuple[str, str], ...]  # its other `@parametrize` arguments, values as text
    raw: dict[str, Any] = field(compare=False, repr=False)

    @property
    def observed(self) -> bool:
        """The case ran on the device: deselected cases and skips by the config's own `skip` mode did not."""
        if self.outcome == "deselected":
            return False
        return not (self.outcome == "skipped" and self.mode == "skip")

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING


def upstream_nodeid(nodeid: str, torch_root: Path | None = None) -> str:
    """The node id relative to TORCH_ROOT (`test/test_x.py::...`), as testreuse writes it, also for a record written
    relative to another rootdir (`packages/.../upstream/test/test_x.py::...`): cut before the `test` folder under
    which the file exists in `torch_root` (without one: the last `test` folder of the path)."""
    path, sep, rest = nodeid.partition("::")
    if path.startswith("test/"):
        return nodeid
    parts = path.split("/")
    cuts = [i for i, part in enumerate(parts[:-1]) if part == "test"]
    if torch_root is not None:
        cuts = [i for i in cuts if (torch_root / "/".join(parts[i:])).is_file()] or cuts
    return "/".join(parts[cuts[-1] :]) + sep + rest if cuts else nodeid


def _check(record: object, where: str) -> Record:
    if not isinstance(record, dict):
        raise RecordsError(f"{where}: a record is a JSON object")
    nodeid = record.get("nodeid")
    if not isinstance(nodeid, str) or "::" not in nodeid:
        raise RecordsError(f"{where}: nodeid: expected a pytest node id (file::Class::test), got {_shown(nodeid)}")
    outcome = record.get("outcome")
    if outcome not in OUTCOMES:
        raise RecordsError(f"{where}: outcome: expected one of {', '.join(sorted(OUTCOMES))}, got {_shown(outcome)}")
    for key in _STRINGS:
        if record.get(key) is not None and not isinstance(record[key], str):
            raise RecordsError(f"{where}: {key}: expected a string, got {_shown(record[key])}")
    mode = record.get("mode")
    if mode is not None and mode not in MODES:
        raise RecordsError(f"{where}: mode: expected one of {', '.join(sorted(MODES))}, got {_shown(mode)}")
    generic = record.get("generic")
    if generic is not None and not re.fullmatch(r"[A-Za-z_]\w*::\w+", generic):
        raise RecordsError(f"{where}: generic: expected Class::test, got {_shown(generic)}")
    dtypes = record.get("dtypes")
    if dtypes is not None and (not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes)):
        raise RecordsError(f"{where}: dtypes: expected a list of dtype names, got {_shown(dtypes)}")
    params = record.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        raise RecordsError(
            f"{where}: params: expected an object of argument names to value texts, got {_shown(params)}"
        )
    failure = record.get("failure")
    if failure is not None and not isinstance(failure, dict):
        raise RecordsError(f"{where}: failure: expected an object, got {_shown(failure)}")
    for key in ("duration", "timeout"):
        value = record.get(key)
        if key == "timeout" and isinstance(value, str):  # testreuse writes a timeout's limit as its text: "15"
            value = _number(value)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
        ):
            raise RecordsError(f"{where}: {key}: expected a number of seconds, got {_shown(record.get(key))}")
    op, module = record.get("op"), record.get("module")
    cell = tuple(sorted(params.items()))
    return Record(nodeid, outcome, mode, generic, op, module, tuple(dtypes or ()), where, cell, record)


def _number(text: str) -> float | str:
    """`"15"` as 15.0; text that is not a number stays text (and is refused)."""
    try:
        return float(text)
    except ValueError:
        return text


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_records(path: Path) -> list[Record]:
    """Every record of a results file, in file order, checked."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise RecordsError(f"{path}:{line}: not UTF-8 text") from None
    except OSError as exc:
        raise RecordsError(f"{path}: cannot read results: {exc.strerror or exc}") from None
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            if number == len(lines) and not text.endswith(("\n", "\r")):
                break  # torn by a killed writer
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise RecordsError(f"{path}:{number}: not a JSON record ({message})") from None
        records.append(_check(data, f"{path}:{number}"))
    return records


@dataclass
class Run:
    """The records of one run (a crcr combination's shards and retries, or one results file), by node id."""

    run_id: str
    sources: list[Path]
    records: dict[str, Record] = field(default_factory=dict)  # the last record of each case
    outcomes: dict[str, list[str]] = field(default_factory=dict)  # every observed outcome of each case, in order

    def flaky(self, nodeid: str) -> bool:
        """Passed in one attempt and failed in another (a retry, a rerun shard)."""
        seen = self.outcomes.get(nodeid, [])
        return any(o in PASSING for o in seen) and not all(o in PASSING for o in seen)


def _fold(run: Run, records: list[Record]) -> None:
    for record in records:
        run.records[record.nodeid] = record
        if record.observed:
            run.outcomes.setdefault(record.nodeid, []).append(record.outcome)


def load_run(path: Path, combination: str = "primary") -> Run:
    """A crcr run directory (`RUN/<combination>/shard-*/results.jsonl`, then `retries/attempt-*/results.jsonl`),
    or one results file. A case with several records keeps its last; passing and failing ones make it flaky."""
    if path.is_file():
        run = Run(path.name, [path])
        _fold(run, read_records(path))
        return run
    if not path.is_dir():
        raise RecordsError(f"{path}: no such run directory or results file")
    record_json = path / "record.json"
    if not record_json.is_file():
        raise RecordsError(f"{path}: not a crcr run directory (no record.json)")
    try:
        meta = json.loads(record_json.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RecordsError(f"{record_json}: cannot read the run record ({exc})") from None
    run_id = meta.get("run_id") if isinstance(meta, dict) and isinstance(meta.get("run_id"), str) else path.name
    where = path / combination
    if not where.is_dir():
        names = sorted(p.name for p in path.iterdir() if p.is_dir())
        raise RecordsError(
            f"{path}: no combination {combination!r} (the run has: {', '.join(names) or 'none'}); see --combination"
        )

    def number(p: Path) -> int:
        found = re.search(r"(\d+)$", p.parent.name)
        return int(found.group(1)) if found else 0

    shards = sorted(where.glob("shard-*/results.jsonl"), key=number)
    if not shards:
        raise RecordsError(f"{where}: no shard-*/results.jsonl (did the combination run?)")
    retries = sorted(where.glob("retries/attempt-*/results.jsonl"), key=number)
    run = Run(run_id, [*shards, *retries])
    for source in run.sources:
        _fold(run, read_records(source))
    return run
