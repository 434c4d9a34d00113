"""The shard planner: feature groups first, then a duration cap or a shard count, then balanced placement.

Files stay whole while the balance allows it (one import per file, few node ids on the command line); a node is
split into its classes, then tests, only when it is longer than a shard should be, or when placing the finest units
would shorten the makespan by more than `slack` seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from testreuse.shards.balance import EPS, balance
from testreuse.shards.units import Node, finest, split_over

SLACK = 1.0
"""Seconds of makespan worth paying for whole files over the finest placement: below CI timing noise."""


@dataclass(frozen=True)
class Shard:
    """One shard: its feature group and units; `seconds` is the predicted test time, without set-up."""

    group: str
    units: tuple[Node, ...]

    @property
    def seconds(self) -> float:
        """Predicted test time of the shard."""
        return sum(u.seconds for u in self.units)


@dataclass(frozen=True)
class Plan:
    """Shards in run order, with what they were planned against."""

    shards: tuple[Shard, ...]
    setup_seconds: float
    cap_seconds: float | None
    lower_bound: float
    """No makespan can be lower: max(total / shards, longest finest unit)."""
    fewest_shards: int | None = None
    """Cap mode: no plan meets the cap with fewer shards (a unit over the cap counts as a shard of its own)."""

    @property
    def makespan(self) -> float:
        """The longest shard's predicted test time."""
        return max((s.seconds for s in self.shards), default=0.0)


def _shard(group: str, units: Sequence[Node]) -> Shard:
    return Shard(group, tuple(sorted(units, key=lambda u: u.path)))


def _bound(tree: Mapping[str, Sequence[Node]], shards: int) -> float:
    fine = [u.seconds for files in tree.values() for u in finest(files)]
    return max(sum(fine) / max(shards, 1), max(fine, default=0.0))


def _place(units: Sequence[Node], bins: int) -> list[list[Node]]:
    where = balance([u.seconds for u in units], bins)
    placed: list[list[Node]] = [[] for _ in range(bins)]
    for unit, b in zip(units, where, strict=True):
        placed[b].append(unit)
    return placed


def _load(bins: Sequence[Sequence[Node]]) -> float:
    return max((sum(u.seconds for u in b) for b in bins), default=0.0)


def _count_group(files: Sequence[Node], bins: int, slack: float) -> list[list[Node]]:
    """`bins` balanced shards of one group, from the coarsest units within `slack` of the finest placement."""
    fine = finest(files)
    reference = _place(fine, bins)
    threshold = sum(u.seconds for u in fine) / bins
    while True:
        units = split_over(files, threshold)
        if len(units) == len(fine):
            return reference
        placed = _place(units, bins)
        if _load(placed) <= _load(reference) + slack:
            return placed
        threshold /= 2


def _allocate(totals: Mapping[str, float], bins: int) -> dict[str, int]:
    """Shards per group, one each and then by largest remaining seconds per shard (D'Hondt)."""
    if bins < len(totals):
        raise ValueError(f"{bins} shards cannot hold {len(totals)} feature groups: {', '.join(sorted(totals))}")
    counts = dict.fromkeys(totals, 1)
    for _ in range(bins - len(totals)):
        group = max(sorted(totals), key=lambda g: totals[g] / counts[g])
        counts[group] += 1
    return counts


def plan_count(tree: Mapping[str, Sequence[Node]], shards: int, setup: float = 0.0, slack: float = SLACK) -> Plan:
    """Exactly `shards` shards: the coarsest units whose makespan is within `slack` of the finest placement's."""
    if shards < 1:
        raise ValueError(f"the shard count must be >= 1, got {shards}")
    counts = _allocate({g: sum(f.seconds for f in files) for g, files in tree.items()}, shards)
    out = [_shard(g, b) for g in sorted(tree) for b in _count_group(tree[g], counts[g], slack)]
    return Plan(tuple(out), setup, None, _bound(tree, shards))


def _fewest_bins(units: Sequence[Node], capacity: float) -> list[list[Node]]:
    """The fewest balanced bins of at most `capacity` seconds each (every unit fits)."""
    if not units:
        return []
    sizes = [u.seconds for u in units]
    bins = max(1, math.ceil(sum(sizes) / capacity - EPS))
    while True:
        placed = _place(units, bins)
        if _load(placed) <= capacity + EPS:
            return placed
        bins += 1


def _cap_group(files: Sequence[Node], capacity: float) -> tuple[list[list[Node]], int]:
    """Shards of one group within `capacity`; a finest unit longer than it gets a shard of its own."""
    fine = finest(files)
    over = [u for u in fine if u.seconds > capacity + EPS]
    rest = sum(u.seconds for u in fine) - sum(u.seconds for u in over)
    fewest = len(over) + math.ceil(rest / capacity - EPS)
    alone = [[u] for u in over]
    threshold = capacity
    best: list[list[Node]] | None = None
    while True:
        units = split_over(files, threshold)
        bins = alone + _fewest_bins([u for u in units if u.seconds <= capacity + EPS], capacity)
        if best is None or len(bins) < len(best):
            best = bins
        if len(best) <= fewest or len(units) == len(fine):
            return best, fewest
        threshold /= 2


def plan_cap(tree: Mapping[str, Sequence[Node]], cap: float, setup: float = 0.0) -> Plan:
    """The fewest shards whose set-up plus tests fit in `cap` seconds; `lower_bound` is the fewest possible."""
    capacity = cap - setup
    if capacity <= 0:
        raise ValueError(f"the cap ({cap} s) must exceed the per-shard set-up ({setup} s)")
    out: list[Shard] = []
    fewest = 0
    for group in sorted(tree):
        bins, least = _cap_group(tree[group], capacity)
        out += [_shard(group, b) for b in bins]
        fewest += least
    return Plan(tuple(out), setup, cap, _bound(tree, len(out)), fewest)
