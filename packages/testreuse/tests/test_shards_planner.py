"""The planner: every test placed once, caps respected, over-long files split, balanced and deterministic."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testreuse.shards.balance import balance, improve, lpt, makespan
from testreuse.shards.documents import PlanError, matrix_document, plan_document, shard_selection
from testreuse.shards.planner import Plan, plan_cap, plan_count
from testreuse.shards.units import Node, build_tree


def _tree(seconds: dict[str, float], groups: list[tuple[str, str]] | None = None) -> dict[str, list[Node]]:
    leaves = {}
    for nodeid, s in seconds.items():
        file, cls, test = nodeid.split("::")
        leaves[(file, cls, test)] = (s, False)
    return build_tree(leaves, groups or [])


def _placed_once(plan: Plan, nodeids: Iterable[str]) -> bool:
    """Every test is under exactly one unit of exactly one shard."""
    units = [u.nodeid for s in plan.shards for u in s.units]
    return all(sum(n == u or n.startswith(u + "::") for u in units) == 1 for n in nodeids)


SIZES = st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=40)


@given(SIZES, st.integers(1, 9))
@settings(max_examples=200)
def test_improvement_never_raises_the_makespan_and_keeps_every_item(sizes: list[float], bins: int) -> None:
    start = lpt(sizes, bins)
    better = improve(sizes, start, bins)
    assert len(better) == len(sizes)
    assert all(0 <= b < bins for b in better)
    assert makespan(sizes, better, bins) <= makespan(sizes, start, bins) + 1e-6


def test_improvement_fixes_what_lpt_gets_wrong() -> None:
    sizes = [3, 3, 2, 2, 2]  # LPT: {3, 2, 2} / {3, 2} = 7; optimum {3, 3} / {2, 2, 2} = 6
    assert makespan(sizes, lpt(sizes, 2), 2) == 7
    assert makespan(sizes, balance(sizes, 2), 2) == 6


def test_every_test_is_placed_once_in_exactly_n_shards() -> None:
    seconds = {
        f"t{i}.py::C{j}::x{k}": float(1 + (i * 7 + j * 3 + k) % 11)
        for i in range(5)
        for j in range(3)
        for k in range(4)
    }
    plan = plan_count(_tree(seconds), 7)
    assert len(plan.shards) == 7
    assert _placed_once(plan, seconds)


def test_small_files_stay_whole_and_an_over_long_file_splits_by_class() -> None:
    seconds = {"big.py::A::a": 40.0, "big.py::B::b": 40.0, "s1.py::S::x": 20.0, "s2.py::S::x": 20.0}
    plan = plan_count(_tree(seconds), 3)
    ids = sorted(u.nodeid for s in plan.shards for u in s.units)
    assert ids == ["big.py::A", "big.py::B", "s1.py", "s2.py"]
    assert plan.makespan == 40.0 == plan.lower_bound


def test_balance_reaches_the_bound_on_many_units() -> None:
    seconds = {f"t{i}.py::C::x{k}": float(1 + (i * 31 + k * 17) % 97) for i in range(40) for k in range(10)}
    for shards in (4, 8, 16, 32):
        plan = plan_count(_tree(seconds), shards)
        assert plan.makespan / plan.lower_bound <= 1.03, shards


def test_plans_are_deterministic() -> None:
    seconds = {f"t{i % 7}.py::C{i % 3}::x{i}": float(i % 5 + 1) for i in range(60)}
    docs = [
        plan_document(plan_count(_tree(dict(reversed(seconds.items()) if n else seconds.items())), 5)) for n in (0, 1)
    ]
    assert docs[0] == docs[1]


def test_feature_groups_never_share_a_shard() -> None:
    seconds = {f"cpu/t{i}.py::C::x": 10.0 for i in range(6)} | {f"gpu/t{i}.py::C::x": 30.0 for i in range(3)}
    plan = plan_count(_tree(seconds, [("gpu", "gpu/*")]), 4)
    for shard in plan.shards:
        assert {u.nodeid.split("/")[0] for u in shard.units} == {shard.group if shard.group == "gpu" else "cpu"}
    assert sorted(s.group for s in plan.shards).count("gpu") == 2
    with pytest.raises(ValueError, match="cannot hold 2 feature groups"):
        plan_count(_tree(seconds, [("gpu", "gpu/*")]), 1)


def test_the_cap_is_met_with_the_fewest_shards() -> None:
    seconds = {f"t{i}.py::C{j}::x": float(5 + (i * 13 + j * 7) % 40) for i in range(12) for j in range(5)}
    plan = plan_cap(_tree(seconds), cap=200, setup=20)
    assert all(s.seconds + 20 <= 200 for s in plan.shards)
    assert len(plan.shards) == plan.fewest_shards
    assert _placed_once(plan, seconds)


def test_a_unit_longer_than_the_cap_gets_its_own_flagged_shard() -> None:
    plan = plan_cap(_tree({"huge.py::H::x": 500.0, "a.py::A::x": 50.0, "b.py::B::x": 50.0}), cap=200, setup=20)
    doc = plan_document(plan)
    flagged = [s for s in doc["shards"] if s["over_cap"]]
    assert [[u["id"] for u in s["units"]] for s in flagged] == [["huge.py"]]
    assert len(doc["shards"]) == 2 == plan.fewest_shards


def test_a_cap_below_the_setup_is_refused() -> None:
    with pytest.raises(ValueError, match="must exceed the per-shard set-up"):
        plan_cap(_tree({"a.py::A::x": 1.0}), cap=60, setup=90)


def test_plan_and_matrix_documents() -> None:
    leaves = {("a.py", "A", "x"): (5.0, True), ("b.py", "B", "y"): (3.0, False), ("b.py", "", "m"): (1.0, False)}
    doc = plan_document(plan_count(build_tree(leaves), 2, setup=10))
    assert [s["test_seconds"] for s in doc["shards"]] == [5.0, 4.0]
    assert [s["predicted_seconds"] for s in doc["shards"]] == [15.0, 14.0]
    assert doc["shards"][0]["units"] == [{"id": "a.py", "seconds": 5.0, "estimated": True}]
    assert doc["shards"][0]["estimated_tests"] == 1
    assert matrix_document(doc) == {
        "include": [
            {"shard": 1, "shards": 2, "group": "default", "predicted_seconds": 15.0},
            {"shard": 2, "shards": 2, "group": "default", "predicted_seconds": 14.0},
        ]
    }
    assert shard_selection(doc, 2) == ["b.py"]


def test_selection_lists_finer_node_ids_for_a_split_file() -> None:
    leaves = {("f.py", "A", "a"): (10.0, False), ("f.py", "B", "b"): (10.0, False), ("f.py", "", "m"): (10.0, False)}
    doc = plan_document(plan_count(build_tree(leaves), 3))
    assert sorted(i for n in (1, 2, 3) for i in shard_selection(doc, n)) == ["f.py::A", "f.py::B", "f.py::m"]


@pytest.mark.parametrize(
    ("doc", "shard", "message"),
    [
        ({}, 1, "plan: shards: expected a list"),
        ({"shards": [{"shard": 2, "units": []}]}, 1, r"plan: shards\[0\]\.shard: expected 1"),
        ({"shards": [{"shard": 1, "units": []}]}, 2, r"plan: shard: 2 is not in 1\.\.1"),
        ({"shards": [{"shard": 1, "units": [{"id": 3}]}]}, 1, r"plan: shards\[0\]\.units"),
    ],
)
def test_bad_plans_are_one_line_errors(doc: dict, shard: int, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        shard_selection(doc, shard)


def test_files_split_only_when_that_saves_more_than_the_slack() -> None:
    seconds = {"f1.py::A::x": 6.0, "f1.py::B::x": 4.0, "f2.py::C::x": 6.0, "f2.py::D::x": 4.0}
    seconds |= {"f3.py::E::x": 5.0, "f3.py::F::x": 5.0}
    split = plan_count(_tree(seconds), 2)
    assert split.makespan == 15.0
    assert any("::" in u.nodeid for s in split.shards for u in s.units)
    whole = plan_count(_tree(seconds), 2, slack=10.0)
    assert whole.makespan == 20.0
    assert sorted(u.nodeid for s in whole.shards for u in s.units) == ["f1.py", "f2.py", "f3.py"]
