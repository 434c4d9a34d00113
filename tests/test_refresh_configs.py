"""tools/refresh_configs.py: the observation copy keeps rule locations, and rules split by what was observed."""

from __future__ import annotations

import yaml
from refresh_configs import _as_mandatory, _cause, _rewrite

CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_x.py
      tests:
        - names: [TestX::test_a]
          mode: xfail_strict
          reason: "ring: aten::sort is not implemented on this device"
        - names: [TestX::test_b]
          mode: skip
          reason: "too slow"
"""


def test_observation_copy_keeps_every_line_and_runs_xfail_rules_as_mandatory() -> None:
    copy = _as_mandatory(CONFIG)
    assert len(copy.splitlines()) == len(CONFIG.splitlines())
    rules = yaml.safe_load(copy)["test_suite_config"]["files"][0]["tests"]
    assert [r["mode"] for r in rules] == ["mandatory_success", "skip"]
    assert "reason" not in rules[0]
    assert rules[1]["reason"] == "too slow"


def _case(op: str, outcome: str) -> dict:
    return {"nodeid": f"test/test_x.py::TestXRING::test_a_{op}_ring_float32", "op": op, "outcome": outcome}


def test_a_rule_splits_into_what_passes_and_one_xfail_per_cause() -> None:
    cases = [_case("add", "passed"), _case("sort", "failed"), _case("topk", "failed"), _case("mul", "passed")]
    failures = {
        "TestXRING::test_a_sort_ring_float32": "NotImplementedError: ring: aten::sort is not implemented",
        "TestXRING::test_a_topk_ring_float32": "NotImplementedError: ring: aten::topk is not implemented",
    }
    text = _rewrite({"names": ["TestX::test_a"], "mode": "xfail_strict"}, cases, failures, indent="  ")
    rules = yaml.safe_load(text)
    modes = {r["mode"]: r for r in rules if r["mode"] == "mandatory_success"}
    assert modes["mandatory_success"]["only"] == {"ops": ["add", "mul"]}
    failing = [r for r in rules if r["mode"] == "xfail_strict"]
    assert {tuple(r["only"]["ops"]) for r in failing} == {("sort",), ("topk",)}
    assert all(r["reason"].startswith("NotImplementedError: ring: aten::") for r in failing)


def test_a_rule_whose_cases_all_pass_becomes_one_mandatory_rule_without_a_scope() -> None:
    text = _rewrite({"names": ["TestX::test_a"], "mode": "xfail"}, [_case("add", "passed")], {}, indent="")
    assert yaml.safe_load(text) == [{"names": ["TestX::test_a"], "mode": "mandatory_success"}]


def test_a_comparison_failure_is_summarised_by_its_numbers_not_pasted() -> None:
    message = (
        "AssertionError: Tensor-likes are not close!\n\nMismatched elements: 2 / 120 (1.7%)\n"
        "Greatest absolute difference: 0.0005 at index (2, 4) (up to 1e-05 allowed)\n"
    )
    assert _cause(message) == (
        "results differ from the CPU reference: Mismatched elements: 2 / 120 (1.7%); "
        "Greatest absolute difference: 0.0005 at index (2, 4) (up to 1e-05 allowed)"
    )


def test_module_rules_split_by_module_and_by_dtype_only_where_a_module_disagrees() -> None:
    def case(module: str, dtype: str, outcome: str) -> dict:
        nodeid = f"test/test_m.py::TestModuleRING::test_forward_{module}_ring_{dtype}"
        return {"nodeid": nodeid, "module": module, "dtypes": [dtype], "outcome": outcome}

    cases = [
        case("nn.A", "float32", "passed"),
        case("nn.A", "float16", "passed"),
        case("nn.B", "float32", "failed"),
        case("nn.B", "float16", "failed"),
        case("nn.C", "float32", "passed"),
        case("nn.C", "float16", "failed"),
    ]
    failures = {
        "TestModuleRING::test_forward_nn.B_ring_float32": "NotImplementedError: ring: aten::b is not implemented",
        "TestModuleRING::test_forward_nn.B_ring_float16": "NotImplementedError: ring: aten::b is not implemented",
        "TestModuleRING::test_forward_nn.C_ring_float16": "results differ from the CPU reference: 1 / 4",
    }
    rule = {"names": ["TestModule::test_forward"], "only": {"modules": ["nn.A", "nn.B", "nn.C"]}, "mode": "xfail"}
    rules = yaml.safe_load(_rewrite(rule, cases, failures, indent=""))
    scopes = {(r["mode"], tuple(r["only"]["modules"]), tuple(r["only"].get("dtypes", ()))) for r in rules}
    assert scopes == {
        ("mandatory_success", ("nn.A",), ()),
        ("mandatory_success", ("nn.C",), ("float32",)),
        ("xfail_strict", ("nn.B",), ()),
        ("xfail_strict", ("nn.C",), ("float16",)),
    }
    by_module = {r["only"]["modules"][0]: r.get("reason") for r in rules if r["mode"] == "xfail_strict"}
    assert by_module["nn.B"].endswith("aten::b is not implemented")
    assert by_module["nn.C"].startswith("results differ")
