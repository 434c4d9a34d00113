"""Step 5, refinement from execution: device outcomes beat prediction. The re-bucketing rules on device facts, results
records and run directories read (bad input as one located `error:` line), `testselect refine` end to end on
records in the documented shape, and on real records of an upstream file run on ring with testreuse's plugin."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testselect.cli import main
from testselect.index.build import index_tree
from testselect.index.store import Store
from testselect.refine import store as device_store
from testselect.refine.rebucket import rebucket
from testselect.refine.records import RecordsError, load_run, read_records, upstream_nodeid
from testselect.select.plan import render
from testselect.select.reasoner import Decision, DeviceCase

REPO = Path(__file__).resolve().parents[3]
EMBEDDED = REPO / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
HAVE_TESTREUSE = importlib.util.find_spec("testreuse") is not None
HAVE_RING = importlib.util.find_spec("ringsim") is not None
needs_testreuse = pytest.mark.skipif(
    not HAVE_TESTREUSE, reason="testreuse is not installed beside testselect: refine runs `python -m testreuse triage`"
)
T = "t.py::TestT::test_x"
RULES = Decision(T, "mandatory_success", "no unsupported dtype, op, feature or restriction found", "rules")


def case(
    name: str,
    outcome: str = "passed",
    dtypes: tuple[str, ...] = ("float32",),
    op: str | None = None,
    category: str | None = None,
    reason: str = "",
    **evidence: float,
) -> DeviceCase:
    return DeviceCase(f"t.py::TestTTOY::{name}", "toy", "r1", outcome, op, None, dtypes, category, reason, evidence)


LACKS = {"category": "unsupported_op", "reason": "device lacks aten::cumsum"}


# --- the re-bucketing rules ---------------------------------------------------------------------------------------


def test_all_failing_one_cause_demotes_to_xfail_strict_with_the_cause() -> None:
    skip64 = Decision(T, "skip", "dtype float64 is not in toy's supported_dtypes", "capabilities: dtypes", "float64")
    got = rebucket([RULES, skip64], [case("a", "failed", **LACKS), case("b", "failed", **LACKS)], "toy")
    assert got == [
        Decision(T, "xfail_strict", "device lacks aten::cumsum", "device run: unsupported_op"),
        skip64,  # its cases did not run: as predicted
    ]


def test_an_xfail_whose_cases_passed_is_promoted() -> None:
    xfail = Decision(T, "xfail", "toy lacks aten::stack, run on CPU by 1 of 1 float32 cases", "op evidence", "float32")
    got = rebucket([RULES, xfail], [case("a", "xpassed"), case("b", "passed")], "toy")
    assert got == [RULES, Decision(T, "mandatory_success", "passed on toy in run r1", "device run: passed", "float32")]


def test_mandatory_cases_that_passed_leave_the_entry_as_it_is() -> None:
    assert rebucket([RULES], [case("a"), case("b", "xpassed")], "toy") == [RULES]
    assert rebucket([RULES], [], "toy") == [RULES]


def test_ops_and_dtypes_failing_alone_get_narrower_entries() -> None:
    cases = [
        case("add32", op="add"),
        case("add16", dtypes=("float16",), op="add"),
        case("mul32", "failed", op="mul", **LACKS),
        case("mul16", "failed", dtypes=("float16",), op="mul", **LACKS),
        case("div32", "failed", op="div", category="numerics", reason="results not close, 0.1", max_abs=0.1),
        case("div16", dtypes=("float16",), op="div"),
        case("sub32", "failed", op="sub", category="numerics", reason="results not close, 0.9", max_abs=0.9),
        case("sub16", "failed", ("float16",), "sub", category="numerics", reason="results not close, 0.2", max_abs=0.2),
    ]
    got = rebucket([RULES], cases, "toy")
    assert got[0] == RULES  # 3 of 8 passed: the largest group keeps the test mandatory
    assert got[1:] == [
        Decision(T, "xfail_strict", "results not close, 0.9", "device run: numerics", None, ("sub",)),  # the worst
        Decision(T, "xfail_strict", "device lacks aten::cumsum", "device run: unsupported_op", None, ("mul",)),
        Decision(T, "xfail_strict", "results not close, 0.1", "device run: numerics", "float32", ("div",)),
    ]
    text = render("t.py", got, "toy")
    tests = yaml.safe_load(text)["test_suite_config"]["files"][0]["tests"]
    assert [t.get("only") for t in tests] == [
        None,
        {"ops": ["sub"]},
        {"ops": ["mul"]},
        {"ops": ["div"], "dtypes": ["float32"]},
    ]
    assert "        # device run: unsupported_op: device lacks aten::cumsum\n" in text


def test_modules_and_plain_dtypes_are_scoped_too() -> None:
    mod = DeviceCase("t.py::TestTTOY::m", "toy", "r1", "failed", None, "nn.GRU", ("float32",), **LACKS)
    ok = DeviceCase("t.py::TestTTOY::k", "toy", "r1", "passed", None, "nn.Linear", ("float32",))
    got = rebucket([RULES], [mod, ok], "toy")
    assert got[1].modules == ("nn.GRU",)
    assert 'only: {modules: ["nn.GRU"]}' in render("t.py", got, "toy")
    plain = rebucket(
        [RULES], [case("a"), case("b", dtypes=("float16",)), case("c", "failed", ("bfloat16",), **LACKS)], "toy"
    )
    assert plain[1:] == [
        Decision(T, "xfail_strict", "device lacks aten::cumsum", "device run: unsupported_op", "bfloat16")
    ]


def test_cases_no_only_can_tell_apart_make_one_xfail_naming_their_causes() -> None:
    numerics = {"category": "numerics", "reason": "results not close, max abs error 0.5", "max_abs": 0.5}
    got = rebucket([RULES], [case("a"), case("b", "failed", **numerics), case("c", "failed", **LACKS)], "toy")
    assert got == [
        Decision(
            T,
            "xfail",
            "2 of 3 cases fail on toy in run r1: device lacks aten::cumsum; results not close",
            "device run: mixed",
        )
    ]


def test_parametrized_cells_that_end_apart_get_entries_scoped_by_their_arguments() -> None:
    def cell(name: str, sparse: str, outcome: str = "passed", dtype: str = "float32", **why: str) -> DeviceCase:
        made = case(name, outcome, (dtype,), category=why.get("category"), reason=why.get("reason", ""))
        return dataclasses.replace(made, params=(("reduce", "sum"), ("sparse_grad", sparse)))

    cases = [cell("a", "False"), cell("b", "True", "failed", **LACKS), cell("c", "False", dtype="float64")]
    got = rebucket([RULES], cases, "toy")
    mixed = "1 of 2 cases fail on toy in run r1: device lacks aten::cumsum"
    passed = "passed on toy in run r1"
    assert got == [
        Decision(T, "xfail", mixed, "device run: mixed"),  # float32: no dtype entry can part its cells
        Decision(T, "mandatory_success", passed, "device run: passed", "float64"),
        Decision(
            T, "mandatory_success", passed, "device run: passed", "float32",
            params=(("reduce", "sum"), ("sparse_grad", "False")),
        ),
        Decision(
            T, "xfail_strict", LACKS["reason"], "device run: unsupported_op", "float32",
            params=(("reduce", "sum"), ("sparse_grad", "True")),
        ),
    ]  # fmt: skip
    tests = yaml.safe_load(render("t.py", got, "toy"))["test_suite_config"]["files"][0]["tests"]
    assert tests[2]["only"] == {"dtypes": ["float32"], "params": {"reduce": ["sum"], "sparse_grad": ["False"]}}
    assert rebucket(got, cases, "toy") == got  # the entries decide each cell as it ended: nothing left to move


def test_cells_of_a_two_dtype_test_are_scoped_by_their_exact_combination() -> None:
    pairs = [("float32", "int64"), ("int64", "float32"), ("float32", "float32"), ("int64", "int64")]
    cases = [case(f"c{i}", dtypes=pair) for i, pair in enumerate(pairs)]
    cases.append(case("lack1", "failed", ("bool", "int64"), **LACKS))
    cases.append(case("lack2", "failed", ("int64", "bool"), **LACKS))
    cases.append(case("close", "failed", ("bool", "bool"), category="numerics", reason="not close", max_abs=1.0))
    got = rebucket([RULES], cases, "toy")
    lacking = (("bool", "int64"), ("int64", "bool"))
    assert got == [
        RULES,  # the passing cells need no narrower scope
        Decision(T, "xfail_strict", "not close", "device run: numerics", combos=(("bool", "bool"),)),
        Decision(T, "xfail_strict", LACKS["reason"], "device run: unsupported_op", combos=lacking),
    ]
    tests = yaml.safe_load(render("t.py", got, "toy"))["test_suite_config"]["files"][0]["tests"]
    assert [t.get("only") for t in tests] == [
        None,
        {"dtypes": [["bool", "bool"]]},
        {"dtypes": [["bool", "int64"], ["int64", "bool"]]},
    ]


def test_a_cell_a_dtype_entry_would_take_gets_its_own_entry() -> None:
    lacks16 = case("h", "failed", ("float16",), **LACKS)
    cells = [case("a", dtypes=("float16", "int64")), case("b", dtypes=("float32", "int64"))]
    got = rebucket([RULES], [case("x"), lacks16, *cells], "toy")
    assert got[1] == Decision(T, "xfail_strict", LACKS["reason"], "device run: unsupported_op", "float16")
    # only: {dtypes: [float16]} matches the (float16, int64) cell too: the passing cell is put back after it
    assert got[2:] == [
        Decision(
            T, "mandatory_success", "passed on toy in run r1", "device run: passed", combos=(("float16", "int64"),)
        )
    ]


def test_a_crash_or_timeout_is_skipped_and_a_flaky_case_is_xfail() -> None:
    crash = {"category": "crash", "reason": "crash: the test process was killed by SIGSEGV"}
    got = rebucket([RULES], [case("a"), case("b", "crashed", ("float16",), **crash)], "toy")
    assert got[1] == Decision(T, "skip", crash["reason"], "device run: crash", "float16")
    both = rebucket([RULES], [case("a"), case("b", "crashed", **crash)], "toy")
    assert both[0].mode == "skip"  # inseparable from a passing case: only skip keeps the crash out of a run
    flaky = {"category": "flaky", "reason": "flaky on toy in run r1: failed, passed"}
    assert rebucket([RULES], [case("a", **flaky)], "toy")[0].mode == "xfail"


def test_a_run_only_some_dtype_entries_saw_keeps_the_rest() -> None:
    f16 = Decision(T, "xfail", "toy lacks aten::cumsum for float16", "op evidence", "float16")
    f32 = Decision(T, "xfail_strict", "1 of 1 float32 cases failed on the CPU reference run", "op evidence", "float32")
    got = rebucket([RULES, f16, f32], [case("a", "failed", ("float16",), **LACKS)], "toy")
    assert got == [RULES, Decision(T, "xfail_strict", LACKS["reason"], "device run: unsupported_op", "float16"), f32]


# --- results records and run directories --------------------------------------------------------------------------

GOOD = {"nodeid": "test/t.py::TestTTOY::test_x_toy_float32", "generic": "TestT::test_x", "outcome": "passed"}


def test_records_checked_with_located_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [json.dumps(GOOD), "", "{not json"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordsError, match=rf"^{path}:3: not a JSON record \(Expecting property name"):
        read_records(path)
    for bad, message in [
        ({**GOOD, "outcome": "maybe"}, "outcome: expected one of"),
        ({**GOOD, "nodeid": 3}, "nodeid: expected a pytest node id"),
        ({**GOOD, "dtypes": "float32"}, "dtypes: expected a list of dtype names"),
        ({**GOOD, "generic": "test_x"}, "generic: expected Class::test"),
        ({**GOOD, "failure": []}, "failure: expected an object"),
        ({**GOOD, "duration": "1s"}, "duration: expected a number of seconds"),
        ({**GOOD, "timeout": "15 s"}, "timeout: expected a number of seconds"),
        ([GOOD], "a record is a JSON object"),
    ]:
        path.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
        with pytest.raises(RecordsError, match=rf"^{path}:2: {message}"):
            read_records(path)
    path.write_text(json.dumps({**GOOD, "outcome": "timeout", "timeout": "15"}) + "\n", encoding="utf-8")
    assert [r.outcome for r in read_records(path)] == ["timeout"]  # testreuse writes the limit as text
    path.write_text(json.dumps(GOOD) + '\n{"nodeid": "test/t.py::TestT', encoding="utf-8")  # torn by a killed writer
    assert [r.nodeid for r in read_records(path)] == [GOOD["nodeid"]]
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\xff\xfe\n")
    with pytest.raises(RecordsError, match=rf"^{path}:2: not UTF-8 text"):
        read_records(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.dictionaries(
                st.sampled_from(["nodeid", "generic", "outcome", "dtypes", "failure", "op", "mode", "duration"]),
                st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=8), st.lists, max_leaves=4),
            ).map(json.dumps),
        ),
        max_size=6,
    )
)
def test_fuzzed_lines_are_a_located_error_or_records(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        records = read_records(path)
    except RecordsError as exc:
        message = str(exc)
    else:
        message = f"{path}: {len(records)} records"
        assert all(isinstance(r.nodeid, str) and "::" in r.nodeid for r in records)
    assert message.startswith(f"{path}:")


def _run_dir(root: Path, shards: dict[str, list[dict]], retries: list[dict] | None = None) -> Path:
    run = root / "20261201T000000Z-abc123"
    for shard, records in shards.items():
        (run / "primary" / shard).mkdir(parents=True)
        (run / "primary" / shard / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if retries is not None:
        (run / "primary" / "retries" / "attempt-1").mkdir(parents=True)
        (run / "primary" / "retries" / "attempt-1" / "results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in retries)
        )
    (run / "record.json").write_text(json.dumps({"run_id": run.name}))
    return run


def test_run_directory_shards_and_retries(tmp_path: Path) -> None:
    failed = {**GOOD, "nodeid": GOOD["nodeid"] + "_b", "outcome": "failed"}
    run = _run_dir(tmp_path, {"shard-1": [GOOD], "shard-2": [failed]}, retries=[{**failed, "outcome": "passed"}])
    loaded = load_run(run)
    assert loaded.run_id == run.name
    assert [p.parent.name for p in loaded.sources] == ["shard-1", "shard-2", "attempt-1"]
    assert loaded.flaky(failed["nodeid"])
    assert not loaded.flaky(GOOD["nodeid"])
    with pytest.raises(RecordsError, match="no combination 'nightly' \\(the run has: primary\\)"):
        load_run(run, "nightly")
    with pytest.raises(RecordsError, match="no such run directory or results file"):
        load_run(tmp_path / "nope")
    with pytest.raises(RecordsError, match=r"not a crcr run directory \(no record\.json\)"):
        load_run(run / "primary")


def test_node_ids_of_another_rootdir_map_under_torch_root(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_x.py").write_text("")
    nodeid = "packages/testreuse/upstream/test/test_x.py::TestXRING::test_a_ring"
    assert upstream_nodeid(nodeid, tmp_path) == "test/test_x.py::TestXRING::test_a_ring"
    assert upstream_nodeid("test/test_x.py::A::b") == "test/test_x.py::A::b"
    assert upstream_nodeid("elsewhere/test_x.py::A::b") == "elsewhere/test_x.py::A::b"


# --- testselect refine end to end ---------------------------------------------------------------------------------


def _records(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
    return path


def _toy_record(test: str, dtype: str | None, outcome: str, mode: str = "mandatory_success", **more: object) -> dict:
    name = f"test_{test}_toy" + (f"_{dtype}" if dtype else "")
    return {
        "nodeid": f"test/test_toy.py::TestToyPRIVATEUSE1::{name}",
        "file": "test/test_toy.py",
        "generic": f"TestToy::test_{test}",
        "dtypes": [dtype] if dtype else [],
        "op": None,
        "module": None,
        "mode": mode,
        "outcome": outcome,
        "duration": 0.01,
        **more,
    }


PASSING_RUN = [
    _toy_record("lacks", "float32", "xpassed", "xfail_strict", promotion_candidate=True),  # the xfail it was: promoted
    _toy_record("add", "float64", "passed"),  # its dtype ran after all (a run with every case mandatory)
    _toy_record("add", "float32", "passed"),
    _toy_record("cuda_only", None, "deselected", "skip"),  # never ran: no evidence either way
    {**_toy_record("add", "float32", "passed"), "nodeid": "/dev/tree/test_own.py::TestOwn::test_a", "file": "x"},
]


def _refine(toy: dict[str, Path], *extra: str) -> list[str]:
    args = [
        "refine",
        "--profile",
        str(toy["profile"]),
        "--capabilities",
        str(toy["caps"]),
        "--store",
        str(toy["store"]),
    ]
    return [*args, "--configs", str(toy["out"]), *extra]


def _selected(toy: dict[str, Path]) -> None:
    select = ["select", "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"])]
    assert main([*select, "--store", str(toy["store"]), "--out", str(toy["out"])]) == 0
    (toy["out"] / "00-toy-device.yaml").write_text("test_suite_config:\n  files: []\n", encoding="utf-8")


def test_refine_promotes_passing_cases_diff_then_write(
    toy: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _selected(toy)
    capsys.readouterr()
    before = (toy["out"] / "test_toy.yaml").read_text()
    results = _records(tmp_path / "ring.jsonl", PASSING_RUN)
    assert main(_refine(toy, "--results", str(results))) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "runs ring.jsonl: 3 cases recorded for toy (passed 2, xpassed 1), 1 outside test/"
    assert lines[2] == "entries: 2 changed (0 added, 0 removed, 2 modified); cases: 2 promoted, 0 demoted"
    assert lines[3].startswith("configs: 1 of 1 generated files in ")
    assert "left alone (not generated by testselect): 00-toy-device.yaml; --write applies it" in lines[3]
    assert "--- a/test_toy.yaml\n+++ b/test_toy.yaml\n" in out
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    assert (
        added
        == [
            "+        # device run: passed: passed on toy in run ring.jsonl",
            "+          mode: mandatory_success",
            '+          reason: "passed on toy in run ring.jsonl"',
        ]
        * 2
    )
    assert (toy["out"] / "test_toy.yaml").read_text() == before  # no --write: the configs are untouched
    assert main(_refine(toy, "--results", str(results), "--write", "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["written"] is True
    assert report["files"] == ["test_toy.yaml"]
    tests = yaml.safe_load((toy["out"] / "test_toy.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    modes = {(t["names"][0], json.dumps(t.get("only"))): t["mode"] for t in tests}
    assert modes[("TestToy::test_lacks", '{"dtypes": ["float32"]}')] == "mandatory_success"
    assert modes[("TestToy::test_add", '{"dtypes": ["float64"]}')] == "mandatory_success"
    assert modes[("TestToy::test_cuda_only", "null")] == "skip"
    assert (toy["out"] / "00-toy-device.yaml").read_text() == "test_suite_config:\n  files: []\n"
    assert main(_refine(toy, "--results", str(results))) == 0  # applied: nothing more to change
    assert "configs: 0 of 1 generated files" in capsys.readouterr().out
    # select itself now decides with the device facts: execution beats prediction
    again = tmp_path / "again"
    select = ["select", "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"])]
    assert main([*select, "--store", str(toy["store"]), "--out", str(again)]) == 0
    assert (again / "test_toy.yaml").read_text() == (toy["out"] / "test_toy.yaml").read_text()


def test_an_edited_test_forgets_its_device_outcomes(toy: dict[str, Path], tmp_path: Path) -> None:
    _selected(toy)
    assert main(_refine(toy, "--results", str(_records(tmp_path / "ring.jsonl", PASSING_RUN)), "--write")) == 0
    store = Store.open(toy["store"])
    assert device_store.totals(store, "toy") == {"device_cases": 3, "current": 3}
    source = toy["store"].parent / "torch" / "test" / "test_toy.py"
    source.write_text(source.read_text().replace(".cumsum(0)", ".cumsum(0).neg()"), encoding="utf-8")
    index_tree(source.parents[1], store)
    store.commit()
    assert device_store.totals(store, "toy") == {"device_cases": 3, "current": 2}  # test_lacks is stale
    store.close()
    assert main(_refine(toy, "--results", str(_records(tmp_path / "none.jsonl", [])), "--write")) == 0
    tests = yaml.safe_load((toy["out"] / "test_toy.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    reasons = {(t["names"][0], json.dumps(t.get("only"))): t["reason"] for t in tests}
    assert reasons[("TestToy::test_add", '{"dtypes": ["float64"]}')] == "passed on toy in run ring.jsonl"
    assert not any("passed on toy" in r for (name, _), r in reasons.items() if name == "TestToy::test_lacks")


def test_refine_bad_input_is_one_error_line(
    toy: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _selected(toy)
    capsys.readouterr()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD) + "\n" + '{"nodeid": "test/t.py::A::b", "outcome": 7}\n', encoding="utf-8")
    cases = [
        (
            ["--results", str(tmp_path / "missing")],
            f"error: {tmp_path / 'missing'}: no such run directory or results file",
        ),
        (["--results", str(bad)], f"error: {bad}:2: outcome: expected one of"),
        (["--results", str(tmp_path)], f"error: {tmp_path}: not a crcr run directory (no record.json)"),
    ]
    for extra, expected in cases:
        assert main(_refine(toy, *extra)) == 2
        err = capsys.readouterr().err
        assert err.startswith(expected), err
        assert err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    good = _records(tmp_path / "ok.jsonl", [])
    args = ["refine", "--profile", str(toy["profile"]), "--store", str(toy["store"]), "--results", str(good)]
    assert main([*args, "--configs", str(empty)]) == 2
    assert "no config generated by `testselect select`" in capsys.readouterr().err
    assert main([*args, "--configs", str(tmp_path / "nodir")]) == 2
    assert capsys.readouterr().err == f"error: --configs {tmp_path / 'nodir'}: not a directory\n"


@needs_testreuse
@pytest.mark.skipif(not HAVE_RING, reason="ringsim (the ring device) is not installed")
def test_refine_a_real_ring_run_demotes_the_failing_module_with_its_cause(tree: Path, tmp_path: Path) -> None:
    """An upstream file run on ring with testreuse's plugin; triage names the op ring lacks."""
    store, gen, out = tmp_path / "s.sqlite", tmp_path / "gen", tmp_path / "out"
    profile = REPO / "configs" / "backend.yaml"
    assert main(["index", "--torch-root", str(tree), "--store", str(store)]) == 0
    assert main(["select", "--profile", str(profile), "--store", str(store), "--out", str(gen)]) == 0
    out.mkdir()
    shutil.copy(gen / "test_modules.yaml", out)
    shutil.copy(EMBEDDED / "configs" / "00-ring-device.yaml", out)
    results = tmp_path / "ring.jsonl"
    pytest_args = ["-p", "no:cacheprovider", "-q", "--testreuse-config", str(out), "--testreuse-device", "ring"]
    pytest_args += ["--torch-root", str(tree), "--testreuse-results", str(results), str(tree / "test/test_modules.py")]
    pytest_args += ["-k", "test_forward and (BCELoss or nn_Linear_ring)"]
    run = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], capture_output=True, text=True, cwd=tmp_path)
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    argv = ["refine", "--results", str(results), "--configs", str(out), "--profile", str(profile)]
    assert main([*argv, "--store", str(store), "--write"]) == 0
    tests = yaml.safe_load((out / "test_modules.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    forward = [t for t in tests if t["names"] == ["TestModule::test_forward"]]
    assert forward[0]["mode"] == "mandatory_success"  # nn.Linear passed
    assert forward[1] == {
        "names": ["TestModule::test_forward"],
        "mode": "xfail_strict",
        "reason": "device lacks aten::binary_cross_entropy",
        "only": {"modules": ["nn.BCELoss"]},
    }
    validate = subprocess.run([sys.executable, "-m", "testreuse", "validate", str(out)], capture_output=True, text=True)
    assert validate.returncode == 0, validate.stdout + validate.stderr
