"""The shard planner against pytest-split and round robin, on PyTorch's real class durations, in one run.

Units are (file, class) pairs, the finest level of `test-class-times.json`; one job/config key is planned (by default
the one with the most seconds, named in the output). pytest-split's `least_duration` and `duration_based_chunks` are
called from `pytest_split.algorithms` on the same units in collection order (sorted node ids); round robin deals
them out in that order.

- counts: makespan / lower bound, the bound being max(total / N, longest unit);
- cap: the fewest shards where every shard's set-up plus tests fits the cap, or holds a single unit longer than
  it (nothing can split it); machine time / (total + set-up x the fewest shards that could meet the cap);
- noise: plan on the recorded durations, run on each unit's duration times a seeded uniform factor in [0.7, 1.3]
  (20 samples); the growth is the run's makespan / the planned makespan, averaged;
- scale: the planner's wall time for 50,000 synthetic tests drawn (seeded) from the real class durations.

    python benchmarks/shard_planner.py [--durations FILE] [--job J --config C] [--cap 1800] [--setup 90] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_split.algorithms import Algorithms
from testreuse.shards.durations import DurationsError, Table, TestPath, load_store
from testreuse.shards.planner import plan_cap, plan_count
from testreuse.shards.units import build_tree, timed_paths

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "pytorch-test-times" / "test-class-times.json"
COUNTS = (4, 8, 16, 32, 64, 128)
PRECISION = 0.001
"""Seconds: durations are stored to the millisecond, so smaller makespan differences mean nothing."""
SAMPLES = 20
Assign = Callable[[Table, int], list[list[TestPath]]]
"""An algorithm: units and a shard count -> each shard's units."""


class Item(NamedTuple):
    """What pytest-split reads from a pytest item: its node id."""

    nodeid: str


def _nodeid(path: TestPath) -> str:
    return "::".join(path)


def ours(table: Table, shards: int) -> list[list[TestPath]]:
    """The planner in count mode; its units (whole files, classes) expanded to the table's units under them."""
    plan = plan_count(build_tree(timed_paths(table, None)), shards)
    return [_expand(table, [u.path for u in s.units]) for s in plan.shards]


def _expand(table: Table, units: Sequence[TestPath]) -> list[TestPath]:
    by_file: dict[str, list[TestPath]] = {}
    for path in table:
        by_file.setdefault(path[0], []).append(path)
    return [p for u in units for p in by_file[u[0]] if p[: len(u)] == u]


def _pytest_split(algorithm: Algorithms) -> Assign:
    def assign(table: Table, shards: int) -> list[list[TestPath]]:
        by_id = {_nodeid(p): p for p in sorted(table)}
        durations = {nodeid: table[path] for nodeid, path in by_id.items()}
        groups = algorithm.value(shards, [Item(n) for n in by_id], durations)
        return [[by_id[item.nodeid] for item in g.selected] for g in groups]

    return assign


def round_robin(table: Table, shards: int) -> list[list[TestPath]]:
    """Units dealt out in collection order: what a plain split with no durations does."""
    out: list[list[TestPath]] = [[] for _ in range(shards)]
    for index, path in enumerate(sorted(table)):
        out[index % shards].append(path)
    return out


ALGORITHMS: dict[str, Assign] = {
    "planner": ours,
    "least_duration": _pytest_split(Algorithms.least_duration),
    "duration_based_chunks": _pytest_split(Algorithms.duration_based_chunks),
    "round_robin": round_robin,
}


def _makespan(shards: Sequence[Sequence[TestPath]], seconds: Table) -> float:
    return max(sum(seconds[p] for p in s) for s in shards)


def _bound(table: Table, shards: int) -> float:
    return max(sum(table.values()) / shards, max(table.values()))


def _pick(store: dict[str, dict[str, Table]], job: str | None, config: str | None) -> tuple[str, str]:
    keys = [(j, c) for j in store for c in store[j] if (job in (None, j)) and (config in (None, c))]
    if not keys:
        raise DurationsError(f"no job/config matches {job}.{config}")
    return max(keys, key=lambda k: (sum(store[k[0]][k[1]].values()), k))


def _counts(table: Table) -> None:
    print("\nfixed shard counts: makespan / lower bound (max(total/N, longest unit)); the last column: the planner's")
    print(f"makespan minus the best peer's, 'yes' unless it is above by more than the store's {PRECISION} s precision")
    print(f"{'N':>4} {'bound s':>9} " + " ".join(f"{name:>21}" for name in ALGORITHMS) + "  planner - best peer")
    for shards in COUNTS:
        spans = {name: _makespan(assign(table, shards), table) for name, assign in ALGORITHMS.items()}
        bound = _bound(table, shards)
        gap = spans["planner"] - min(span for name, span in spans.items() if name != "planner")
        row = " ".join(f"{spans[name] / bound:>21.4f}" for name in ALGORITHMS)
        print(f"{shards:>4} {bound:>9.0f} {row}  {gap:+.4f} s {'yes' if gap <= PRECISION else 'NO'}")


def _fits(shards: Sequence[Sequence[TestPath]], table: Table, capacity: float) -> bool:
    return all(len(s) == 1 or sum(table[p] for p in s) <= capacity + 1e-9 for s in shards)


def _cap(table: Table, cap: float, setup: float) -> None:
    capacity = cap - setup
    plan = plan_cap(build_tree(timed_paths(table, None)), cap, setup)
    fewest = plan.fewest_shards or 0
    total = sum(table.values())
    over = sorted((s for s in table.values() if s > capacity), reverse=True)
    print(f"\ncap {cap:.0f} s per shard, set-up {setup:.0f} s per shard: at least {fewest} shards "
          f"({len(over)} units are longer than cap - set-up, longest {over[0] if over else 0:.0f} s, "
          "each gets a shard of its own)")  # fmt: skip
    print(f"{'algorithm':>21} {'shards':>7} {'within the cap':>15} {'others: one unit':>17} {'machine time ratio':>19}")
    needed = {"planner": len(plan.shards)}
    fits = {"planner": _fits([_expand(table, [u.path for u in s.units]) for s in plan.shards], table, capacity)}
    for name, assign in ALGORITHMS.items():
        if name == "planner":
            continue
        for shards in range(max(fewest, 1), 4 * max(fewest, 1) + 1):
            if _fits(assign(table, shards), table, capacity):
                needed[name], fits[name] = shards, True
                break
    shards_of = {"planner": [_expand(table, [u.path for u in s.units]) for s in plan.shards]}
    for name in ALGORITHMS:
        if name not in needed:
            print(f"{name:>21} {'> ' + str(4 * fewest):>7} {'-':>15} {'-':>17} {'-':>19}")
            continue
        placed = shards_of.get(name) or ALGORITHMS[name](table, needed[name])
        within = sum(sum(table[p] for p in s) <= capacity + 1e-9 for s in placed)
        ratio = (total + setup * needed[name]) / (total + setup * fewest)
        lone = "yes" if fits[name] else "no"
        print(f"{name:>21} {needed[name]:>7} {f'{within}/{len(placed)}':>15} {lone:>17} {ratio:>19.4f}")


def _noise(table: Table, seed: int) -> None:
    rng = random.Random(seed)
    runs = [{p: d * rng.uniform(0.7, 1.3) for p, d in sorted(table.items())} for _ in range(SAMPLES)]
    print(f"\nnoise: planned on the recorded durations, run on durations x U(0.7, 1.3) per unit, mean of {SAMPLES} "
          f"samples (seed {seed}): run makespan / planned makespan (run makespan / run lower bound)")  # fmt: skip
    print(f"{'N':>4} " + " ".join(f"{name:>21}" for name in ALGORITHMS))
    for shards in COUNTS:
        cells = []
        for assign in ALGORITHMS.values():
            placed = assign(table, shards)
            planned = _makespan(placed, table)
            growth = sum(_makespan(placed, run) for run in runs) / SAMPLES / planned
            ratio = sum(_makespan(placed, run) / _bound(run, shards) for run in runs) / SAMPLES
            cells.append(f"{growth:.3f} ({ratio:.3f})")
        print(f"{shards:>4} " + " ".join(f"{c:>21}" for c in cells))


def _synthetic(table: Table, tests: int, seed: int) -> Table:
    """`tests` test durations bootstrapped from the real units, scaled to the same total, in ~10 per class."""
    rng = random.Random(seed)
    real = sorted(table.values())
    scale = len(real) / tests
    return {
        (f"test/t{rng.randrange(tests // 100)}.py", f"C{rng.randrange(10)}", f"test_{i}"): rng.choice(real) * scale
        for i in range(tests)
    }


def _scale(table: Table, cap: float, setup: float, seed: int, tests: int = 50_000) -> None:
    synthetic = _synthetic(table, tests, seed)
    print(f"\nscale: {tests} synthetic tests (seed {seed}); the planner's wall time includes building the tree")
    for label, run in [
        ("count mode, N=64", lambda tree: plan_count(tree, 64)),
        (f"cap mode, {cap:.0f} s", lambda tree: plan_cap(tree, cap, setup)),
    ]:
        started = time.perf_counter()
        plan = run(build_tree(timed_paths(synthetic, None)))
        units = sum(len(s.units) for s in plan.shards)
        print(f"  planner {label}: {time.perf_counter() - started:.2f} s, {len(plan.shards)} shards, {units} units, "
              f"makespan / bound {plan.makespan / plan.lower_bound:.4f}")  # fmt: skip
    started = time.perf_counter()
    ALGORITHMS["least_duration"](synthetic, 64)
    print(f"  pytest-split least_duration, N=64: {time.perf_counter() - started:.2f} s")


def main(argv: Sequence[str] | None = None) -> int:
    """Print every table; 2 with one line if the durations cannot be read."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", type=Path, default=DATA, help="a test-class-times.json")
    parser.add_argument("--job", help="top-level key (default: the key/config with the most seconds)")
    parser.add_argument("--config", help="test config (default: as --job)")
    parser.add_argument("--cap", type=float, default=1800.0, help="seconds per shard (default: 1800)")
    parser.add_argument("--setup", type=float, default=90.0, help="set-up seconds per shard (default: 90)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.durations == DATA and not DATA.is_file():
        print(f"shard planner benchmark skipped: no PyTorch durations at {DATA}")
        return 0
    try:
        store = load_store(args.durations)
        job, config = _pick(store, args.job, args.config)
    except DurationsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = store[job][config]
    if any(len(path) != 2 for path in table):
        print(f"error: {args.durations}: {job}.{config}: expected file/class durations", file=sys.stderr)
        return 2
    print(f"{args.durations.name}: job {job!r}, config {config!r}: {len(table)} (file, class) units, "
          f"{sum(table.values()):.0f} s, longest {max(table.values()):.0f} s")  # fmt: skip
    _counts(table)
    _cap(table, args.cap, args.setup)
    _noise(table, args.seed)
    _scale(table, args.cap, args.setup, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
