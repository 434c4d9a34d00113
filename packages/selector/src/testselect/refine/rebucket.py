"""Execution on the device beats prediction: a test's predicted entries re-bucketed by how its cases ended there.

Each observed case wants a mode: a pass `mandatory_success`; a failure with one cause `xfail_strict` with that cause
as its reason (a crash or a timeout `skip`, since testreuse fails a run on them in any mode, and a test that skips
itself at runtime `skip`); a case that both passed and failed in one run (a retry) `xfail`. The cases an entry
decides (testreuse's precedence: the last matching scoped entry, else the unscoped one) give it the mode most of them
want; the others get narrower entries right after it, scoped by OpInfo (`only: {ops: [...]}`) or ModuleInfo and,
where one op's dtypes end differently, by dtype too; a plain test's cases by dtype. Cases that no `only` can tell
apart (the parametrizations of one dtype) that end differently make one `xfail` entry naming their causes (`skip`
if one of them crashed): never `mandatory_success` for a case seen failing. An entry whose cases did not run stays
as predicted; a `mandatory_success` entry whose cases all passed is kept as it is.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from testselect.select.reasoner import Decision, DeviceCase

MODE_OF = {"crash": "skip", "timeout": "skip", "runtime_skip": "skip", "flaky": "xfail"}  # else xfail_strict
DIED = ("crash", "timeout")
PASS = "pass"


@dataclass(frozen=True)
class Entry:
    """A config entry as precedence sees it: one test, its mode and its `only` scope (empty: every case)."""

    node_id: str
    mode: str
    reason: str
    dtypes: tuple[str | tuple[str, ...], ...] = ()  # a name: one of the case's dtypes; a tuple: exactly those
    ops: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[str, ...]], ...] = ()  # argument name -> the value texts it may take

    @classmethod
    def of(cls, d: Decision) -> Entry:
        dtypes = ((d.dtype,) if d.dtype else ()) + d.combos
        return cls(d.node_id, d.mode, d.reason, dtypes, d.ops, d.modules, tuple((k, (v,)) for k, v in d.params))

    @property
    def scope(self) -> tuple:
        return self.dtypes, self.ops, self.modules, self.params

    @property
    def scoped(self) -> bool:
        return any(self.scope)

    def matches(self, case: DeviceCase) -> bool:
        """testreuse's `only`: every key given holds (`dtypes`: one of the case's dtypes, or all of them; `params`:
        each argument takes one of its values)."""
        arguments = dict(case.params)
        return (
            (not self.dtypes or any(d in case.dtypes if isinstance(d, str) else d == case.dtypes for d in self.dtypes))
            and (not self.ops or case.op in self.ops)
            and (not self.modules or case.module in self.modules)
            and all(arguments.get(name) in values for name, values in self.params)
        )


def deciding(entries: Sequence[Entry], case: DeviceCase) -> int | None:
    """The index of the entry that decides `case`: a scoped one beats an unscoped one, among equals the later wins."""
    scoped = plain = None
    for i, entry in enumerate(entries):
        if entry.matches(case):
            if entry.scoped:
                scoped = i
            else:
                plain = i
    return scoped if scoped is not None else plain


@dataclass(frozen=True)
class Want:
    """What a group of observed cases says its entry should be; `key` groups cases that ended the same way."""

    key: str
    mode: str
    reason: str
    basis: str


def case_key(case: DeviceCase) -> str:
    if case.category is None:
        return PASS
    if case.category == "numerics":
        return "numerics"  # the figures differ per case; the worst one is the reason
    return f"{case.category}: {case.reason}"


def _runs(cases: Sequence[DeviceCase]) -> str:
    runs = sorted({c.run for c in cases})
    if len(runs) <= 2:
        return " and ".join(runs)
    return f"{runs[0]}, {runs[1]} and {len(runs) - 2} more"


def _abs_error(case: DeviceCase) -> float:
    value = case.evidence.get("max_abs", 0.0)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else math.inf


def want(cases: Sequence[DeviceCase], device: str, source: str = "device run") -> Want:
    """The entry the cases want: all passed, all failed one way, or split (their causes named)."""
    keys = sorted({case_key(c) for c in cases})
    runs = _runs(cases)
    if keys == [PASS]:
        return Want(PASS, "mandatory_success", f"passed on {device} in run {runs}", f"{source}: passed")
    failing = sorted((c for c in cases if c.category is not None), key=lambda c: c.node_id)
    if len(keys) == 1:
        worst = max(failing, key=_abs_error) if keys[0] == "numerics" else failing[0]
        category = str(worst.category)
        return Want(keys[0], MODE_OF.get(category, "xfail_strict"), worst.reason, f"{source}: {category}")
    key = "mixed: " + " | ".join(keys)
    died = [c for c in failing if c.category in DIED]
    share = f"{len(failing)} of {len(cases)} cases"
    if died:  # a crash fails a run in any mode: only skip keeps it out
        return Want(key, "skip", f"{died[0].reason} ({share} fail)", f"{source}: {died[0].category}")
    causes = Counter(c.reason if c.category != "numerics" else "results not close" for c in failing)
    shown = "; ".join(reason for reason, _ in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:2])
    more = f" and {len(causes) - 2} more causes" if len(causes) > 2 else ""
    return Want(key, "xfail", f"{share} fail on {device} in run {runs}: {shown}{more}", f"{source}: mixed")


def _slices(entry: Decision, cases: Sequence[DeviceCase]) -> dict[tuple, list[DeviceCase]]:
    """The cases split as finely as an `only` under `entry` can tell them apart: (("ops"|"modules", name) or None,
    dtype, dtype combination (a plain case of several dtypes) or None). An op with a case of no single dtype is one
    slice; with op cases beside plain ones, the plain ones are one slice (an `only: {dtypes}` entry would take the
    op cases of that dtype too)."""

    def selector(c: DeviceCase) -> tuple[str, str] | None:
        return ("ops", c.op) if c.op else ("modules", c.module) if c.module else None

    def dtype(c: DeviceCase) -> str | tuple[str, ...] | None:
        if entry.dtype is not None or entry.combos or not c.dtypes:
            return None
        if len(c.dtypes) == 1:
            return c.dtypes[0]
        return c.dtypes if selector(c) is None else None

    undated = {selector(c) for c in cases if dtype(c) is None}
    mixed = any(selector(c) is not None for c in cases) and any(selector(c) is None for c in cases)
    slices: dict[tuple, list[DeviceCase]] = defaultdict(list)
    for c in cases:
        sel = selector(c)
        whole = sel in undated or (sel is None and mixed)
        slices[(sel, None if whole else dtype(c))].append(c)
    return slices


def split(entry: Decision, cases: Sequence[DeviceCase], device: str, source: str = "device run") -> list[Decision]:
    """`entry` re-bucketed by the cases it decides, then its narrower entries."""
    slices = _slices(entry, cases)
    wants = {k: want(v, device, source) for k, v in slices.items()}
    if (None, None) in slices:  # no `only` can single these out: the entry itself is theirs
        head = wants[(None, None)]
    else:
        sizes: Counter[str] = Counter()
        for k, v in slices.items():
            sizes[wants[k].key] += len(v)
        top = min(sizes, key=lambda key: (-sizes[key], key != PASS, key))
        head = want([c for k, v in slices.items() if wants[k].key == top for c in v], device, source)
    if head.mode == entry.mode == "mandatory_success":
        first = entry
    else:
        first = dataclasses.replace(entry, mode=head.mode, reason=head.reason, basis=head.basis)
    whole: dict[tuple[str, str], list[tuple[str, list[DeviceCase]]]] = defaultdict(list)  # (kind, key) -> ops
    by_dtype: dict[tuple[str, str, str], list[tuple[str, list[DeviceCase]]]] = defaultdict(list)
    plain: dict[str, list[DeviceCase]] = {}
    for sel in sorted({k[0] for k in slices if k[0] is not None}):
        own = {k: v for k, v in slices.items() if k[0] == sel}
        keys = {wants[k].key for k in own}
        if keys == {head.key}:
            continue
        if len(keys) == 1:
            whole[(sel[0], keys.pop())].append((sel[1], [c for v in own.values() for c in v]))
            continue
        for k, v in sorted(own.items(), key=lambda kv: kv[0][1] or ""):
            if wants[k].key != head.key:
                by_dtype[(sel[0], wants[k].key, str(k[1]))].append((sel[1], v))
    for (sel, dtype), v in slices.items():
        if sel is None and isinstance(dtype, str) and wants[(sel, dtype)].key != head.key:
            plain[dtype] = v
    narrow = []

    def scoped(kind: str, items: list[tuple[str, list[DeviceCase]]], dtype: str | None) -> Decision:
        names = tuple(sorted(name for name, _ in items))
        w = want([c for _, v in items for c in v], device, source)
        ops, modules = (names, ()) if kind == "ops" else ((), names)
        return Decision(entry.node_id, w.mode, w.reason, w.basis, dtype, ops, modules)

    for (kind, _key), items in sorted(whole.items()):
        narrow.append(scoped(kind, items, entry.dtype))
    for (kind, _key, dtype), items in sorted(by_dtype.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        narrow.append(scoped(kind, items, dtype))
    for dtype, v in sorted(plain.items()):
        w = want(v, device, source)
        narrow.append(Decision(entry.node_id, w.mode, w.reason, w.basis, dtype))
    combos = {k: v for k, v in slices.items() if isinstance(k[1], tuple)}
    entries = [first, *narrow, *_cells(entry.node_id, [first, *narrow], combos, wants, device, source)]
    return entries + _parametrized(entry.node_id, entries, cases, device, source)


def _cells(
    node_id: str,
    entries: list[Decision],
    combos: dict[tuple, list[DeviceCase]],
    wants: dict[tuple, Want],
    device: str,
    source: str,
) -> list[Decision]:
    """Entries for the dtype combinations (cells of a test parametrized by several dtypes) that the entries before
    them would decide otherwise than the cells' cases want: one entry per way of ending, listing its cells (an
    exact combination matches no other case, so these come last)."""
    scoped = [Entry.of(d) for d in entries]
    apart: dict[str, list[tuple[tuple[str, ...], list[DeviceCase]]]] = defaultdict(list)
    for (sel, combo), cases in combos.items():
        w = wants[(sel, combo)]
        if _misdecided(entries, scoped, cases, w):
            apart[w.key].append((combo, cases))
    out = []
    for _key, cells in sorted(apart.items()):
        w = want([c for _, v in cells for c in v], device, source)
        out.append(Decision(node_id, w.mode, w.reason, w.basis, combos=tuple(sorted(c for c, _ in cells))))
    return out


def _misdecided(entries: list[Decision], scoped: list[Entry], cases: Sequence[DeviceCase], w: Want) -> bool:
    """Whether the entry deciding these cases (alike in scope) gives another mode than they want, or another
    reason for a failure."""
    at = deciding(scoped, cases[0])
    decided = entries[at] if at is not None else None
    return decided is None or decided.mode != w.mode or (w.mode != "mandatory_success" and decided.reason != w.reason)


def _parametrized(
    node_id: str, entries: list[Decision], cases: Sequence[DeviceCase], device: str, source: str
) -> list[Decision]:
    """Entries for the `@parametrize` cells (one OpInfo or ModuleInfo, dtypes and argument values) that the entries
    before them would decide otherwise than the cells' cases want, each scoped to its cell: a cell matches the
    fewest cases, so these come last. Only where the entries by op and dtype mix ends does this add any."""
    scoped = [Entry.of(d) for d in entries]
    cells: dict[tuple, list[DeviceCase]] = defaultdict(list)
    for case in cases:
        if case.params:
            cells[(case.op or "", case.module or "", case.dtypes, case.params)].append(case)
    out = []
    for (op, module, dtypes, params), cell in sorted(cells.items()):
        w = want(cell, device, source)
        if _misdecided(entries, scoped, cell, w):
            single, combos = (dtypes[0], ()) if len(dtypes) == 1 else (None, (dtypes,) if dtypes else ())
            ops, modules = ((op,) if op else ()), ((module,) if module else ())
            out.append(Decision(node_id, w.mode, w.reason, w.basis, single, ops, modules, combos, params))
    return out


def rebucket(
    decisions: list[Decision], cases: Sequence[DeviceCase], device: str, source: str = "device run"
) -> list[Decision]:
    """One test's predicted entries with the cases' ends applied (unchanged when none ran); `source` names where
    the ends come from in each entry's basis: a device run, or device-side evidence."""
    if not cases:
        return decisions
    entries = [Entry.of(d) for d in decisions]
    owned: dict[int, list[DeviceCase]] = defaultdict(list)
    for case in cases:
        at = deciding(entries, case)
        if at is not None:
            owned[at].append(case)
    out: list[Decision] = []
    for i, decision in enumerate(decisions):
        out.extend(split(decision, owned[i], device, source) if owned.get(i) else [decision])
    return out
