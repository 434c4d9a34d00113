"""The durations store: PyTorch's shapes load, records fill a run, shards and runs merge by the documented rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testreuse.shards.durations import (
    DurationsError,
    dump_store,
    load_store,
    merge_runs,
    merge_shards,
    parse_store,
    read_results,
    split_nodeid,
    table_from_records,
)
from testreuse.shards.units import build_tree, estimator, finest, split_over, timed_paths

REAL = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "pytorch-test-times"


def test_pytorch_file_and_class_shapes_load() -> None:
    store = parse_store({"job": {"default": {"test_a": 3, "test_b": {"TestB": 2.5}}}}, "t.json")
    assert store == {"job": {"default": {("test_a",): 3.0, ("test_b", "TestB"): 2.5}}}


@pytest.mark.skipif(not REAL.is_dir(), reason="the shared PyTorch durations are not on this machine")
def test_real_pytorch_files_load() -> None:
    classes = load_store(REAL / "test-class-times.json")
    assert all(len(path) == 2 for path in classes["default"]["default"])
    files = load_store(REAL / "test-times.json")
    assert all(len(path) == 1 for configs in files.values() for t in configs.values() for path in t)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "top level"),
        ({"j": []}, "j:"),
        ({"j": {"c": 3}}, "j.c:"),
        ({"j": {"c": {"f": {"C": {"t": "slow"}}}}}, "j.c.f.C.t:"),
        ({"j": {"c": {"f": {"C": {"t": -1}}}}}, "j.c.f.C.t:"),
        ({"j": {"c": {"f": {"C": {"t": True}}}}}, "j.c.f.C.t:"),
        ({"j": {"c": {"f": {"C": {"t": {"deeper": 1}}}}}}, "j.c.f.C.t:"),
    ],
)
def test_malformed_store_names_the_file_and_field(document: object, field: str) -> None:
    with pytest.raises(DurationsError, match=rf"^bad\.json: {field}") as info:
        parse_store(document, "bad.json")
    assert "\n" not in str(info.value)


def test_not_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"j":\n  {oops}')
    with pytest.raises(DurationsError, match=r"d\.json:2:\d+: not JSON"):
        load_store(path)


def test_dump_is_sorted_and_round_trips() -> None:
    store = parse_store({"z": {"c": {"f": {"C": {"b": 1.23456, "a": 2}}}}, "a": {"c": {"g": 1}}}, "s")
    text = dump_store(store)
    assert text.index('"a"') < text.index('"z"')
    assert dump_store(parse_store(json.loads(text), "s")) == text
    assert parse_store(json.loads(text), "s")["z"]["c"][("f", "C", "b")] == 1.235


def test_node_ids_split_into_file_class_test() -> None:
    assert split_nodeid("test/t.py::TestA::test_x[1]") == ("test/t.py", "TestA", "test_x[1]")
    assert split_nodeid("test/t.py::test_fn") == ("test/t.py", "", "test_fn")
    assert split_nodeid("t.py::Outer::Inner::test") == ("t.py", "Outer::Inner", "test")
    with pytest.raises(ValueError, match="not a test node id"):
        split_nodeid("t.py")


def test_records_fill_a_run_keeping_the_longest_retry_and_skipping_deselected() -> None:
    records = [
        {"nodeid": "t.py::A::x", "duration": 1.0, "outcome": "failed"},
        {"nodeid": "t.py::A::x", "duration": 3.0, "outcome": "passed"},
        {"file": "t.py", "class": "A", "test": "y", "duration": 0.5, "outcome": "skipped"},
        {"nodeid": "t.py::A::z", "duration": 9.0, "outcome": "deselected"},
    ]
    assert table_from_records(records, "r") == {("t.py", "A", "x"): 3.0, ("t.py", "A", "y"): 0.5}


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"nodeid": "t.py::A::x", "outcome": "passed"}, "duration"),
        ({"nodeid": "t.py::A::x", "duration": "1", "outcome": "passed"}, "duration"),
        ({"nodeid": "t.py::A::x", "duration": -2, "outcome": "passed"}, "duration"),
        ({"nodeid": "t.py", "duration": 1, "outcome": "passed"}, "nodeid"),
        ({"duration": 1, "outcome": "passed"}, "nodeid"),
        ({"nodeid": "t.py::A::x", "duration": 1}, "outcome"),
    ],
)
def test_bad_records_name_the_record_and_field(record: dict[str, object], field: str) -> None:
    with pytest.raises(DurationsError, match=rf"^r\.jsonl:2: {field}:"):
        table_from_records([{"nodeid": "t.py::A::ok", "duration": 1, "outcome": "passed"}, record], "r.jsonl")


def test_results_file_reads_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"nodeid": "t.py::A::x", "duration": 2, "outcome": "passed"}\n\n{broken\n')
    with pytest.raises(DurationsError, match=r"results\.jsonl:3: not a JSON record"):
        read_results(path)


def test_shards_merge_as_a_union() -> None:
    one, two = {("f", "A", "x"): 1.0}, {("f", "A", "y"): 2.0, ("f", "A", "x"): 4.0}
    assert merge_shards([one, two]) == {("f", "A", "x"): 4.0, ("f", "A", "y"): 2.0}


def test_runs_merge_by_moving_average_and_keep_untimed_tests() -> None:
    old = {("f", "A", "x"): 10.0, ("g", "B", "y"): 5.0}
    merged = merge_runs(old, {("f", "A", "x"): 20.0, ("f", "A", "new"): 1.0}, alpha=0.25)
    assert merged == {("f", "A", "x"): 12.5, ("g", "B", "y"): 5.0, ("f", "A", "new"): 1.0}


def test_the_newer_granularity_wins() -> None:
    seeded = {("f", "A"): 100.0, ("f", "B"): 7.0}
    merged = merge_runs(seeded, {("f", "A", "x"): 3.0})
    assert merged == {("f", "A", "x"): 3.0, ("f", "B"): 7.0}
    assert merge_runs(merged, {("f",): 9.0}) == {("f",): 9.0}


def test_alpha_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        merge_runs({}, {}, alpha=0)


TABLES = st.dictionaries(
    st.tuples(st.sampled_from(["f", "g"]), st.sampled_from(["A", "B"]), st.sampled_from(["x", "y", "z"])),
    st.floats(0, 1e4),
    max_size=8,
)


@given(TABLES, TABLES)
def test_shard_merge_is_order_independent(a: dict, b: dict) -> None:
    assert merge_shards([a, b]) == merge_shards([b, a])


@given(TABLES, TABLES)
def test_run_merge_keeps_every_test_and_stays_between_old_and_new(old: dict, new: dict) -> None:
    merged = merge_runs(old, new)
    assert set(merged) == set(old) | set(new)
    for path in set(old) & set(new):
        assert min(old[path], new[path]) - 1e-9 <= merged[path] <= max(old[path], new[path]) + 1e-9


def test_unknown_tests_are_estimated_from_their_class_then_file_then_everything() -> None:
    table = {("f", "A", "a1"): 1.0, ("f", "A", "a2"): 3.0, ("f", "B", "b1"): 10.0, ("g", "C", "c"): 7.0}
    estimate = estimator(table)
    assert estimate(("f", "A", "new")) == 2.0
    assert estimate(("f", "Z", "new")) == 3.0
    assert estimate(("h", "Z", "new")) == 5.0
    assert estimator({("f", "A"): 50.0}, default=4.0)(("f", "A", "t")) == 4.0


def test_collected_tests_fold_into_coarse_leaves_and_unknowns_are_flagged() -> None:
    table = {("f", "A"): 50.0, ("f", "B", "b1"): 2.0}
    leaves = timed_paths(table, ["f::A::t1", "f::A::t2", "f::B::b1", "f::B::b2", "f::mod_test"])
    assert leaves == {
        ("f", "A"): (50.0, False),
        ("f", "B", "b1"): (2.0, False),
        ("f", "B", "b2"): (2.0, True),
        ("f", "", "mod_test"): (2.0, True),
    }


def test_the_tree_sums_and_splits_by_class_then_test() -> None:
    leaves = {("f", "A", "a"): (6.0, False), ("f", "A", "b"): (4.0, True), ("f", "", "m"): (1.0, False)}
    (file,) = build_tree(leaves)["default"]
    assert (file.nodeid, file.seconds, file.estimated) == ("f", 11.0, 1)
    assert [n.nodeid for n in split_over([file], 10.5)] == ["f::m", "f::A"]
    assert [n.nodeid for n in split_over([file], 5)] == ["f::m", "f::A::a", "f::A::b"]
    assert [n.nodeid for n in finest([file])] == ["f::m", "f::A::a", "f::A::b"]


def test_feature_groups_take_tests_by_pattern() -> None:
    leaves = {("a/t.py", "A", "x"): (1.0, False), ("b/t.py", "B", "y"): (1.0, False)}
    tree = build_tree(leaves, [("gpu", "b/*")])
    assert {g: [f.nodeid for f in files] for g, files in tree.items()} == {"default": ["a/t.py"], "gpu": ["b/t.py"]}
