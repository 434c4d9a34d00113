"""Plan units: the file/class/test tree of what a run will execute, with durations known or estimated.

The planner places whole files when it can (fewer node ids, one import per file) and splits a node into its
children only when it is too long; the tree is what makes that split possible.
"""

from __future__ import annotations

import fnmatch
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from testreuse.shards.durations import Table, TestPath, split_nodeid

DEFAULT_SECONDS = 1.0
"""The estimate for a test when nothing at all is known."""


@dataclass(frozen=True)
class Node:
    """A file, class or test; `seconds` is its own leaf value or its children's sum."""

    path: TestPath
    seconds: float
    estimated: int
    """How many of the tests under it have an estimated duration."""
    children: tuple[Node, ...] = ()

    @property
    def nodeid(self) -> str:
        """The pytest node id selecting exactly this node (module-level tests skip the empty class)."""
        return "::".join(part for part in self.path if part)


def estimator(table: Table, default: float = DEFAULT_SECONDS) -> Callable[[TestPath], float]:
    """An unknown test's seconds: the median of known tests in its class, else in its file, else anywhere, else
    `default`; siblings predict a new test better than a global mean does."""
    by_prefix: dict[TestPath, list[float]] = {}
    everywhere = [s for p, s in table.items() if len(p) == 3]
    for path, seconds in table.items():
        if len(path) == 3:
            by_prefix.setdefault(path[:2], []).append(seconds)
            by_prefix.setdefault(path[:1], []).append(seconds)
    medians = {prefix: statistics.median(values) for prefix, values in by_prefix.items()}
    fallback = statistics.median(everywhere) if everywhere else default

    def estimate(path: TestPath) -> float:
        return medians.get(path[:2], medians.get(path[:1], fallback))

    return estimate


def timed_paths(
    table: Table, nodeids: Iterable[str] | None, default: float = DEFAULT_SECONDS
) -> dict[TestPath, tuple[float, bool]]:
    """What runs, as leaves with (seconds, estimated): the table's leaves, or the given collected node ids.

    A collected test under a coarser leaf (a class total from PyTorch's data) folds into that leaf.
    """
    if nodeids is None:
        return {path: (seconds, False) for path, seconds in table.items()}
    estimate = estimator(table, default)
    out: dict[TestPath, tuple[float, bool]] = {}
    for nodeid in nodeids:
        path = split_nodeid(nodeid)
        leaf = next((path[:d] for d in (3, 2, 1) if path[:d] in table), None)
        if leaf is not None:
            out[leaf] = (table[leaf], False)
        else:
            out[path] = (estimate(path), True)
    return out


def group_of(path: TestPath, groups: Sequence[tuple[str, str]]) -> str:
    """The first group whose fnmatch pattern matches the node id (or its file), else "default"."""
    nodeid = "::".join(part for part in path if part)
    for name, pattern in groups:
        if fnmatch.fnmatchcase(nodeid, pattern) or fnmatch.fnmatchcase(path[0], pattern):
            return name
    return "default"


def _build(prefix: TestPath, items: list[tuple[TestPath, float, bool]]) -> Node:
    if len(items) == 1 and items[0][0] == prefix:
        _, seconds, estimated = items[0]
        return Node(prefix, seconds, int(estimated))
    depth = len(prefix)
    parts: dict[TestPath, list[tuple[TestPath, float, bool]]] = {}
    for item in items:
        key = item[0][: depth + 1]
        if key[-1] == "" and len(key) == 2:
            key = item[0]  # module-level tests: children of the file, no class node
        parts.setdefault(key, []).append(item)
    children = tuple(_build(key, parts[key]) for key in sorted(parts))
    if len(children) == 1:  # the same tests: keep the shorter node id, skip a level that cannot split anything
        return Node(prefix, children[0].seconds, children[0].estimated, children[0].children)
    return Node(prefix, sum(c.seconds for c in children), sum(c.estimated for c in children), children)


def build_tree(
    leaves: dict[TestPath, tuple[float, bool]], groups: Sequence[tuple[str, str]] = ()
) -> dict[str, list[Node]]:
    """Group -> its file nodes, sorted; a file whose tests fall in several groups appears once in each."""
    by_group: dict[str, dict[str, list[tuple[TestPath, float, bool]]]] = {}
    for path in sorted(leaves):
        seconds, estimated = leaves[path]
        by_group.setdefault(group_of(path, groups), {}).setdefault(path[0], []).append((path, seconds, estimated))
    return {
        group: [_build((file,), items) for file, items in sorted(files.items())]
        for group, files in sorted(by_group.items())
    }


def split_over(nodes: Iterable[Node], threshold: float) -> list[Node]:
    """Replace every node longer than `threshold` by its children, recursively, down to leaves."""
    out: list[Node] = []
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        if node.seconds > threshold and node.children:
            stack.extend(reversed(node.children))
        else:
            out.append(node)
    return out


def finest(nodes: Iterable[Node]) -> list[Node]:
    """Every leaf: the finest units there are."""
    return split_over(nodes, -1.0)
